"""What the models count with: the list prices of prices.toml, AWS's quotas of quotas.toml and
the stack's settings as deployed by default (infra/ and the functions' named constants); and what
`umavez cost` measured: each scenario's counters (the server's accounting of every request under
the function that made it, the functions' meters), the scheduled functions' idle runs taken out,
who pays for each request, each function's time in AWS."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.capacity import Units
from functions.process.waiting import WAIT_LIMIT_SECONDS
from functions.reconcile.mismatches import PENDING_DEADLINE_SECONDS
from functions.shared.settings import DEFAULT_OUTBOX_GIVE_UP_HOURS
from functions.shared.tables import CHANGES_SHARDS, OUTBOX_DUE_SHARDS
from infra import settings
from infra.mappings import DEFAULT_PROCESS_MAX_CONCURRENCY
from infra.reconciliation import RECONCILIATION

HOUR = 3600.0
DAY = 24 * HOUR
PRICES_PATH = Path(__file__).with_name("prices.toml")
QUOTAS_PATH = Path(__file__).with_name("quotas.toml")
MEASURED_PATH = Path(__file__).with_name("measured.json")
KINDS = ("new payment", "duplicate", "stale", "refund")
MIX = "drill mix"
# DynamoDB's request units as the server accounts them (`kind:table[/index]`).
TABLE_WRU_METRICS = ("wru_transaction", "wru_standard")  # an index's, `wru_index`, apart
RRU_METRICS = ("rru_strong", "rru_eventual", "rru_transaction")
# The stack's Lambda memory and schedules, as deployed.
FUNCTION_MEMORY_MB = settings.LAMBDA_MEMORY_MB
SCHEDULE_MINUTES = settings.SCHEDULE_MINUTES
# Functions whose invocations start a trace of their own (Lambda active tracing): the stream's
# sender and the schedules. Ingest starts one only with the HTTP API; process never does.
TRACE_STARTERS = ("outbox", "sweeper", "waiting", "reconciliation", "statement")
# Requests no function made but AWS bills: Lambda's SQS event source mapping receives and
# deletes on the webhook queue (DynamoDB Streams reads by a Lambda trigger are free).
EVENT_SOURCE_SQS_OPERATIONS = frozenset(
    {"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch"}
    | {"ChangeMessageVisibility", "ChangeMessageVisibilityBatch"}
)
PROVIDER_API = "provider-api"
PROVIDER_API_CALLER = "process"

AwsKey = tuple[str, str, str, str]  # caller, service, operation, resource


# -- prices, quotas, settings ------------------------------------------------------------------


def numbers(loaded: Mapping[str, Any], table: str) -> dict[str, float]:
    """A TOML table of plain figures (`[assumptions]`, `[latency_ms]`)."""
    return {name: float(value) for name, value in loaded[table].items()}


def of_kind(units: Mapping[str, float], kind: str) -> float:
    """Request units of one kind (`rru`, `wru`), whatever their consistency or index."""
    return sum(v for k, v in units.items() if k.startswith(kind))


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
            name: Price(name, **{**entry, "usd": float(entry["usd"]), "per": float(entry["per"])})
            for name, entry in loaded["prices"].items()
        }
        return cls(prices, numbers(loaded, "assumptions"), numbers(loaded, "latency_ms"))

    def rate(self, name: str) -> float:
        return self.prices[name].rate

    def latency(self, service: str, operation: str) -> float:
        """Milliseconds a Lambda waits on one call, in AWS (an assumption: `[latency_ms]`)."""
        found = self.latency_ms.get(f"{service}.{operation}", self.latency_ms.get(service))
        return found if found is not None else self.latency_ms["default"]

    def dynamodb(self, units: Mapping[str, float]) -> float:
        """Dollars of DynamoDB request units, whatever their kind (`wru_*`, `rru_*`)."""
        writes, reads = of_kind(units, "wru"), of_kind(units, "rru")
        return writes * self.rate("dynamodb_write_request_unit") + reads * self.rate(
            "dynamodb_read_request_unit"
        )

    def xray_usd(self) -> float:
        """A trace: recorded, and retrieved as often as assumed."""
        retrieved = self.assumptions["xray_retrieved_per_trace"]
        return self.rate("xray_trace_recorded") + retrieved * self.rate("xray_trace_retrieved")


@dataclass(frozen=True)
class Quota:
    name: str
    value: float
    unit: str
    adjustable: bool
    source: str
    as_of: str
    note: str = ""


@dataclass(frozen=True)
class Quotas:
    quotas: dict[str, Quota]
    assumptions: dict[str, float]

    @classmethod
    def load(cls, path: Path = QUOTAS_PATH) -> Quotas:
        loaded = tomllib.loads(path.read_text())
        quotas = {
            name: Quota(name, **{**entry, "value": float(entry["value"])})
            for name, entry in loaded["quotas"].items()
        }
        return cls(quotas, numbers(loaded, "assumptions"))

    def value(self, name: str) -> float:
        return self.quotas[name].value

    def source(self, name: str) -> str:
        return self.quotas[name].source


@dataclass(frozen=True)
class ProviderLimit:
    """A provider's published limit on the reads a pass makes, as requests a second (None: the
    provider publishes none)."""

    per_second: float | None
    unit: str
    title: str
    source: str
    as_of: str
    note: str = ""
    window_seconds: float = 1.0  # the window the provider counts its requests over


def load_provider_limits(path: Path = QUOTAS_PATH) -> dict[str, ProviderLimit]:
    found = {}
    for name, entry in tomllib.loads(path.read_text())["provider_limits"].items():
        requests, per_seconds = entry.get("requests"), float(entry.get("per_seconds", 1))
        found[name] = ProviderLimit(
            float(requests) / per_seconds if requests else None,
            str(entry["unit"]),
            str(entry["title"]),
            str(entry.get("source", "")),
            str(entry["as_of"]),
            str(entry.get("note", "")),
            per_seconds,
        )
    return found


def _ingest_secret_cache_seconds() -> float:
    """How long ingest caches a secret. Imported when asked: the handler's module builds its
    logger, tracer and metrics from the environment as it is imported."""
    from functions.ingest.handler import SECRET_CACHE_SECONDS

    return float(SECRET_CACHE_SECONDS)


@dataclass(frozen=True)
class StackSettings:
    """What the capacity depends on, as deployed by default; a merchant changes some of these
    (`processMaxConcurrency`, the SES quota, the account's Lambda concurrency)."""

    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    process_batch_size: int = settings.PROCESS_BATCH_SIZE
    outbox_batch_size: int = settings.OUTBOX_BATCH_SIZE
    outbox_parallelization_factor: int = settings.OUTBOX_PARALLELIZATION_FACTOR
    api_throttle_rate: float = settings.API_THROTTLE_RATE
    waf_requests_per_address_per_5_minutes: float = settings.WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES
    # None: AWS's default quota (costmodel/quotas.toml).
    ses_send_rate: float | None = None
    account_concurrency: float | None = None
    queue_retention_seconds: float = settings.WEBHOOK_QUEUE_RETENTION_DAYS * DAY
    outbox_stream_max_record_age_seconds: float = settings.OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS
    waiting_every_seconds: float = settings.SCHEDULE_MINUTES["waiting"] * 60.0
    waiting_timeout_seconds: float = settings.WAITING_TIMEOUT_SECONDS
    reconciliation_every_seconds: float = settings.SCHEDULE_MINUTES["reconciliation"] * 60.0
    scheduled_functions: int = len(settings.SCHEDULED_FUNCTIONS)
    # The hourly reconciliation's units checked at once (its Map's concurrency), for minutes
    # of each hour: counted as always in use.
    reconciliation_concurrency: int = RECONCILIATION.max_concurrency
    reconciliation_max_orders_per_run: int = RECONCILIATION.max_orders_per_run
    # What bounds the waits, from the functions' constants: how long, how many.
    outbox_pending_deadline_seconds: float = float(PENDING_DEADLINE_SECONDS)
    outbox_give_up_seconds: float = DEFAULT_OUTBOX_GIVE_UP_HOURS * HOUR
    wait_limit_seconds: float = float(WAIT_LIMIT_SECONDS)
    secret_cache_seconds: float = field(default_factory=_ingest_secret_cache_seconds)
    changed_index_shards: int = CHANGES_SHARDS
    due_index_shards: int = OUTBOX_DUE_SHARDS


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


@dataclass
class CostOptions:
    orders: int = 52
    per_kind: int = 20
    seed: int = 42


def webhook_queue() -> str:
    from devstack.resources import WEBHOOK_QUEUE_NAME

    return WEBHOOK_QUEUE_NAME


def load_measurement(path: Path = MEASURED_PATH) -> Measurement:
    return Measurement.from_json(json.loads(path.read_text()))


def embedded_drain_seconds(
    deliveries: int, process_concurrency: int, measurement: Measurement | None = None
) -> float:
    """How long the embedded stack takes to drain `deliveries` queued at once (the burst
    drill), from the drill mix as measured on this machine: process's wall-clock time per
    delivery (its waits on the local server's lock included), spread over its pollers. The
    outbox drains beside it, and finishes about one item's time later."""
    sample = (measurement or load_measurement()).scenarios()[MIX]
    process_ms = sample.functions["process"]["billed_ms"]
    per_delivery = process_ms / 1000 / max(sample.events, 1)
    return deliveries * per_delivery / max(process_concurrency, 1)
