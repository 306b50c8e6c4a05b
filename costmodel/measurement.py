"""What the models count with: prices.toml, quotas.toml, and what `umavez cost` measured (each
scenario's counters, its scheduled runs' idle cost taken out), who pays for each request and
each function's time in AWS."""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

from devstack.capacity import Units
from infra.settings import LAMBDA_MEMORY_MB

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
# Functions whose invocations start a trace (ingest only with the HTTP API; process never).
TRACE_STARTERS = ("outbox", "sweeper", "waiting", "reconciliation", "statement")
# Requests no function made but AWS bills: the SQS event source mapping's on the webhook queue.
EVENT_SOURCE_SQS_OPERATIONS = frozenset(
    {"ReceiveMessage", "DeleteMessage", "DeleteMessageBatch"}
    | {"ChangeMessageVisibility", "ChangeMessageVisibilityBatch"}
)
PROVIDER_API = "provider-api"  # the providers' APIs, read by process: no bill, Lambda time

AwsKey = tuple[str, str, str, str]  # caller, service, operation, resource


def of_kind(units: Mapping[str, float], kind: str) -> float:
    """Request units of one kind (`rru`, `wru`), whatever their consistency or index."""
    return sum(v for k, v in units.items() if k.startswith(kind))


def figure(names: Any, expression: str) -> Any:
    """A figure by its path on `names` (`e.emails`), or a sum of products of them (`rate *
    e.emails + a.n`): how the TOML tables name their arithmetic."""
    terms = [[attrgetter(p.strip())(names) for p in t.split("*")] for t in expression.split("+")]
    return terms[0][0] if len(terms) == 1 == len(terms[0]) else float(sum(map(math.prod, terms)))


@dataclass(frozen=True)
class Prices:
    rates: dict[str, float]  # USD per unit, by price of prices.toml
    assumptions: dict[str, float]
    latency_ms: dict[str, float]

    @classmethod
    def load(cls, path: Path = PRICES_PATH) -> Prices:
        loaded = tomllib.loads(path.read_text())
        rates = {name: float(p["usd"]) / float(p["per"]) for name, p in loaded["prices"].items()}
        return cls(rates, _numbers(loaded["assumptions"]), _numbers(loaded["latency_ms"]))

    def rate(self, name: str) -> float:
        return self.rates[name]

    def latency(self, service: str, operation: str) -> float:
        """Milliseconds a Lambda waits on one call in AWS (`[latency_ms]`, an assumption)."""
        found = self.latency_ms.get(f"{service}.{operation}", self.latency_ms.get(service))
        return found if found is not None else self.latency_ms["default"]

    def dynamodb(self, units: Mapping[str, float]) -> float:
        """Dollars of DynamoDB request units, whatever their kind (`wru_*`, `rru_*`)."""
        writes = of_kind(units, "wru") * self.rate("dynamodb_write_request_unit")
        return writes + of_kind(units, "rru") * self.rate("dynamodb_read_request_unit")

    def xray_usd(self) -> float:
        """A trace: recorded, and retrieved as often as assumed."""
        retrieved = self.assumptions["xray_retrieved_per_trace"]
        return self.rate("xray_trace_recorded") + retrieved * self.rate("xray_trace_retrieved")


def _numbers(table: Mapping[str, Any]) -> dict[str, float]:
    return {name: float(value) for name, value in table.items()}


@dataclass(frozen=True)
class ProviderLimit:
    """A provider's published limit, requests a second (None: none) over its window."""

    per_second: float | None
    window_seconds: float
    source: str
    note: str


@dataclass(frozen=True)
class Quotas:
    quotas: dict[str, dict[str, Any]]  # quotas.toml's entries: `value`, `source`, ...
    assumptions: dict[str, float]
    providers: dict[str, ProviderLimit]

    @classmethod
    def load(cls, path: Path = QUOTAS_PATH) -> Quotas:
        loaded, providers = tomllib.loads(path.read_text()), {}
        for name, entry in loaded["provider_limits"].items():
            requests, window = entry.get("requests"), float(entry.get("per_seconds", 1))
            per_second = float(requests) / window if requests else None
            providers[name] = ProviderLimit(per_second, window, entry["source"], entry["note"])
        return cls(loaded["quotas"], _numbers(loaded["assumptions"]), providers)

    def value(self, name: str) -> float:
        return float(self.quotas[name]["value"])

    def source(self, name: str) -> str:
        return str(self.quotas[name]["source"])


