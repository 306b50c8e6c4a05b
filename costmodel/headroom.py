"""`umavez capacity`: what rate the deployed stack sustains, and what gives first.

Each component on a webhook's way and each scheduled run is a `Stage` of `STAGES`: its load at a
rate of payments a second (from what one delivery of the drill mix uses, `PerEvent`), its limit
(AWS's quotas, the stack's settings) and the setting that lifts it. `model` folds the table at a
rate: headroom = limit / load; a Lambda stage's throughput = concurrency x batch / its duration.
`burst`: a provider's backlog delivered at once, drained stage by stage, against the deadlines.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from costmodel.measurement import (
    HOUR,
    MIX,
    RRU_METRICS,
    TABLE_WRU_METRICS,
    Measurement,
    Prices,
    Quotas,
    Sample,
    StackSettings,
    lambda_milliseconds,
    payer,
    webhook_queue,
)
from infra.reconciliation import RECONCILIATION
from infra.reconciliation import reconciliation_capacity as fanout_capacity

STACK_SETTINGS = "infra/settings.py"
STACK_CONTEXT = "infra/config.py"
QUOTA_INCREASE = "a quota increase request"


@dataclass(frozen=True)
class PerEvent:
    """What one delivery of the drill mix used (an HTTP request to the webhook API), durations
    modeled in AWS; a payment is one order's story in that mix, its retries included."""

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
        scenarios = measurement.scenarios()
        if MIX not in scenarios:
            raise ValueError("the measurement has no drill mix: run `make cost` (orders > 0)")
        sample = scenarios[MIX]
        events, queue = max(sample.events, 1), webhook_queue()
        modeled = lambda_milliseconds(sample, prices)

        def per(metric: str, *where: str | None) -> float:
            return _sum(sample, metric, *where) / events

        # As billed: the event source mapping's empty long polls are not traffic.
        queue_billed = _sum(sample, "billed", None, "sqs", None, queue, billed=True)
        queue_empty = _sum(sample, "empty_receives", None, "sqs", None, queue, billed=True)
        outbox = f"items_written:{_outbox_table(sample)}"
        return cls(
            measurement.measured_on,
            sample.events,
            int(measurement.options.get("orders", 0)),
            {f: sample.invocations(f) / events for f in sample.functions},
            {f: modeled[f] / 1000 / events for f in sample.functions},
            per("messages", None, "sqs", None, queue),
            (queue_billed - queue_empty) / events,
            _by_table(sample, TABLE_WRU_METRICS, events),
            _by_table(sample, RRU_METRICS, events),
            _by_table(sample, ("wru_index",), events, keep_index=True),
            per(outbox, "process", None, "TransactWriteItems"),
            per("requests", None, "events"),
            per("billed", None, "sesv2"),
            per("requests", "waiting", "sqs", None, queue),
            _redrive_seconds(sample, prices),
            prices.assumptions["secrets_read_per_container"],
        )


def _sum(sample: Sample, metric: str, *key: str | None, billed: bool = False) -> float:
    """A metric over the requests whose key (caller, service, operation, resource) matches
    `key` where it is not None; `billed`: only those AWS bills."""
    queue = webhook_queue()
    return sum(
        units[metric]
        for found, units in sample.aws.items()
        if all(want is None or have == want for have, want in zip(found, key, strict=False))
        and (not billed or payer(found, queue) is not None)
    )


# One re-drive: the message back on the queue, the parked item removed. The run's other calls
# are the same every run, and its local run-to-run time is noise (a schedule of seconds).
REDRIVE_OPERATIONS = frozenset({"SendMessage", "DeleteItem", "TransactWriteItems"})


def _redrive_seconds(sample: Sample, prices: Prices) -> float:
    redrives = _sum(sample, "requests", "waiting", "sqs", "SendMessage")
    milliseconds = sum(
        units["requests"] * prices.latency(service, operation)
        for (caller, service, operation, _), units in sample.aws.items()
        if caller == "waiting" and operation in REDRIVE_OPERATIONS
    )
    return milliseconds / 1000 / redrives if redrives else 0.0


