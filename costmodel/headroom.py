"""`umavez capacity`: what rate the deployed stack sustains, and what gives first. `model` folds
capacity.toml's stages at a rate (a load from what one delivery uses, `PerEvent`, against a
limit); `burst` drains a provider's backlog stage by stage against the deadlines of what waits."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from costmodel.measurement import (
    DAY,
    HOUR,
    MIX,
    RRU_METRICS,
    TABLE_WRU_METRICS,
    Measurement,
    Prices,
    Quotas,
    Sample,
    figure,
    lambda_milliseconds,
    payer,
    secret_cache_seconds,
    webhook_queue,
)
from functions.process.waiting import WAIT_LIMIT_SECONDS
from functions.reconcile.mismatches import PENDING_DEADLINE_SECONDS
from functions.shared.settings import DEFAULT_OUTBOX_GIVE_UP_HOURS
from functions.shared.tables import CHANGES_SHARDS, OUTBOX_DUE_SHARDS
from infra import settings
from infra.mappings import DEFAULT_PROCESS_MAX_CONCURRENCY
from infra.reconciliation import RECONCILIATION
from infra.reconciliation import reconciliation_capacity as fanout_capacity

CAPACITY_TABLE = tomllib.loads(Path(__file__).with_name("capacity.toml").read_text())
QUOTA_INCREASE = "a quota increase request"
HEADROOM = attrgetter("headroom")
# What bounds each wait of a burst (capacity.toml's `deadline`), from the stack's constants.
DEADLINE_SECONDS = {
    "wait_limit_seconds": float(WAIT_LIMIT_SECONDS),
    "queue_retention_seconds": settings.WEBHOOK_QUEUE_RETENTION_DAYS * DAY,
    "outbox_stream_max_record_age_seconds": settings.OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS,
    "outbox_pending_deadline_seconds": float(PENDING_DEADLINE_SECONDS),
    "outbox_give_up_seconds": DEFAULT_OUTBOX_GIVE_UP_HOURS * HOUR,
}
# One re-drive of the waiting run: the message back on the queue, the parked item removed.
REDRIVE_OPERATIONS = frozenset({"SendMessage", "DeleteItem", "TransactWriteItems"})


@dataclass(frozen=True)
class StackSettings:
    """What a merchant changes (None: AWS's default quota); the rest is infra/settings.py's."""

    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    ses_send_rate: float | None = None
    account_concurrency: float | None = None


@dataclass(frozen=True)
class PerEvent:
    """What one delivery of the drill mix used, durations modeled in AWS; a payment is one
    order's story in that mix, its retries included."""

    measured_on: str
    deliveries: int
    orders: int
    invocations: dict[str, float]  # by function
    seconds: dict[str, float]  # by function, modeled in AWS
    queue_messages: float  # webhook queue messages process received
    queue_requests: float  # SQS requests on the webhook queue, as billed
    write_units: dict[str, float]  # by table: transactional and standard writes
    read_units: dict[str, float]  # by table, its indexes included
    index_write_units: dict[str, float]  # by "table/index"
    outbox_items: float  # new outbox items: the stream records the sender gets
    put_events: float
    emails: float  # SES recipients
    waiting_redrives: float  # parked deliveries the waiting run re-enqueued
    seconds_per_redrive: float  # the waiting run's calls for one, modeled in AWS
    secrets_per_container: float  # secrets a warm ingest or process container reads

    @property
    def deliveries_per_payment(self) -> float:
        return self.deliveries / max(self.orders, 1)

    def seconds_per(self, function: str, work: float) -> float:
        """Seconds one unit of `work` (a request, a message, an item, an order) takes."""
        return self.seconds.get(function, 0.0) / work if work else 0.0

    @classmethod
    def of(cls, measurement: Measurement, prices: Prices) -> PerEvent:
        if MIX not in (scenarios := measurement.scenarios()):
            raise ValueError("the measurement has no drill mix: run `make cost` (orders > 0)")
        sample, q = scenarios[MIX], webhook_queue()
        events, modeled = max(sample.events, 1), lambda_milliseconds(sample, prices)

        def total(metric: str, *key: str | None, billed: bool = False) -> float:
            """A metric over the requests whose key matches `key` (None: any); `billed`: AWS's."""
            return sum(
                units[metric]
                for found, units in sample.aws.items()
                if all(want is None or have == want for have, want in zip(found, key, strict=False))
                and (not billed or payer(found, q) is not None)
            )

        def per(metric: str, *key: str | None) -> float:
            return total(metric, *key) / events

        found = (r for c, s, _, r in sample.aws if c == "outbox" and s == "dynamodb")
        outbox = next((r for r in found if "outbox" in r), "outbox")
        redrives = total("requests", "waiting", "sqs", "SendMessage")
        redrive_ms = sum(
            units["requests"] * prices.latency(service, operation)
            for (caller, service, operation, _), units in sample.aws.items()
            if caller == "waiting" and operation in REDRIVE_OPERATIONS
        )
        head = (measurement.measured_on, sample.events, int(measurement.options.get("orders", 0)))
        invocations = {f: sample.invocations(f) / events for f in sample.functions}
        # As billed: the event source mapping's empty long polls are not traffic.
        sqs = total("billed", None, "sqs", None, q, billed=True)
        sqs -= total("empty_receives", None, "sqs", None, q, billed=True)
        return cls(
            *head,
            invocations,
            {f: modeled[f] / 1000 / events for f in sample.functions},
            per("messages", None, "sqs", None, q),
            sqs / events,
            _by_table(sample, TABLE_WRU_METRICS, events),
            _by_table(sample, RRU_METRICS, events),
            _by_table(sample, ("wru_index",), events, keep_index=True),
            per(f"items_written:{outbox}", "process", None, "TransactWriteItems"),
            per("requests", None, "events"),
            per("billed", None, "sesv2"),
            per("requests", "waiting", "sqs", None, q),
            redrive_ms / 1000 / redrives if redrives else 0.0,
            prices.assumptions["secrets_read_per_container"],
        )


def _by_table(
    sample: Sample, kinds: Sequence[str], events: int, *, keep_index: bool = False
) -> dict[str, float]:
    """Request units by table (an index's reads on its table; with `keep_index`, its writes
    on their own)."""
    found: dict[str, float] = {}
    for (caller, service, _, _), units in sample.aws.items():
        for metric, amount in units.items() if service == "dynamodb" and caller else ():
            kind, _, where = metric.partition(":")
            if kind in kinds:
                name = where if keep_index else where.split("/", 1)[0]
                found[name] = found.get(name, 0.0) + amount / events
    return dict(sorted(found.items()))


@dataclass(frozen=True)
class ReconciliationCapacity:
    changes_per_second: float  # orders changed a second it keeps up with
    orders_read_per_run: float
    reads_per_change: float
    limited_by: str


def reconciliation_capacity(
    seconds_per_order: float, hour_fraction: float
) -> ReconciliationCapacity:
    """The hourly check's fan-out (infra/reconciliation.py) at `seconds_per_order` (its Query
    and its outbox read, half each), each pass reading `hour_fraction` of an hour again."""
    every = settings.SCHEDULE_MINUTES["reconciliation"] * 60
    fanout = replace(RECONCILIATION, run_every_seconds=every, reads_of_an_hour=1 + hour_fraction)
    if seconds_per_order:
        half = seconds_per_order / 2
        fanout = replace(fanout, seconds_per_order_query=half, seconds_per_outbox_read=half)
    changes = fanout_capacity(fanout)
    capped = changes >= fanout.max_orders_per_run / (every * fanout.reads_per_change)
    workers = f"its {fanout.max_concurrency} workers' time within the run's budget"
    read = (changes * every * fanout.reads_per_change, fanout.reads_per_change)
    return ReconciliationCapacity(changes, *read, "its cap on orders a run" if capped else workers)


def figures(e: PerEvent, payments_per_second: float, s: StackSettings, q: Quotas) -> Any:
    """A rate's figures, which capacity.toml names (its header says each)."""
    f = SimpleNamespace(e=e, s=s, q=q, settings=settings, payments_per_second=payments_per_second)
    f.rate = payments_per_second * e.deliveries_per_payment  # deliveries a second
    f.ingest_ms = e.seconds_per("ingest", e.invocations.get("ingest", 0.0)) * 1000
    f.ses_rate = s.ses_send_rate or q.value("ses_send_rate")
    f.account = s.account_concurrency or q.value("lambda_concurrent_executions")
    f.shards = q.assumptions["outbox_stream_shards"]
    f.outbox_lanes = f.shards * settings.OUTBOX_PARALLELIZATION_FACTOR
    process = ("process", s.process_max_concurrency, settings.PROCESS_BATCH_SIZE, e.queue_messages)
    outbox = ("outbox", f.outbox_lanes, settings.OUTBOX_BATCH_SIZE, e.outbox_items)
    f.process_batch_seconds, f.process_throughput, f.process_concurrency = _lambda(f, *process)
    f.outbox_batch_seconds, f.outbox_throughput, f.outbox_concurrency = _lambda(f, *outbox)
    f.ingest_concurrency = f.rate * e.seconds.get("ingest", 0.0)
    # The hourly reconciliation's units, side by side for minutes of each hour: always in use.
    f.scheduled_concurrency = len(settings.SCHEDULED_FUNCTIONS) + RECONCILIATION.max_concurrency
    f.all_concurrency = f.ingest_concurrency + f.process_concurrency + f.outbox_concurrency
    f.all_concurrency += f.scheduled_concurrency
    # What the account leaves ingest: the others' concurrency at its most.
    most = s.process_max_concurrency + f.outbox_lanes + f.scheduled_concurrency
    f.ingest_limit = f.account - most
    f.per_source_address = f.rate / q.assumptions["provider_source_addresses"]
    window = q.value("waf_rate_window_seconds")
    f.waf_limit = settings.WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES / window
    f.secret_reads = (f.ingest_concurrency + f.process_concurrency) * e.secrets_per_container
    f.secret_reads /= secret_cache_seconds()
    # One order's partition: a payment's whole story, its busiest table's writes.
    f.story_write_units = max(e.write_units.values(), default=0.0) * e.deliveries_per_payment
    # Each table's writes and reads as one linear combination, in write units.
    ratio = q.value("dynamodb_new_table_write_units") / q.value("dynamodb_new_table_read_units")
    tables = sorted({*e.write_units, *e.read_units})
    f.new_table_peak = {t: e.write_units.get(t, 0) + e.read_units.get(t, 0) * ratio for t in tables}
    # An index's writes spread over its shards (those of the hour, for `changed`).
    shards = {"changed": CHANGES_SHARDS, "due": OUTBOX_DUE_SHARDS}
    f.index_partitions = {}
    for index, units in e.index_write_units.items():
        name = index.split("/", 1)[-1]
        n, hour = shards.get(name, 1), " of the hour" if name == "changed" else ""
        f.index_partitions[f"`{name}`: each of its {n} partitions{hour}"] = units / n
    f.waiting_every_minutes = minutes = settings.SCHEDULE_MINUTES["waiting"]
    redrive, timeout = e.seconds_per_redrive, settings.WAITING_TIMEOUT_SECONDS
    f.waiting_limit = timeout / redrive / (minutes * 60) if redrive else None
    per_order = e.seconds_per("reconciliation", 1 / max(e.deliveries_per_payment, 1e-9))
    hour_fraction = q.assumptions["reconciliation_hour_fraction"]
    f.reconciliation = reconciliation_capacity(per_order, hour_fraction)
    return f


def _lambda(f: Any, name: str, lanes: float, batch: int, work: float) -> tuple[float, Any, float]:
    """A Lambda stage: a batch's seconds, its throughput and the concurrency it keeps busy."""
    seconds = batch * f.e.seconds_per(name, work)
    busy = min(f.rate * work * f.e.seconds_per(name, work), lanes)
    return seconds, lanes * batch / seconds if seconds else None, busy


@dataclass(frozen=True)
class Row:
    component: str
    load: float
    limit: float | None  # None: no documented limit
    unit: str
    lift: str  # the setting that lifts the limit (and the value this rate needs)
    source: str  # where the limit is documented or set
    rest_only: bool = False  # the WAF: only with `-c apiType=rest -c waf=true`
    webhook_path: bool = True  # False: the scheduled checks

    @property
    def headroom(self) -> float:
        return math.inf if self.limit is None or self.load <= 0 else self.limit / self.load


@dataclass(frozen=True)
class Capacity:
    payments_per_second: float
    deliveries_per_second: float
    rows: list[Row]

    def first_to_saturate(self, rest: bool = False, webhook_path_only: bool = False) -> Row:
        rows = [r for r in self.rows if (rest or not r.rest_only)]
        return min((r for r in rows if r.webhook_path or not webhook_path_only), key=HEADROOM)

    def saturated(self) -> list[Row]:
        return sorted((r for r in self.rows if not r.rest_only and r.headroom < 1), key=HEADROOM)


@dataclass(frozen=True)
class AtLeast:
    """A lift: the setting and, over the limit, the value that carries the load (the limit grows
    with the setting, now `current`); `most`: AWS's ceiling, a quota."""

    setting: str
    current: str
    unit: str = ""
    most: str | None = None
    beyond: str = "and more"

    def __call__(self, at: Any, load: float, limit: float | None) -> str:
        if limit is None or load <= limit:
            return self.setting
        needed = math.ceil(figure(at, self.current) * load / limit)
        most = at.q.value(self.most) if self.most else None
        if most is not None and needed > most:
            return f"{self.setting} at its most ({most:,.0f}{self.unit}), {self.beyond}"
        return f"{self.setting} >= {needed:,}{self.unit}"


@dataclass(frozen=True)
class Stage:
    """A stage of capacity.toml (its header says each field)."""

    component: str
    unit: str
    load: str
    source: str
    limit: str = ""
    lift: str | AtLeast = QUOTA_INCREASE
    parts: str = ""
    no_limit: bool = False
    rest_only: bool = False
    webhook_path: bool = True

    def rows(self, at: Any) -> Iterable[Row]:
        parts: Mapping[str, float] = figure(at, self.parts) if self.parts else {"": 0.0}
        for part, amount in parts.items():
            at.part, at.amount = part, amount  # what the stage's texts and load name
            load, source = float(figure(at, self.load)), self.source.format(at=at)
            limit = figure(at, self.limit) if self.limit else at.q.value(source)
            limit = None if self.no_limit else limit
            lift = self.lift(at, load, limit) if callable(self.lift) else self.lift.format(at=at)
            source = at.q.source(source) if source in at.q.quotas else source
            flags = (self.rest_only, self.webhook_path)
            yield Row(self.component.format(at=at), load, limit, self.unit, lift, source, *flags)


def _stage(entry: Mapping[str, Any]) -> Stage:
    lift = entry.get("lift", QUOTA_INCREASE)
    return Stage(**{**entry, "lift": AtLeast(**lift) if isinstance(lift, dict) else lift})


STAGES = tuple(_stage(entry) for entry in CAPACITY_TABLE["stage"])
STATEMENT_STAGES = tuple(_stage(entry) for entry in CAPACITY_TABLE["statement_stage"])


def model(
    per_event: PerEvent,
    payments_per_second: float,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
    stages: Iterable[Stage] = STAGES,
) -> Capacity:
    """The table folded at a rate: each stage's rows, its load against its limit."""
    settings, quotas = settings or StackSettings(), quotas or Quotas.load()
    at = figures(per_event, payments_per_second, settings, quotas)
    return Capacity(payments_per_second, at.rate, [row for s in stages for row in s.rows(at)])


# -- a burst ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deadline:
    what: str
    waits_seconds: float
    limit_seconds: float
    then: str  # what happens past the limit

    @property
    def kept(self) -> bool:
        return self.waits_seconds <= self.limit_seconds


@dataclass(frozen=True)
class Burst:
    deliveries: int
    intake_per_second: float
    intake_bottleneck: str
    process_per_second: float
    drain_seconds: float
    queue_peak: float
    outbox_seconds: float
    email_seconds: float
    reconciliation_seconds: float
    deadlines: list[Deadline]


def burst(per_event: PerEvent, deliveries: int, capacity: Capacity) -> Burst:
    """A provider's backlog at once: the API admits it at its tightest limit (the rest refused
    with 429, retried), SQS holds what process has not taken, each later stage drains at its
    rate; what waits is held to its deadline (capacity.toml)."""
    e = per_event

    def cap(row: Row) -> float:
        return row.limit or math.inf

    def limit(prefix: str) -> float:
        return cap(next(r for r in capacity.rows if r.component.startswith(prefix)))

    # The tightest API limit on a webhook's way, or the concurrency the account leaves ingest.
    gates = [r for r in capacity.rows if r.webhook_path and not r.rest_only and r.limit]
    gate = min((r for r in gates if r.unit == "requests/s" and "API" in r.component), key=cap)
    ingest, seconds = limit("ingest"), e.seconds.get("ingest")
    by_ingest = ingest / seconds if ingest < math.inf and seconds else math.inf
    intake, bottleneck = cap(gate), gate.component
    if intake > by_ingest:
        intake, bottleneck = by_ingest, "ingest"
    process = limit("process") / max(e.queue_messages, 1e-9)
    drain = deliveries / min(intake, process)
    outbox = max(drain, deliveries * e.outbox_items / limit("outbox"))
    email = max(drain, deliveries * e.emails / limit("SES sending rate"))
    orders = deliveries / max(e.deliveries_per_payment, 1e-9)
    waits = {"refused": deliveries / intake, "drain": drain, "outbox": outbox - drain}
    waits |= {"pending": max(outbox, email) - drain, "email": email - drain}
    deadlines = [
        Deadline(d["what"], waits[d["wait"]], DEADLINE_SECONDS[d["limit"]], d["then"])
        for d in CAPACITY_TABLE["deadline"]
    ]
    queue_peak = max(0.0, deliveries * (1 - process / intake))
    reconciliation = orders / (capacity.rows[-1].limit or math.inf)
    taken = (deliveries, intake, bottleneck, process, drain, queue_peak)
    return Burst(*taken, outbox, email, reconciliation, deadlines)