@dataclass
class Sample:
    """One scenario's counters: the server's accounting rows, the functions' meters."""

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
        """`provider_api_calls`: reads from the providers' APIs (the local fakes) by process."""
        keys = ("caller", "service", "operation", "resource")
        aws = {_key(row[k] for k in keys): Units(row["units"]) for row in accounting}
        if provider_api_calls:
            aws[("process", PROVIDER_API, "GET", "")] = Units({"requests": provider_api_calls})
        return cls(0, aws, {name: Units(counters) for name, counters in metering.items()})

    def minus(self, other: Sample) -> Sample:
        """Counter subtraction: what `other` did not already count (never below zero)."""
        aws = {k: v.minus(other.aws.get(k, Units())) for k, v in self.aws.items()}
        functions = {k: v.minus(other.functions.get(k, Units())) for k, v in self.functions.items()}
        return Sample(self.events, _nonempty(aws), _nonempty(functions))

    def scaled(self, factor: float) -> Sample:
        aws = {k: v.scaled(factor) for k, v in self.aws.items()}
        return Sample(self.events, aws, {k: v.scaled(factor) for k, v in self.functions.items()})

    def only(self, function: str) -> Sample:
        """One function's own requests and meters."""
        aws = {k: v for k, v in self.aws.items() if k[0] == function}
        return Sample(self.events, aws, {k: v for k, v in self.functions.items() if k == function})

    def invocations(self, function: str) -> float:
        return float(self.functions.get(function, Units())["invocations"])

    def to_json(self) -> dict[str, Any]:
        aws = [{"key": list(k), "units": dict(v)} for k, v in sorted(self.aws.items())]
        functions = {k: dict(v) for k, v in sorted(self.functions.items())}
        return {"events": self.events, "aws": aws, "functions": functions}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sample:
        aws = {_key(row["key"]): Units(row["units"]) for row in data["aws"]}
        functions = {k: Units(v) for k, v in data["functions"].items()}
        return cls(int(data["events"]), aws, functions)


def _key(parts: Iterable[str]) -> AwsKey:
    caller, service, operation, resource = parts
    return caller, service, operation, resource


def _nonempty(counters: dict[Any, Units]) -> dict[Any, Units]:
    return {k: v for k, v in counters.items() if v}


def without_idle(sample: Sample, idle: Mapping[str, Sample]) -> Sample:
    """The scheduled runs taken out at their idle cost (priced per month); their extra stays."""
    for function, one_run in idle.items():
        if runs := sample.invocations(function):
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
        kinds, idle = ({k: v.to_json() for k, v in s.items()} for s in (self.kinds, self.idle))
        mix = self.mix.to_json() if self.mix is not None else None
        return vars(self) | {"kinds": kinds, "idle": idle, "mix": mix}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Measurement:
        kinds = {k: Sample.from_json(v) for k, v in data["kinds"].items()}
        idle = {k: Sample.from_json(v) for k, v in data["idle"].items()}
        mix = Sample.from_json(data["mix"]) if data.get("mix") else None
        return cls(**{**data, "kinds": kinds, "idle": idle, "mix": mix})


def payer(key: AwsKey, webhook_queue: str) -> str | None:
    """Who a request is billed to: its function, an event source mapping, or nobody (the local
    stack's own: drain, checks, sinks)."""
    caller, service, operation, resource = key
    if caller in LAMBDA_MEMORY_MB:
        return caller
    if service == "sqs" and resource == webhook_queue and operation in EVENT_SOURCE_SQS_OPERATIONS:
        return "process (event source)"
    return "outbox (event source)" if service == "dynamodbstreams" else None


def lambda_milliseconds(sample: Sample, prices: Prices) -> Units:
    """Each function's billed time in AWS: its measured own work, each AWS call at
    `[latency_ms]`, 0.5 ms an invocation of rounding (the local wall clock: an upper bound)."""
    waits = Units()
    for (caller, service, operation, _), units in sample.aws.items():
        waits[caller] += units["requests"] * prices.latency(service, operation)
    return Units(
        {
            function: meters["compute_ms"] + waits[function] + 0.5 * meters["invocations"]
            for function, meters in sample.functions.items()
        }
    )


@dataclass(frozen=True)
class CostOptions:
    """`umavez cost`'s: what to measure, or `from_json` a saved measurement; where it goes."""

    orders: int = 52
    per_kind: int = 20
    seed: int = 42
    readme: Path | None = None  # the page whose cost section to rewrite
    json: Path | None = None  # where to save the measurement
    from_json: Path | None = None
    xray_sampling: float | None = None


def secret_cache_seconds() -> float:
    """How long a container caches a secret; imported late: the handler reads its environment."""
    from functions.ingest.handler import SECRET_CACHE_SECONDS

    return float(SECRET_CACHE_SECONDS)


def webhook_queue() -> str:
    from devstack.resources import WEBHOOK_QUEUE_NAME

    return WEBHOOK_QUEUE_NAME


def load_measurement(path: Path = MEASURED_PATH) -> Measurement:
    return Measurement.from_json(json.loads(path.read_text()))


def embedded_drain_seconds(
    deliveries: int, process_concurrency: int, measurement: Measurement | None = None
) -> float:
    """How long the embedded stack drains `deliveries` queued at once (the burst drill): the
    drill mix's process wall clock a delivery on this machine, over its pollers."""
    sample = (measurement or load_measurement()).scenarios()[MIX]
    per_delivery = sample.functions["process"]["billed_ms"] / 1000 / max(sample.events, 1)
    return deliveries * per_delivery / max(process_concurrency, 1)