def _by_table(
    sample: Sample, kinds: Sequence[str], events: int, *, keep_index: bool = False
) -> dict[str, float]:
    """Request units by table (an index's reads count on its table; its writes on their own),
    of the stack's functions and event source mappings."""
    found: dict[str, float] = {}
    for (caller, service, _, _), units in sample.aws.items():
        if service != "dynamodb" or not caller:
            continue
        for metric, amount in units.items():
            kind, _, where = metric.partition(":")
            if kind in kinds:
                name = where if keep_index else where.split("/", 1)[0]
                found[name] = found.get(name, 0.0) + amount / events
    return dict(sorted(found.items()))


def _outbox_table(sample: Sample) -> str:
    """The outbox table's name: the table the sender reads by its key."""
    found = (r for c, s, _, r in sample.aws if c == "outbox" and s == "dynamodb" and "outbox" in r)
    return next(found, "outbox")


@dataclass(frozen=True)
class ReconciliationCapacity:
    orders_read_per_run: float
    runs_per_hour: float
    reads_per_change: float
    limited_by: str

    @property
    def changes_per_second(self) -> float:
        """Orders changed a second (each changed order counted once an hour) it keeps up with."""
        return self.orders_read_per_run * self.runs_per_hour / self.reads_per_change / HOUR


def reconciliation_capacity(
    settings: StackSettings, seconds_per_order: float, hour_fraction: float
) -> ReconciliationCapacity:
    """The scheduled check's sustained capacity: its fan-out's model (infra/reconciliation.py:
    32 units at once within a 45-minute budget, at most `max_orders_per_run` orders read a
    run), at `seconds_per_order` (checked: a Query and a read of its outbox items; half of it
    for an order another run's window reads again) and with each pass reading `hour_fraction`
    of an hour again (the `changed` index knows the hour only)."""
    fanout = replace(
        RECONCILIATION,
        max_orders_per_run=settings.reconciliation_max_orders_per_run,
        run_every_seconds=int(settings.reconciliation_every_seconds),
        reads_of_an_hour=1 + hour_fraction,
    )
    if seconds_per_order:
        fanout = replace(
            fanout,
            seconds_per_order_query=seconds_per_order / 2,
            seconds_per_outbox_read=seconds_per_order / 2,
        )
    changes = fanout_capacity(fanout)
    by_cap = fanout.max_orders_per_run / (fanout.run_every_seconds * fanout.reads_per_change)
    limited_by = (
        "its cap on orders a run"
        if changes >= by_cap
        else f"its {fanout.max_concurrency} workers' time within the run's budget"
    )
    return ReconciliationCapacity(
        orders_read_per_run=changes * fanout.run_every_seconds * fanout.reads_per_change,
        runs_per_hour=HOUR / settings.reconciliation_every_seconds,
        reads_per_change=fanout.reads_per_change,
        limited_by=limited_by,
    )


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

    def applying(self, rest: bool = False) -> list[Row]:
        return [r for r in self.rows if rest or not r.rest_only]

    def first_to_saturate(self, rest: bool = False, webhook_path_only: bool = False) -> Row:
        rows = [r for r in self.applying(rest) if r.webhook_path or not webhook_path_only]
        return min(rows, key=lambda r: r.headroom)

    def saturated(self, rest: bool = False) -> list[Row]:
        return sorted((r for r in self.applying(rest) if r.headroom < 1), key=lambda r: r.headroom)


def _throughput(lanes: float, batch: int, seconds: float) -> float | None:
    return lanes * batch / seconds if seconds else None


