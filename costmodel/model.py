"""`umavez cost` / `make cost`: the cost per million events, measured on the embedded stack.

The embedded stack runs with its server accounting every request (`--account-capacity`,
`devstack/accounting.py`: DynamoDB request units from the items written and read, SQS
64 KB chunks, EventBridge entries, SES recipients) under the function that made it, and with
every handler metered (`devstack/metering.py`: invocations, duration, log bytes). Then:

- **per kind**, dedicated scenarios of `per_kind` deliveries each: new payments (Stripe
  `payment_intent.succeeded`, the customer e-mailed), the same events again (duplicates),
  payments older than their order's refund (stale: the refund is delivered first, unmeasured),
  full refunds of the new payments (`refund.created` naming no order: found through the
  payment's binding). Each scenario: counters before, deliveries, drain, one reconciliation run
  (what the hourly run reads for these orders), counters after;
- **the drill mix**: the fire drill's stories (`firedrill/stories.py`) for `orders` orders,
  without faults: retries, resends, forgeries, every provider and kind in their proportions.

Per million events = (the scenario's counters x list price) / its deliveries x 10^6; a delivery
is one HTTP request to the webhook API (a provider's retry is another). What is not traffic is
left out of those numbers and priced per month instead: the scheduled functions' runs (each
run's idle cost is measured, and subtracted from the scenarios as many times as they ran:
the local schedules are seconds, AWS's minutes), the event source mapping's empty long polls,
and the local stack's own requests (drain, checks, sinks). Prices: `costmodel/prices.toml`.

Lambda duration is the handlers' own work, measured (wall clock minus the time spent waiting
on AWS calls), plus the calls they made, counted, at typical AWS latencies (`[latency_ms]` in
the prices file): the local moto server is one lock for every request and much slower than
AWS, so the local wall-clock time (printed too) is only an upper bound.

Long on purpose: the prices, the usage of each AWS service per sample and the rendered bill
form one model that `tests/unit/test_cost_model.py` checks against docs/cost.md.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from costmodel import markdown as md
from costmodel import statement as statement_pass
from devstack.capacity import Units
from functions.shared.tables import CHANGES_SHARDS
from infra import settings
from infra.reconciliation import PASSES, RUNS_READING_AN_HOUR

PRICES_PATH = Path(__file__).with_name("prices.toml")
README_BEGIN = "<!-- cost:begin -->"
README_END = "<!-- cost:end -->"
KINDS = ("new payment", "duplicate", "stale", "refund")
MIX = "drill mix"
# The stack's Lambda memory (infra/constructs/pipeline.py; tests/infra pins them) and schedules.
FUNCTION_MEMORY_MB = {
    "ingest": 512,
    "process": 256,
    "outbox": 256,
    "sweeper": 256,
    "waiting": 256,
    "reconciliation": 1024,
    statement_pass.FUNCTION: statement_pass.MEMORY_MB,
}
SCHEDULE_MINUTES = settings.SCHEDULE_MINUTES
# Functions whose invocations start a trace of their own (Lambda active tracing): the stream's
# sender and the schedules. Ingest starts one only with the HTTP API; process never does.
TRACE_STARTERS = ("outbox", "sweeper", "waiting", "reconciliation", statement_pass.FUNCTION)
# The provider whose reads price the statement's line in the cost per event (the scenarios are
# Stripe's); the page's table of the pass per provider says what the others cost.
STATEMENT_PRICED_AS = "stripe"
# Requests no function made but AWS bills: Lambda's SQS event source mapping receives and
# deletes on the webhook queue (DynamoDB Streams reads by a Lambda trigger are free).
EVENT_SOURCE_SQS_OPERATIONS = {
    "ReceiveMessage",
    "DeleteMessage",
    "DeleteMessageBatch",
    "ChangeMessageVisibility",
    "ChangeMessageVisibilityBatch",
}
PROVIDER_API = "provider-api"
PROVIDER_API_CALLER = "process"

AwsKey = tuple[str, str, str, str]  # caller, service, operation, resource


# -- prices ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    name: str
    usd: float
    per: float
    unit: str
    source: str
    as_of: str
    note: str = ""

    @property
    def rate(self) -> float:
        return self.usd / self.per


@dataclass(frozen=True)
class Prices:
    prices: dict[str, Price]
    assumptions: dict[str, float]
    latency_ms: dict[str, float]

    @classmethod
    def load(cls, path: Path = PRICES_PATH) -> Prices:
        loaded = tomllib.loads(path.read_text())
        prices = {
            name: Price(
                name,
                float(entry["usd"]),
                float(entry["per"]),
                str(entry["unit"]),
                str(entry["source"]),
                str(entry["as_of"]),
                str(entry.get("note", "")),
            )
            for name, entry in loaded["prices"].items()
        }
        assumptions = {k: float(v) for k, v in loaded["assumptions"].items()}
        latency = {k: float(v) for k, v in loaded["latency_ms"].items()}
        return cls(prices, assumptions, latency)

    def rate(self, name: str) -> float:
        return self.prices[name].rate

    def latency(self, service: str, operation: str) -> float:
        """Milliseconds a Lambda waits on one call, in AWS (an assumption: `[latency_ms]`)."""
        found = self.latency_ms.get(f"{service}.{operation}", self.latency_ms.get(service))
        return found if found is not None else self.latency_ms["default"]


# -- what was measured -------------------------------------------------------------------------


@dataclass
class Sample:
    """Counters over one scenario: the server's accounting rows and the functions' meters."""

    events: int = 0
    aws: dict[AwsKey, Units] = field(default_factory=dict)
    functions: dict[str, Units] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        accounting: Iterable[Mapping[str, Any]],
        metering: Mapping[str, Any],
        provider_api_calls: int = 0,
    ) -> Sample:
        """`provider_api_calls`: reads from the providers' APIs (the local fakes), made by
        process: no AWS bill, but Lambda time."""
        aws = {
            (row["caller"], row["service"], row["operation"], row["resource"]): Units(row["units"])
            for row in accounting
        }
        functions = {name: Units(counters) for name, counters in metering.items()}
        if provider_api_calls:
            aws[(PROVIDER_API_CALLER, PROVIDER_API, "GET", "")] = Units(
                {"requests": provider_api_calls}
            )
        return cls(0, aws, functions)

    def minus(self, other: Sample) -> Sample:
        """Counter subtraction: what `other` did not already count (never below zero)."""
        aws = {k: v.minus(other.aws.get(k, Units())) for k, v in self.aws.items()}
        functions = {k: v.minus(other.functions.get(k, Units())) for k, v in self.functions.items()}
        return Sample(self.events, _nonempty(aws), _nonempty(functions))

    def scaled(self, factor: float) -> Sample:
        return Sample(
            self.events,
            {k: v.scaled(factor) for k, v in self.aws.items()},
            {k: v.scaled(factor) for k, v in self.functions.items()},
        )

    def only(self, function: str) -> Sample:
        """One function's own requests and meters."""
        return Sample(
            self.events,
            {k: v for k, v in self.aws.items() if k[0] == function},
            {k: v for k, v in self.functions.items() if k == function},
        )

    def invocations(self, function: str) -> float:
        return float(self.functions.get(function, Units())["invocations"])

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.events,
            "aws": [{"key": list(k), "units": dict(v)} for k, v in sorted(self.aws.items())],
            "functions": {k: dict(v) for k, v in sorted(self.functions.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sample:
        aws = {
            (row["key"][0], row["key"][1], row["key"][2], row["key"][3]): Units(row["units"])
            for row in data["aws"]
        }
        functions = {k: Units(v) for k, v in data["functions"].items()}
        return cls(int(data["events"]), aws, functions)


def _nonempty(counters: dict[Any, Units]) -> dict[Any, Units]:
    return {k: v for k, v in counters.items() if v}


def without_idle(sample: Sample, idle: Mapping[str, Sample]) -> Sample:
    """Takes out the scheduled functions' runs: each run, as many times as it ran, costs what
    one idle run costs (priced per month instead); what they did beyond that stays."""
    for function, one_run in idle.items():
        runs = sample.invocations(function)
        if runs:
            events = sample.events
            sample = sample.minus(one_run.scaled(runs))
            sample.events = events
    return sample


@dataclass
class Measurement:
    options: dict[str, Any]
    kinds: dict[str, Sample]
    idle: dict[str, Sample]
    mix: Sample | None
    measured_on: str
    elapsed_seconds: float
    excluded_requests: int = 0

    def scenarios(self) -> dict[str, Sample]:
        found = {k: without_idle(v, self.idle) for k, v in self.kinds.items()}
        if self.mix is not None:
            found[MIX] = without_idle(self.mix, self.idle)
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "options": self.options,
            "kinds": {k: v.to_json() for k, v in self.kinds.items()},
            "idle": {k: v.to_json() for k, v in self.idle.items()},
            "mix": self.mix.to_json() if self.mix is not None else None,
            "measured_on": self.measured_on,
            "elapsed_seconds": self.elapsed_seconds,
            "excluded_requests": self.excluded_requests,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        return cls(
            dict(data["options"]),
            {k: Sample.from_json(v) for k, v in data["kinds"].items()},
            {k: Sample.from_json(v) for k, v in data["idle"].items()},
            Sample.from_json(data["mix"]) if data.get("mix") else None,
            str(data["measured_on"]),
            float(data["elapsed_seconds"]),
            int(data.get("excluded_requests", 0)),
        )


# -- from counters to dollars ------------------------------------------------------------------


def payer(key: AwsKey, webhook_queue: str) -> str | None:
    """Who a request is billed to: the function that made it, Lambda's event source mappings,
    or nobody (the local stack's own requests: drain, checks, sinks)."""
    caller, service, operation, resource = key
    if caller in FUNCTION_MEMORY_MB:
        return caller
    if service == "sqs" and resource == webhook_queue and operation in EVENT_SOURCE_SQS_OPERATIONS:
        return "process (event source)"
    if service == "dynamodbstreams":
        return "outbox (event source)"
    return None


def lambda_milliseconds(sample: Sample, prices: Prices) -> Units:
    """Each function's billed time in AWS over the sample: its own work, measured, plus every
    AWS call it made at the typical latency of `[latency_ms]`, plus 0.5 ms an invocation for
    the rounding up to 1 ms (the local wall clock is only an upper bound)."""
    waits = Units()
    for (caller, service, operation, _), units in sample.aws.items():
        waits[caller] += units["requests"] * prices.latency(service, operation)
    return Units(
        {
            function: meters["compute_ms"] + waits[function] + 0.5 * meters["invocations"]
            for function, meters in sample.functions.items()
        }
    )


DYNAMODB_METRICS = (
    "wru_transaction",
    "wru_standard",
    "wru_index",
    "rru_strong",
    "rru_eventual",
    "rru_transaction",
)


def usage(
    sample: Sample,
    prices: Prices,
    webhook_queue: str,
    statement: statement_pass.StatementModel | None = None,
) -> Units:
    """What AWS would meter over the sample, in billing units; with `statement`, what the
    scheduled statement passes spend on the sample's movements (in dollars: modeled, not
    metered; a line priced as Stripe's hourly pass reads it)."""
    a = prices.assumptions
    overhead = a["cloudwatch_log_event_overhead_bytes"]
    used: Units = Units()
    for key, units in sample.aws.items():
        if payer(key, webhook_queue) is None:
            continue
        service = key[1]
        if service == "dynamodb":
            for metric, amount in units.items():
                kind = metric.split(":", 1)[0]
                if kind in DYNAMODB_METRICS:
                    used[kind] += amount
        elif service == "sqs":
            used["sqs_requests"] += units["billed"] - units["empty_receives"]
        elif service == "dynamodbstreams":
            used["streams_reads"] += units["requests"]
        elif service == "events":
            used["eventbridge_events"] += units["billed"]
        elif service == "sesv2":
            used["ses_messages"] += units["billed"]
        elif service == "secretsmanager":
            used["secrets_calls"] += units["billed"]
        elif service == PROVIDER_API:
            used["provider_api_calls"] += units["requests"]
        else:
            used[f"unpriced:{service}"] += units["requests"]
    modeled = lambda_milliseconds(sample, prices)
    log_bytes = 0.0
    for function, meters in sample.functions.items():
        if function not in FUNCTION_MEMORY_MB:
            continue
        invocations = meters["invocations"]
        gigabytes = FUNCTION_MEMORY_MB[function] / 1024
        used["lambda_invocations"] += invocations
        milliseconds = modeled[function]
        used["lambda_gb_seconds"] += milliseconds / 1000 * gigabytes
        used["local_gb_seconds"] += meters["billed_ms"] / 1000 * gigabytes
        log_bytes += meters["log_bytes"] + meters["emf_bytes"]
        log_bytes += overhead * (meters["log_lines"] + meters["emf_lines"])
        log_bytes += invocations * (
            a["lambda_platform_log_bytes"] + overhead * a["lambda_platform_log_lines"]
        )
    used["api_requests"] = sample.invocations("ingest")
    log_bytes += used["api_requests"] * (a["api_access_log_bytes"] + overhead)
    used["log_bytes"] = log_bytes
    # Traces as the stack starts them (infra/constructs/pipeline.py): one per sampled webhook,
    # started by ingest at Lambda's fixed rate with the HTTP API, by the REST stage at the
    # stack's `xraySampling`; process continues it; the stream and the schedules start their own.
    lambda_rate = a["lambda_xray_sampling"]
    own_traces = (
        sum(sample.invocations(f) for f in TRACE_STARTERS if f in sample.functions) * lambda_rate
    )
    used["xray_traces_http"] = used["api_requests"] * lambda_rate + own_traces
    used["xray_traces_rest"] = used["api_requests"] * a["xray_sampling"] + own_traces
    used["rru"] = sum(used[m] for m in ("rru_strong", "rru_eventual", "rru_transaction"))
    if statement is not None:
        movements, orders = movements_and_orders_changed(sample)
        reads = statement.reads[STATEMENT_PRICED_AS].reads_of_each_row
        used["statement_lines"] = movements * reads
        used["statement_usd"] = movements * statement_usd_per_movement(
            statement, prices, STATEMENT_PRICED_AS
        ) + orders * statement_usd_per_order_changed(statement, prices)
    return used


# -- the statement pass ------------------------------------------------------------------------


def movements_and_orders_changed(sample: Sample) -> tuple[float, float]:
    """What the provider's books list for the sample, as measured: a line per effect process
    committed (a payment, a capture, a refund, a dispute: its transaction; the cancelled ones
    moved nothing), and the orders that entered an hour of the `changed` index (its entry, 1
    WRU each at these sizes), which every provider's pass matches."""
    movements = 0.0
    orders = 0.0
    for (caller, service, operation, _), units in sample.aws.items():
        if caller != "process" or service != "dynamodb":
            continue
        for metric, amount in units.items():
            if metric.startswith("wru_index:") and metric.endswith("/changed"):
                orders += amount
        if operation == "TransactWriteItems":
            cancelled = sum(v for k, v in units.items() if k.startswith("cancelled_transactions"))
            movements += units["requests"] - cancelled
    return movements, orders


def statement_own_work(measurement: Measurement) -> statement_pass.OwnWork:
    """The pass's own work per line, measured on process's same path: a line booked already
    is read as a duplicate delivery is (its per-event work), a line booked now as a new
    payment."""
    scenarios = measurement.scenarios()

    def per_event(kind: str) -> float:
        sample = scenarios[kind]
        return sample.functions.get("process", Units())["compute_ms"] / max(sample.events, 1)

    return statement_pass.OwnWork(per_event("duplicate"), per_event("new payment"))


def statement_model(measurement: Measurement, prices: Prices) -> statement_pass.StatementModel:
    return statement_pass.StatementModel(
        prices.latency,
        statement_own_work(measurement),
        prices.assumptions,
        statement_pass.provider_reads(prices.assumptions),
        statement_pass.load_provider_limits(),
    )


def _dynamodb_usd(units: Mapping[str, float], prices: Prices) -> float:
    writes = sum(v for k, v in units.items() if k.startswith("wru"))
    reads = sum(v for k, v in units.items() if k.startswith("rru"))
    return writes * prices.rate("dynamodb_write_request_unit") + reads * prices.rate(
        "dynamodb_read_request_unit"
    )


def _statement_lambda_usd(seconds: float, prices: Prices) -> float:
    gigabytes = statement_pass.MEMORY_MB / 1024
    return seconds * gigabytes * prices.rate("lambda_arm_gb_second")


def statement_usd_per_movement(
    model: statement_pass.StatementModel, prices: Prices, provider: str
) -> float:
    """A movement's line, as often as the provider's passes read it: DynamoDB and Lambda time."""
    return _dynamodb_usd(model.units_per_movement(provider), prices) + _statement_lambda_usd(
        model.seconds_per_movement(provider), prices
    )


def statement_usd_per_order_changed(model: statement_pass.StatementModel, prices: Prices) -> float:
    """An order changed, matched by every provider's pass: its entries read, and their time."""
    return _dynamodb_usd(model.units_per_order_changed(), prices) + _statement_lambda_usd(
        model.seconds_per_order_changed(), prices
    )


def statement_usd_per_payment(
    model: statement_pass.StatementModel, prices: Prices, provider: str
) -> dict[str, float]:
    """A payment of `provider`'s (its movements, its order matched), by what bills it."""
    movements = model.movements_per_payment
    lines = _dynamodb_usd(model.units_per_movement(provider), prices) * movements
    match = _dynamodb_usd(model.units_per_order_changed(), prices)
    seconds = model.seconds_per_movement(provider) * movements + model.seconds_per_order_changed()
    return {"Lambda duration": _statement_lambda_usd(seconds, prices), "DynamoDB": lines + match}


def statement_run_usd(prices: Prices, provider: str = STATEMENT_PRICED_AS) -> float:
    """One pass with nothing to book: its invocation and time (a cold start, its secret, its
    checkpoint, the `changed` index, its record, a page), its DynamoDB units, its secret's read
    (the 5-minute cache outlives no hour), a trace (X-Ray's reservoir of one a second samples
    every run of a function invoked three times an hour) and its log bytes."""
    a = prices.assumptions
    seconds = statement_pass.run_fixed_ms(prices.latency, a, provider) / 1000
    log_bytes = a["statement_log_bytes_per_run"]
    return (
        prices.rate("lambda_request")
        + _statement_lambda_usd(seconds, prices)
        + _dynamodb_usd(statement_pass.run_fixed_units(provider), prices)
        + prices.rate("secrets_manager_api_call")
        + _xray(prices)
        + log_bytes * prices.rate("cloudwatch_logs_ingested_gb") / 2**30
    )


@dataclass(frozen=True)
class LineItem:
    name: str
    quantity: str  # a key of `usage`
    unit: str
    price: Callable[[Prices], float]
    http: bool = True  # in the HTTP API total
    rest: bool = True  # in the REST + WAF total
    shown: str = ""  # the quantity the per-event table shows, when not the one priced


def _rate(name: str) -> Callable[[Prices], float]:
    return lambda prices: prices.rate(name)


def _per_byte(name: str) -> Callable[[Prices], float]:
    return lambda prices: prices.rate(name) / 2**30


def _xray(prices: Prices) -> float:
    retrieved = prices.assumptions["xray_retrieved_per_trace"]
    return prices.rate("xray_trace_recorded") + retrieved * prices.rate("xray_trace_retrieved")


LINE_ITEMS = (
    LineItem(
        "API Gateway HTTP API",
        "api_requests",
        "requests",
        _rate("api_gateway_http_request"),
        rest=False,
    ),
    LineItem(
        "API Gateway REST API",
        "api_requests",
        "requests",
        _rate("api_gateway_rest_request"),
        http=False,
    ),
    LineItem("WAF", "api_requests", "requests", _rate("waf_request"), http=False),
    LineItem("Lambda requests", "lambda_invocations", "invocations", _rate("lambda_request")),
    LineItem("Lambda duration", "lambda_gb_seconds", "GB-s", _rate("lambda_arm_gb_second")),
    LineItem("SQS", "sqs_requests", "requests", _rate("sqs_request")),
    LineItem(
        "DynamoDB transactions", "wru_transaction", "WRU", _rate("dynamodb_write_request_unit")
    ),
    LineItem(
        "DynamoDB standard writes", "wru_standard", "WRU", _rate("dynamodb_write_request_unit")
    ),
    LineItem("DynamoDB index writes", "wru_index", "WRU", _rate("dynamodb_write_request_unit")),
    LineItem("DynamoDB reads", "rru", "RRU", _rate("dynamodb_read_request_unit")),
    LineItem("EventBridge", "eventbridge_events", "events", _rate("eventbridge_event")),
    LineItem("X-Ray (HTTP API)", "xray_traces_http", "traces", _xray, rest=False),
    LineItem("X-Ray (REST API)", "xray_traces_rest", "traces", _xray, http=False),
    LineItem("CloudWatch Logs", "log_bytes", "bytes", _per_byte("cloudwatch_logs_ingested_gb")),
    # Modeled, not measured (costmodel/statement.py): priced in dollars, shown in lines read.
    LineItem(
        "Statement pass (hourly)",
        "statement_usd",
        "lines",
        lambda prices: 1.0,
        shown="statement_lines",
    ),
    LineItem("SES e-mail", "ses_messages", "messages", _rate("ses_message"), False, False),
)


@dataclass(frozen=True)
class Bill:
    """One scenario: per event, the quantity and the dollars per million events of each line."""

    events: int
    quantities: dict[str, float]  # per event, by line item name
    per_million: dict[str, float]  # USD per million events, by line item name

    @property
    def http_total(self) -> float:
        return sum(self.per_million[i.name] for i in LINE_ITEMS if i.http)

    @property
    def rest_total(self) -> float:
        return sum(self.per_million[i.name] for i in LINE_ITEMS if i.rest)


def bill(
    sample: Sample,
    prices: Prices,
    webhook_queue: str,
    statement: statement_pass.StatementModel | None = None,
) -> Bill:
    used = usage(sample, prices, webhook_queue, statement)
    events = max(sample.events, 1)
    quantities = {i.name: used[i.shown or i.quantity] / events for i in LINE_ITEMS}
    per_million = {i.name: used[i.quantity] / events * i.price(prices) * 1e6 for i in LINE_ITEMS}
    return Bill(sample.events, quantities, per_million)


@dataclass(frozen=True)
class MonthlyItem:
    name: str
    how: str
    usd: float
    rest_only: bool = False


def reconciliation_transitions_per_run() -> int:
    """A run's state transitions when every unit it may plan holds changes: Plan, the Map and
    Finish, and per unit one check, its Choice and its Succeed (a unit of more orders than one
    invocation reads adds two a further invocation). A unit is one pass of one hour of one
    shard, and each pass reads two hours (the one it started in again)."""
    units = PASSES * RUNS_READING_AN_HOUR * CHANGES_SHARDS
    return 3 + 3 * units


def fixed_monthly(
    idle: Mapping[str, Sample], prices: Prices, webhook_queue: str
) -> list[MonthlyItem]:
    a = prices.assumptions
    hours = a["hours_per_month"]
    items = []
    for function, minutes in SCHEDULE_MINUTES.items():
        if function not in idle:
            continue
        runs = hours * 60 / minutes
        one = bill(Sample(1, idle[function].aws, idle[function].functions), prices, webhook_queue)
        items.append(
            MonthlyItem(
                f"{function} (every {minutes} min)",
                f"{runs:,.0f} runs x ${one.http_total / 1e6:.7f} measured idle run",
                runs * one.http_total / 1e6,
            )
        )
    # A run per provider on its cadence: Stripe's and Mercado Pago's hourly, Asaas's daily.
    statement_runs = {
        p: hours * 3600 / statement_pass.period_seconds(p) for p in statement_pass.SCHEDULED_RUNS
    }
    runs = sum(statement_runs.values())
    usd = sum(n * statement_run_usd(prices, p) for p, n in statement_runs.items())
    every = ", ".join(
        f"{p} every {statement_pass.period_seconds(p) / 3600:g} h"
        for p in statement_pass.SCHEDULED_RUNS
    )
    items.append(
        MonthlyItem(
            f"statement (a run per provider: {every})",
            f"{runs:,.0f} runs x ${usd / runs:.7f} a run with nothing to book (modeled: a cold "
            "start, its secret, its checkpoint, the `changed` index, its record, a page)",
            usd,
        )
    )
    metrics = a["statement_custom_metrics"]
    items.append(
        MonthlyItem(
            "CloudWatch metrics of the statement",
            f"{metrics:.0f} custom metrics (EMF, by service only: windows, lines, booked, "
            "mismatches and one per kind, interrupted, lag)",
            metrics * prices.rate("cloudwatch_custom_metric_month"),
        )
    )
    polls = a["sqs_event_source_pollers"] * hours * 3600 / a["sqs_long_poll_seconds"]
    items.append(
        MonthlyItem(
            "SQS long polls of the event source mapping",
            f"{polls:,.0f} empty receives ({a['sqs_event_source_pollers']:.0f} pollers, "
            f"{a['sqs_long_poll_seconds']:.0f} s)",
            polls * prices.rate("sqs_request"),
        )
    )
    secrets = a["secrets"]
    items.append(
        MonthlyItem(
            "Secrets Manager",
            f"{secrets:.0f} secrets",
            secrets * prices.rate("secrets_manager_secret_month"),
        )
    )
    # Functions read their secrets through a 5-minute cache: the calls follow the containers
    # kept warm, not the events (a short local run, all cold starts, would bill them per event).
    reads = a["warm_containers"] * a["secrets_read_per_container"] * hours * 60 / 5
    items.append(
        MonthlyItem(
            "Secrets Manager reads",
            f"{reads:,.0f} reads ({a['warm_containers']:.0f} warm ingest and process "
            f"containers x {a['secrets_read_per_container']:.1f} secrets, every 5 min)",
            reads * prices.rate("secrets_manager_api_call"),
        )
    )
    runs = hours * 60 / SCHEDULE_MINUTES["reconciliation"]
    transitions = reconciliation_transitions_per_run()
    items.append(
        MonthlyItem(
            "Step Functions (the reconciliation's runs)",
            f"{runs:,.0f} runs x {transitions} state transitions at most "
            f"(every shard of the hours read holding changes)",
            runs * transitions * prices.rate("step_functions_state_transition"),
        )
    )
    items.append(MonthlyItem("KMS key (alarm topic)", "1 key", prices.rate("kms_key_month")))
    items.append(
        MonthlyItem(
            "CloudWatch dashboard", "1 dashboard", prices.rate("cloudwatch_dashboard_month")
        )
    )
    rules = a["waf_rules"]
    items.append(
        MonthlyItem(
            "WAF web ACL",
            f"1 web ACL, {rules:.0f} rules",
            prices.rate("waf_web_acl_month") + rules * prices.rate("waf_rule_month"),
            rest_only=True,
        )
    )
    return items


# -- rendering ---------------------------------------------------------------------------------


def render_block(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """The cost section between its markers (in docs/cost.md): its shape never depends on the
    numbers (`tests/unit/test_cost_model.py` checks docs/cost.md against it)."""
    scenarios = measurement.scenarios()
    statement = statement_model(measurement, prices)
    bills = {
        name: bill(sample, prices, webhook_queue, statement) for name, sample in scenarios.items()
    }
    columns = [*KINDS, MIX]
    options = measurement.options
    lines = [
        README_BEGIN,
        f"Measured by `make cost` (`umavez cost --orders {options['orders']} --per-kind "
        f"{options['per_kind']}`) on {measurement.measured_on}, on the embedded stack; list "
        "prices in us-east-1 from `costmodel/prices.toml`, arm64, X-Ray: the REST stage "
        f"samples {prices.assumptions['xray_sampling']:.0%} (`xraySampling`), Lambda "
        f"{prices.assumptions['lambda_xray_sampling']:.0%} of the traces it starts. Each kind: "
        f"{options['per_kind']} deliveries of its own; the drill mix: "
        f"{bills[MIX].events if MIX in bills else 0:,} deliveries (HTTP requests, retries "
        f"and forgeries included) of {options['orders']} orders, without faults.",
        "",
        "| per million events | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for item in LINE_ITEMS:
        if item.name == "SES e-mail":
            continue
        lines.append(
            f"| {item.name} | "
            + " | ".join(
                md.usd(bills[c].per_million[item.name]) if c in bills else "-" for c in columns
            )
            + " |"
        )
    for label, rest in (("**total, HTTP API**", False), ("**total, REST API + WAF**", True)):
        lines.append(
            f"| {label} | "
            + " | ".join(
                f"**{md.usd(bills[c].rest_total if rest else bills[c].http_total)}**"
                if c in bills
                else "-"
                for c in columns
            )
            + " |"
        )
    lines.append(
        "| SES e-mail (not in the totals) | "
        + " | ".join(
            md.usd(bills[c].per_million["SES e-mail"]) if c in bills else "-" for c in columns
        )
        + " |"
    )
    lines += [
        "",
        "What each event used (per event, in billing units):",
        "",
        "| per event | unit | " + " | ".join(columns) + " |",
        "|---|---|" + "---:|" * len(columns),
    ]
    for item in LINE_ITEMS:
        if item.name in ("API Gateway REST API", "WAF"):
            continue
        name = "API Gateway / WAF" if item.name == "API Gateway HTTP API" else item.name
        lines.append(
            f"| {name} | {item.unit} | "
            + " | ".join(
                md.quantity(bills[c].quantities[item.name]) if c in bills else "-" for c in columns
            )
            + " |"
        )
    lines += ["", *render_statement_block(statement, prices)]
    lines += [
        "",
        "Fixed per month (not per event):",
        "",
        "| item | how | per month |",
        "|---|---|---:|",
    ]
    monthly = fixed_monthly(measurement.idle, prices, webhook_queue)
    for entry in monthly:
        name = f"{entry.name} (REST + WAF only)" if entry.rest_only else entry.name
        lines.append(f"| {name} | {entry.how} | {md.usd(entry.usd)} |")
    monthly_http = sum(e.usd for e in monthly if not e.rest_only)
    lines.append(f"| **total, HTTP API** | | **{md.usd(monthly_http)}** |")
    lines.append(f"| **total, REST API + WAF** | | **{md.usd(sum(e.usd for e in monthly))}** |")
    lines.append(README_END)
    return "\n".join(lines) + "\n"


def render_statement_block(model: statement_pass.StatementModel, prices: Prices) -> list[str]:
    """The statement pass per million payments of one provider (its line above is Stripe's):
    each provider's reads differ, its DynamoDB per line does not."""
    booked_now = prices.assumptions["statement_booked_now_share"]
    lines = [
        "The statement pass per million payments of one provider (modeled, costmodel/statement.py:"
        f" {model.movements_per_payment:g} movements a payment, {booked_now:.0%}"
        " of them booked now, each order matched by the scheduled passes (Stripe's and Mercado"
        " Pago's hourly, Asaas's daily: each Brazil day once); the line above is priced as"
        " Stripe's):",
        "",
        "| per million payments | API calls | lines read | Lambda duration | DynamoDB | total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for provider in statement_pass.PROVIDERS_A_RUN:
        usd = statement_usd_per_payment(model, prices, provider)
        calls = model.reads[provider].calls_per_payment() * 1e6
        read = model.lines_per_payment(provider) * 1e6
        lines.append(
            f"| {provider} | {md.quantity(calls)} | {md.quantity(read)} | "
            f"{md.usd(usd['Lambda duration'] * 1e6)} | {md.usd(usd['DynamoDB'] * 1e6)} | "
            f"**{md.usd(sum(usd.values()) * 1e6)}** |"
        )
    return lines


def shape(block: str) -> str:
    """The block with every number masked: what the generator fixes, not what it measured."""
    return re.sub(r"\d[\d,.]*", "#", block)


def render_details(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """For the terminal: where the drill mix's DynamoDB capacity and Lambda time go."""
    scenarios = measurement.scenarios()
    name = MIX if MIX in scenarios else KINDS[0]
    sample = scenarios[name]
    events = max(sample.events, 1)
    out = [f"\n  DynamoDB per event, {name} (by who pays, request and table):"]
    rows = []
    for key, units in sample.aws.items():
        who = payer(key, webhook_queue)
        if who is None or key[1] != "dynamodb":
            continue
        wru = sum(v for k, v in units.items() if k.split(":")[0].startswith("wru"))
        rru = sum(v for k, v in units.items() if k.split(":")[0].startswith("rru"))
        usd = (
            (
                wru * prices.rate("dynamodb_write_request_unit")
                + rru * prices.rate("dynamodb_read_request_unit")
            )
            / events
            * 1e6
        )
        rows.append(
            (usd, who, key[2], key[3], units["requests"] / events, wru / events, rru / events)
        )
    for usd, who, operation, table, requests, wru, rru in sorted(rows, reverse=True):
        out.append(
            f"    {who:<24} {operation:<20} {table:<16} {requests:6.2f} req  "
            f"{wru:6.2f} WRU  {rru:6.2f} RRU  {md.usd(usd):>8}/M"
        )
    out.append(f"\n  Lambda per event, {name} (local wall clock; own work; modeled in AWS):")
    waits = Units()
    calls = Units()
    for (caller, service, operation, _), units in sample.aws.items():
        waits[caller] += units["requests"] * prices.latency(service, operation)
        calls[caller] += units["requests"]
    for function, meters in sorted(sample.functions.items()):
        runs = meters["invocations"]
        if function not in FUNCTION_MEMORY_MB or not runs:
            continue
        modeled = (meters["compute_ms"] + waits[function]) / runs + 0.5
        out.append(
            f"    {function:<16} {runs / events:5.2f} invocations of "
            f"{FUNCTION_MEMORY_MB[function]:>4} MB: {meters['billed_ms'] / runs:7.1f} ms local, "
            f"{meters['compute_ms'] / runs:6.1f} ms own work + {calls[function] / runs:5.1f} "
            f"AWS calls = {modeled:6.1f} ms modeled; "
            f"{(meters['log_bytes'] + meters['emf_bytes']) / runs:5.0f} log bytes"
        )
    out.append(
        f"\n  not billed: {measurement.excluded_requests:,} requests the local stack made itself "
        "(drain, sinks, checks, polling)\n"
    )
    return "\n".join(out)


@dataclass
class CostOptions:
    orders: int = 52
    per_kind: int = 20
    seed: int = 42


def webhook_queue() -> str:
    from devstack.resources import WEBHOOK_QUEUE_NAME

    return WEBHOOK_QUEUE_NAME
