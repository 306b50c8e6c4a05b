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

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from costmodel import statement as statement_pass
from costmodel.measurement import (
    FUNCTION_MEMORY_MB,
    PROVIDER_API,
    SCHEDULE_MINUTES,
    TRACE_STARTERS,
    Prices,
    Sample,
    lambda_milliseconds,
    payer,
)
from costmodel.statement import (
    STATEMENT_PRICED_AS,
    movements_and_orders_changed,
    period_seconds,
    statement_run_usd,
    statement_usd_per_movement,
    statement_usd_per_order_changed,
)
from devstack.capacity import Units
from functions.shared.tables import CHANGES_SHARDS
from infra.reconciliation import PASSES, RUNS_READING_AN_HOUR

DYNAMODB_METRICS = (
    "wru_transaction",
    "wru_standard",
    "wru_index",
    "rru_strong",
    "rru_eventual",
    "rru_transaction",
)
# The services billed by one counter of theirs: the quantity it goes to, and the counter.
BILLED_AS = {
    "dynamodbstreams": ("streams_reads", "requests"),
    "events": ("eventbridge_events", "billed"),
    "sesv2": ("ses_messages", "billed"),
    "secretsmanager": ("secrets_calls", "billed"),
    PROVIDER_API: ("provider_api_calls", "requests"),
}


def usage(
    sample: Sample,
    prices: Prices,
    webhook_queue: str,
    statement: statement_pass.StatementModel | None = None,
) -> Units:
    """What AWS would meter over the sample, in billing units; with `statement`, what the
    scheduled statement passes spend on the sample's movements (in dollars: modeled, not
    metered; a line priced as Stripe's hourly pass reads it)."""
    used = _requests_usage(sample, webhook_queue)
    _lambda_usage(sample, prices, used)
    used["rru"] = sum(used[m] for m in ("rru_strong", "rru_eventual", "rru_transaction"))
    if statement is not None:
        movements, orders = movements_and_orders_changed(sample)
        reads = statement.reads[STATEMENT_PRICED_AS].reads_of_each_row
        used["statement_lines"] = movements * reads
        used["statement_usd"] = movements * statement_usd_per_movement(
            statement, prices, STATEMENT_PRICED_AS
        ) + orders * statement_usd_per_order_changed(statement, prices)
    return used


def _requests_usage(sample: Sample, webhook_queue: str) -> Units:
    """The billed requests, in each service's billing units."""
    used = Units()
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
        elif service in BILLED_AS:
            quantity, counter = BILLED_AS[service]
            used[quantity] += units[counter]
        else:
            used[f"unpriced:{service}"] += units["requests"]
    return used


def _lambda_usage(sample: Sample, prices: Prices, used: Units) -> None:
    """Invocations, GB-seconds (modeled in AWS, and as run locally), log bytes and traces."""
    a = prices.assumptions
    overhead = a["cloudwatch_log_event_overhead_bytes"]
    modeled = lambda_milliseconds(sample, prices)
    log_bytes = 0.0
    for function, meters in sample.functions.items():
        if function not in FUNCTION_MEMORY_MB:
            continue
        invocations = meters["invocations"]
        gigabytes = FUNCTION_MEMORY_MB[function] / 1024
        used["lambda_invocations"] += invocations
        used["lambda_gb_seconds"] += modeled[function] / 1000 * gigabytes
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
    LineItem("X-Ray (HTTP API)", "xray_traces_http", "traces", Prices.xray_usd, rest=False),
    LineItem("X-Ray (REST API)", "xray_traces_rest", "traces", Prices.xray_usd, http=False),
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
    """What the stack costs a month whatever the events: the scheduled runs, then what stands."""
    return [*_scheduled_monthly(idle, prices, webhook_queue), *_standing_monthly(prices)]


def _scheduled_monthly(
    idle: Mapping[str, Sample], prices: Prices, webhook_queue: str
) -> list[MonthlyItem]:
    """The schedules' runs, each as its measured idle run (the statement's: modeled), and the
    statement's custom metrics."""
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
    statement_runs = {p: hours * 3600 / period_seconds(p) for p in statement_pass.SCHEDULED_RUNS}
    runs = sum(statement_runs.values())
    usd = sum(n * statement_run_usd(prices, p) for p, n in statement_runs.items())
    every = ", ".join(
        f"{p} every {period_seconds(p) / 3600:g} h" for p in statement_pass.SCHEDULED_RUNS
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
    return items


def _standing_monthly(prices: Prices) -> list[MonthlyItem]:
    """The event source's long polls, the secrets and their reads, the reconciliation's state
    machine, and what is billed by the month: a key, a dashboard, the WAF."""
    a = prices.assumptions
    hours = a["hours_per_month"]
    items = []
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