@dataclass(frozen=True)
class At:
    """A rate's figures for the stages: what one delivery uses (`e`), the settings (`s`), the
    quotas (`q`); `part`, `amount`: the table or index a stage repeats over, and its figure."""

    e: PerEvent
    payments_per_second: float
    s: StackSettings
    q: Quotas
    part: str = ""
    amount: float = 0.0

    @property
    def rate(self) -> float:
        """Deliveries a second."""
        return self.payments_per_second * self.e.deliveries_per_payment

    @property
    def ingest_ms(self) -> float:
        return self.e.seconds_per("ingest", self.e.invocations.get("ingest", 0.0)) * 1000

    @property
    def ses_rate(self) -> float:
        return self.s.ses_send_rate or self.q.value("ses_send_rate")

    @property
    def account(self) -> float:
        return self.s.account_concurrency or self.q.value("lambda_concurrent_executions")

    @property
    def shards(self) -> float:
        return self.q.assumptions["outbox_stream_shards"]

    @property
    def outbox_lanes(self) -> float:
        return self.shards * self.s.outbox_parallelization_factor

    @property
    def process_batch_seconds(self) -> float:
        return self.s.process_batch_size * self.e.seconds_per("process", self.e.queue_messages)

    @property
    def outbox_batch_seconds(self) -> float:
        return self.s.outbox_batch_size * self.e.seconds_per("outbox", self.e.outbox_items)

    @property
    def ingest_concurrency(self) -> float:
        return self.rate * self.e.seconds.get("ingest", 0.0)

    def _busy(self, function: str, work: float, lanes: float) -> float:
        """The concurrency a Lambda stage keeps busy, at most its lanes."""
        return min(self.rate * work * self.e.seconds_per(function, work), lanes)

    @property
    def process_concurrency(self) -> float:
        return self._busy("process", self.e.queue_messages, self.s.process_max_concurrency)

    @property
    def outbox_concurrency(self) -> float:
        return self._busy("outbox", self.e.outbox_items, self.outbox_lanes)

    @property
    def scheduled_concurrency(self) -> float:
        return self.s.scheduled_functions + self.s.reconciliation_concurrency

    @property
    def ingest_limit(self) -> float:
        """What the account leaves ingest: the others' concurrency at its most."""
        most = self.s.process_max_concurrency + self.outbox_lanes + self.scheduled_concurrency
        return self.account - most

    @property
    def waiting_every_minutes(self) -> float:
        return self.s.waiting_every_seconds / 60

    @property
    def waiting_limit(self) -> float | None:
        per_redrive = self.e.seconds_per_redrive
        if not per_redrive:
            return None
        return self.s.waiting_timeout_seconds / per_redrive / self.s.waiting_every_seconds

    @cached_property
    def reconciliation(self) -> ReconciliationCapacity:
        per_order = 1 / max(self.e.deliveries_per_payment, 1e-9)
        return reconciliation_capacity(
            self.s,
            self.e.seconds_per("reconciliation", per_order),
            self.q.assumptions["reconciliation_hour_fraction"],
        )


@dataclass(frozen=True)
class AtLeast:
    """A lift: the setting and, over the limit, the value that carries the load (the limit
    grows with the setting); `most`: the quota holding AWS's ceiling on it."""

    setting: str
    current: Callable[[At], float]
    unit: str = ""
    most: str | None = None
    beyond: str = "and more"

    def __call__(self, at: At, load: float, limit: float | None) -> str:
        if limit is None or load <= limit:
            return self.setting
        needed = math.ceil(self.current(at) * load / limit)
        most = at.q.value(self.most) if self.most else None
        if most is not None and needed > most:
            return f"{self.setting} at its most ({most:,.0f}{self.unit}), {self.beyond}"
        return f"{self.setting} >= {needed:,}{self.unit}"


@dataclass(frozen=True)
class Stage:
    """A component as data: `component` and a text `lift` are formatted with the rate's
    figures (`{at.…}`); `source` names a quota of quotas.toml (its limit, unless `limit` says
    otherwise, and its page) or where the stack sets the limit; `parts`: what it repeats over
    (tables, indexes), each row's `at.part` and `at.amount`."""

    component: str
    unit: str
    load: Callable[[At], float]
    source: str
    limit: Callable[[At], float | None] | None = None
    lift: str | AtLeast = QUOTA_INCREASE
    parts: Callable[[At], Mapping[str, float]] = lambda at: {"": 0.0}
    rest_only: bool = False
    webhook_path: bool = True

    def rows(self, at: At) -> Iterable[Row]:
        for part, amount in self.parts(at).items():
            yield self.row(replace(at, part=part, amount=amount))

    def row(self, at: At) -> Row:
        quota = at.q.quotas.get(self.source)
        load = self.load(at)
        limit = self.limit(at) if self.limit else at.q.value(self.source)
        lift = self.lift(at, load, limit) if callable(self.lift) else self.lift.format(at=at)
        return Row(
            self.component.format(at=at),
            load,
            limit,
            self.unit,
            lift,
            quota.source if quota else self.source,
            self.rest_only,
            self.webhook_path,
        )


def _new_table_peak(at: At) -> dict[str, float]:
    """Each table's writes and reads as one linear combination, in write units."""
    write, read = at.e.write_units, at.e.read_units
    ratio = at.q.value("dynamodb_new_table_write_units") / at.q.value(
        "dynamodb_new_table_read_units"
    )
    return {t: write.get(t, 0.0) + read.get(t, 0.0) * ratio for t in sorted({*write, *read})}


def _index_partitions(at: At) -> dict[str, float]:
    """An index's writes spread over its shards (those of the hour, for `changed`)."""
    shards = {"changed": at.s.changed_index_shards, "due": at.s.due_index_shards}
    found: dict[str, float] = {}
    for index, units in at.e.index_write_units.items():
        name = index.split("/", 1)[-1]
        n = shards.get(name, 1)
        hour = " of the hour" if name == "changed" else ""
        found[f"`{name}`: each of its {n} partitions{hour}"] = units / n
    return found


def _per_part(
    component: str,
    unit: str,
    source: str,
    parts: Callable[[At], Mapping[str, float]],
    lift: str | AtLeast = QUOTA_INCREASE,
) -> Stage:
    """A stage a row per part (a table, an index), loaded with its amount per delivery."""
    return Stage(component, unit, lambda at: at.rate * at.amount, source, lift=lift, parts=parts)


def _secret_reads(at: At) -> float:
    warm = at.ingest_concurrency + at.process_concurrency
    return warm * at.e.secrets_per_container / at.s.secret_cache_seconds


def _all_concurrency(at: At) -> float:
    return (
        at.ingest_concurrency
        + at.process_concurrency
        + at.outbox_concurrency
        + at.scheduled_concurrency
    )


# The table, a row per component in the page's order.
STAGES: tuple[Stage, ...] = (
    Stage(
        "API Gateway stage throttle (HTTP or REST)",
        "requests/s",
        lambda at: at.rate,
        STACK_SETTINGS,
        lambda at: at.s.api_throttle_rate,
        AtLeast(
            f"`API_THROTTLE_RATE` in {STACK_SETTINGS}", lambda at: at.s.api_throttle_rate, "/s"
        ),
    ),
    Stage(
        "API Gateway account quota (HTTP and REST APIs together)",
        "requests/s",
        lambda at: at.rate,
        "api_gateway_account_rps",
    ),
    Stage(
        "WAF rate rule per source address (REST + WAF only)",
        "requests/s",
        lambda at: at.rate / at.q.assumptions["provider_source_addresses"],
        "waf_rate_window_seconds",
        lambda at: (
            at.s.waf_requests_per_address_per_5_minutes / at.q.value("waf_rate_window_seconds")
        ),
        "`providerIpAllowList` (the providers' addresses are never counted)",
        rest_only=True,
    ),
    Stage(
        "ingest Lambda ({at.ingest_ms:.0f} ms a request)",
        "concurrent executions",
        lambda at: at.ingest_concurrency,
        "lambda_concurrent_executions",
        lambda at: at.ingest_limit,
        AtLeast("a Lambda concurrency quota", lambda at: at.account),
    ),
    Stage(
        "SQS webhook queue (sends, receives, deletes)",
        "requests/s",
        lambda at: at.rate * at.e.queue_requests,
        "sqs_in_flight_messages",
        lambda at: None,
        "none needed: a standard queue's API rate is unlimited",
    ),
    Stage(
        "process at maximum concurrency {at.s.process_max_concurrency} "
        "(batch {at.s.process_batch_size}: {at.process_batch_seconds:.2f} s)",
        "messages/s",
        lambda at: at.rate * at.e.queue_messages,
        STACK_CONTEXT,
        lambda at: _throughput(
            at.s.process_max_concurrency, at.s.process_batch_size, at.process_batch_seconds
        ),
        AtLeast(
            "`processMaxConcurrency`",
            lambda at: at.s.process_max_concurrency,
            most="sqs_event_source_maximum_concurrency",
        ),
    ),
    _per_part(
        "DynamoDB `{at.part}` writes",
        "WRU/s",
        "dynamodb_table_write_units",
        lambda at: at.e.write_units,
    ),
    _per_part(
        "DynamoDB `{at.part}` reads",
        "RRU/s",
        "dynamodb_table_read_units",
        lambda at: at.e.read_units,
    ),
    _per_part(
        "DynamoDB `{at.part}`, a new table's instant peak",
        "WRU/s (reads at 1/3)",
        "dynamodb_new_table_write_units",
        _new_table_peak,
        "warm throughput on the table, or a 30-minute ramp",
    ),
    Stage(
        "one order's partition: a payment's whole story within a second",
        "WRU/s",
        lambda at: max(at.e.write_units.values(), default=0.0) * at.e.deliveries_per_payment,
        "dynamodb_partition_write_units",
        lift="none (a hard limit): one order takes this many stories a second",
    ),
    _per_part(
        "index {at.part}",
        "WRU/s",
        "dynamodb_partition_write_units",
        _index_partitions,
        "more shards (`CHANGES_SHARDS`, `OUTBOX_DUE_SHARDS` in functions/shared/tables.py)",
    ),
    Stage(
        "outbox stream mapping ({at.shards:.0f} shard x {at.s.outbox_parallelization_factor}, "
        "batch {at.s.outbox_batch_size}: {at.outbox_batch_seconds:.2f} s)",
        "items/s",
        lambda at: at.rate * at.e.outbox_items,
        "stream_parallelization_factor",
        lambda at: _throughput(at.outbox_lanes, at.s.outbox_batch_size, at.outbox_batch_seconds),
        AtLeast(
            f"`OUTBOX_PARALLELIZATION_FACTOR` in {STACK_SETTINGS} (shards grow with the table)",
            lambda at: at.s.outbox_parallelization_factor,
            most="stream_parallelization_factor",
            beyond="and more stream shards",
        ),
    ),
    Stage(
        "EventBridge PutEvents",
        "requests/s",
        lambda at: at.rate * at.e.put_events,
        "eventbridge_put_events_tps",
    ),
    Stage(
        "SES sending rate",
        "e-mails/s",
        lambda at: at.rate * at.e.emails,
        "ses_send_rate",
        lambda at: at.ses_rate,
        AtLeast("the SES sending rate quota", lambda at: at.ses_rate, "/s"),
    ),
    Stage(
        "Secrets Manager GetSecretValue (cached 5 min a container)",
        "requests/s",
        _secret_reads,
        "secrets_manager_get_secret_value_tps",
        lift="none needed (a hard limit)",
    ),
    Stage(
        "Lambda account concurrency (all functions)",
        "concurrent executions",
        _all_concurrency,
        "lambda_concurrent_executions",
        lambda at: at.account,
        "a Lambda concurrency quota increase",
    ),
    Stage(
        "waiting run (every {at.waiting_every_minutes:.0f} min, "
        "{at.s.waiting_timeout_seconds:.0f} s timeout)",
        "re-drives/s",
        lambda at: at.rate * at.e.waiting_redrives,
        STACK_SETTINGS,
        lambda at: at.waiting_limit,
        f"its timeout (`WAITING_TIMEOUT_SECONDS` in {STACK_SETTINGS})",
        webhook_path=False,
    ),
    Stage(
        "reconciliation (hourly, {at.reconciliation.orders_read_per_run:,.0f} orders a run, "
        "{at.reconciliation.reads_per_change:g} reads a change)",
        "orders changed/s",
        lambda at: at.payments_per_second,
        "infra/reconciliation.py",
        lambda at: at.reconciliation.changes_per_second,
        "{at.reconciliation.limited_by}: the Map's `max_concurrency` (up to 40) in "
        "infra/reconciliation.py, `CHANGES_SHARDS`, `MAX_ORDERS_PER_RUN`",
        webhook_path=False,
    ),
)


def model(
    per_event: PerEvent,
    payments_per_second: float,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
    stages: Iterable[Stage] = STAGES,
) -> Capacity:
    """The table folded at a rate: each stage's rows, its load against its limit."""
    at = At(per_event, payments_per_second, settings or StackSettings(), quotas or Quotas.load())
    return Capacity(payments_per_second, at.rate, [row for s in stages for row in s.rows(at)])


# -- a burst: the API admits it at its tightest limit (the rest is refused with 429 and retried
# by the provider), SQS holds what process has not taken yet, each later stage drains at its rate.


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


# What waits in a burst: (what, which wait, the setting bounding it, what happens past it).
DEADLINES = (
    (
        "a delivery refused with 429 until the API takes it (the providers retry: Stripe for 3 "
        "days)",
        "refused",
        "wait_limit_seconds",
        "the provider stops retrying: `umavez replay` the window",
    ),
    (
        "the last accepted delivery, in the webhook queue",
        "drain",
        "queue_retention_seconds",
        "SQS deletes it unprocessed (queue retention)",
    ),
    (
        "a parked delivery whose binding is still queued",
        "drain",
        "wait_limit_seconds",
        "it moves to unmatched (money nobody can route: alarmed, attachable)",
    ),
    (
        "a new outbox item, before its stream record is sent",
        "outbox",
        "outbox_stream_max_record_age_seconds",
        "the mapping drops the record; the sweeper parks the item and sends it",
    ),
    (
        "an outbox item still pending (the reconciliation's deadline)",
        "pending",
        "outbox_pending_deadline_seconds",
        "the reconciliation reports it stuck (an alarm, nothing lost)",
    ),
    (
        "an e-mail held back by SES's sending rate",
        "email",
        "outbox_give_up_seconds",
        "the item is given up (dead, alarmed; `umavez outbox revive --all-dead`)",
    ),
)


def _row(capacity: Capacity, prefix: str) -> Row:
    return next(r for r in capacity.rows if r.component.startswith(prefix))


def _limit(row: Row) -> float:
    return row.limit or math.inf


def _intake(e: PerEvent, capacity: Capacity) -> tuple[float, str]:
    """The rate the API takes deliveries in at, and what holds it: the tightest API limit on a
    webhook's way, or the concurrency the account leaves ingest."""
    gates = [
        r
        for r in capacity.applying()
        if r.webhook_path and r.unit == "requests/s" and r.limit and "API" in r.component
    ]
    ingest = _row(capacity, "ingest")
    seconds = e.seconds.get("ingest")
    ingest_per_second = ingest.limit / seconds if ingest.limit and seconds else math.inf
    gate = min(gates, key=_limit)
    if _limit(gate) <= ingest_per_second:
        return _limit(gate), gate.component
    return ingest_per_second, "ingest"


def burst(
    per_event: PerEvent, deliveries: int, capacity: Capacity, settings: StackSettings
) -> Burst:
    e = per_event
    intake_rate, intake_name = _intake(e, capacity)
    process_rate = _limit(_row(capacity, "process")) / max(e.queue_messages, 1e-9)
    drain = deliveries / min(intake_rate, process_rate)
    queue_peak = max(0.0, deliveries * (1 - process_rate / intake_rate))
    outbox = max(drain, deliveries * e.outbox_items / _limit(_row(capacity, "outbox")))
    email = max(drain, deliveries * e.emails / _limit(_row(capacity, "SES sending rate")))
    orders = deliveries / max(e.deliveries_per_payment, 1e-9)
    reconciliation = orders / _limit(capacity.rows[-1])
    waits = {
        "refused": deliveries / intake_rate,
        "drain": drain,
        "outbox": outbox - drain,
        "pending": max(outbox, email) - drain,
        "email": email - drain,
    }
    deadlines = [
        Deadline(what, waits[wait], getattr(settings, limit), then)
        for what, wait, limit, then in DEADLINES
    ]
    return Burst(
        deliveries,
        intake_rate,
        intake_name,
        process_rate,
        drain,
        queue_peak,
        outbox,
        email,
        reconciliation,
        deadlines,
    )
