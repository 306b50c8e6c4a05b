"""`umavez capacity`: what rate the deployed stack sustains, and what gives first.

Each component on a webhook's way (API Gateway, ingest, SQS, process at its mapping's maximum
concurrency, the DynamoDB tables and index partitions, the outbox stream mapping, EventBridge,
SES, Secrets Manager, Lambda's account concurrency) and the scheduled runs (waiting,
reconciliation) is a stage of `STAGES`: its load at a rate of payments a second (from what one
delivery uses, per_event.py), its limit (limits.py: AWS's quotas and the stack's settings) and
the setting that lifts it. `model` folds the table at a rate; the headroom is limit / load.

Throughput of a Lambda-driven stage = concurrency x batch / the batch's duration.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property

from costmodel.limits import Quotas, ReconciliationCapacity, StackSettings, reconciliation_capacity
from costmodel.per_event import PerEvent

# Where the stack's own limits are set, for the table's source column.
STACK_SETTINGS = "infra/settings.py"
STACK_CONTEXT = "infra/config.py"
QUOTA_INCREASE = "a quota increase request"


@dataclass(frozen=True)
class Row:
    component: str
    load: float
    limit: float | None  # None: no documented limit
    unit: str
    lift: str  # the setting that lifts the limit (and the value this rate needs)
    source: str  # where the limit is documented or set
    rest_only: bool = False  # the WAF: only with `-c apiType=rest -c waf=true`
    webhook_path: bool = True  # False: the scheduled checks, off a webhook's way

    @property
    def headroom(self) -> float:
        if self.limit is None or self.load <= 0:
            return math.inf
        return self.limit / self.load


@dataclass(frozen=True)
class Capacity:
    payments_per_second: float
    deliveries_per_second: float
    rows: list[Row]

    def applying(self, rest: bool = False) -> list[Row]:
        return [r for r in self.rows if rest or not r.rest_only]

    def first_to_saturate(self, rest: bool = False, webhook_path_only: bool = False) -> Row:
        """The tightest component: the first to saturate as the rate grows."""
        rows = [r for r in self.applying(rest) if r.webhook_path or not webhook_path_only]
        return min(rows, key=lambda r: r.headroom)

    def saturated(self, rest: bool = False) -> list[Row]:
        return sorted((r for r in self.applying(rest) if r.headroom < 1), key=lambda r: r.headroom)


# -- the stages ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class At:
    """A rate's figures, for the stages to read: what one delivery uses (`e`), the settings
    (`s`), the quotas (`q`) and what follows from them; `part`, `amount`: the table, index or
    other part a stage repeats over, and its own figure."""

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
    def process_limit(self) -> float | None:
        seconds = self.process_batch_seconds
        concurrency = self.s.process_max_concurrency
        return concurrency * self.s.process_batch_size / seconds if seconds else None

    @property
    def outbox_limit(self) -> float | None:
        seconds = self.outbox_batch_seconds
        return self.outbox_lanes * self.s.outbox_batch_size / seconds if seconds else None

    @property
    def ingest_concurrency(self) -> float:
        return self.rate * self.e.seconds.get("ingest", 0.0)

    @property
    def process_concurrency(self) -> float:
        busy = (
            self.rate * self.e.queue_messages * self.e.seconds_per("process", self.e.queue_messages)
        )
        return min(busy, self.s.process_max_concurrency)

    @property
    def outbox_concurrency(self) -> float:
        busy = self.rate * self.e.outbox_items * self.e.seconds_per("outbox", self.e.outbox_items)
        return min(busy, self.outbox_lanes)

    @property
    def scheduled_concurrency(self) -> float:
        return self.s.scheduled_functions + self.s.reconciliation_concurrency

    @property
    def ingest_limit(self) -> float:
        """What the account leaves ingest: the others' concurrency at its most."""
        others = self.s.process_max_concurrency + self.outbox_lanes + self.scheduled_concurrency
        return self.account - others

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
    """A lift: the setting, and when the load is over the limit, the value that carries it
    (the limit grows in proportion to the setting: a concurrency, a rate); `most`: the quota
    holding AWS's ceiling on it."""

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


def _one(at: At) -> Mapping[str, float]:
    return {"": 0.0}


@dataclass(frozen=True)
class Stage:
    """A component as data. `component` and a text `lift` are formatted with the rate's
    figures (`{at.…}`); `source` names a quota of quotas.toml (its limit, unless `limit` says
    otherwise, and its page) or where the stack sets the limit; `parts`: what the stage
    repeats over (the tables, the indexes), each row's `at.part` and `at.amount`."""

    component: str
    unit: str
    load: Callable[[At], float]
    source: str
    limit: Callable[[At], float | None] | None = None
    lift: str | AtLeast = QUOTA_INCREASE
    parts: Callable[[At], Mapping[str, float]] = _one
    rest_only: bool = False
    webhook_path: bool = True

    def rows(self, at: At) -> Iterable[Row]:
        for part, amount in self.parts(at).items():
            row_at = replace(at, part=part, amount=amount)
            yield self.row(row_at)

    def row(self, at: At) -> Row:
        quota = at.q.quotas.get(self.source)
        load = self.load(at)
        limit = self.limit(at) if self.limit else at.q.value(self.source)
        lift = self.lift(at, load, limit) if callable(self.lift) else self.lift.format(at=at)
        source = quota.source if quota else self.source
        component = self.component.format(at=at)
        return Row(
            component, load, limit, self.unit, lift, source, self.rest_only, self.webhook_path
        )


def _new_table_peak(at: At) -> dict[str, float]:
    """Each table's writes and reads as one linear combination, in write units."""
    write, read = at.e.write_units, at.e.read_units
    new_write = at.q.value("dynamodb_new_table_write_units")
    new_read = at.q.value("dynamodb_new_table_read_units")
    return {
        t: write.get(t, 0.0) + read.get(t, 0.0) * new_write / new_read
        for t in sorted({*write, *read})
    }


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


# The table: a row per component, in the page's order.
def _per_part(
    component: str,
    unit: str,
    source: str,
    parts: Callable[[At], Mapping[str, float]],
    lift: str | AtLeast = QUOTA_INCREASE,
) -> Stage:
    """A stage whose rows are its parts (tables, indexes), each loaded with its amount per
    event at the rate."""
    return Stage(component, unit, _rate_times_part, source, lift=lift, parts=parts)


def _rate_times_part(at: At) -> float:
    return at.rate * at.amount


def _write_units(at: At) -> Mapping[str, float]:
    return at.e.write_units


def _read_units(at: At) -> Mapping[str, float]:
    return at.e.read_units


STAGES: tuple[Stage, ...] = (
    Stage(
        "API Gateway stage throttle (HTTP or REST)",
        "requests/s",
        lambda at: at.rate,
        STACK_SETTINGS,
        limit=lambda at: at.s.api_throttle_rate,
        lift=AtLeast(
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
        limit=lambda at: (
            at.s.waf_requests_per_address_per_5_minutes / at.q.value("waf_rate_window_seconds")
        ),
        lift="`providerIpAllowList` (the providers' addresses are never counted)",
        rest_only=True,
    ),
    Stage(
        "ingest Lambda ({at.ingest_ms:.0f} ms a request)",
        "concurrent executions",
        lambda at: at.ingest_concurrency,
        "lambda_concurrent_executions",
        limit=lambda at: at.ingest_limit,
        lift=AtLeast("a Lambda concurrency quota", lambda at: at.account),
    ),
    Stage(
        "SQS webhook queue (sends, receives, deletes)",
        "requests/s",
        lambda at: at.rate * at.e.queue_requests,
        "sqs_in_flight_messages",
        limit=lambda at: None,
        lift="none needed: a standard queue's API rate is unlimited",
    ),
    Stage(
        "process at maximum concurrency {at.s.process_max_concurrency} "
        "(batch {at.s.process_batch_size}: {at.process_batch_seconds:.2f} s)",
        "messages/s",
        lambda at: at.rate * at.e.queue_messages,
        STACK_CONTEXT,
        limit=lambda at: at.process_limit,
        lift=AtLeast(
            "`processMaxConcurrency`",
            lambda at: at.s.process_max_concurrency,
            most="sqs_event_source_maximum_concurrency",
        ),
    ),
    _per_part("DynamoDB `{at.part}` writes", "WRU/s", "dynamodb_table_write_units", _write_units),
    _per_part("DynamoDB `{at.part}` reads", "RRU/s", "dynamodb_table_read_units", _read_units),
    _per_part(
        "DynamoDB `{at.part}`, a new table's instant peak",
        "WRU/s (reads at 1/3)",
        "dynamodb_new_table_write_units",
        _new_table_peak,
        lift="warm throughput on the table, or a 30-minute ramp",
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
        lift="more shards (`CHANGES_SHARDS`, `OUTBOX_DUE_SHARDS` in functions/shared/tables.py)",
    ),
    Stage(
        "outbox stream mapping ({at.shards:.0f} shard x {at.s.outbox_parallelization_factor}, "
        "batch {at.s.outbox_batch_size}: {at.outbox_batch_seconds:.2f} s)",
        "items/s",
        lambda at: at.rate * at.e.outbox_items,
        "stream_parallelization_factor",
        limit=lambda at: at.outbox_limit,
        lift=AtLeast(
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
        limit=lambda at: at.ses_rate,
        lift=AtLeast("the SES sending rate quota", lambda at: at.ses_rate, "/s"),
    ),
    Stage(
        "Secrets Manager GetSecretValue (cached 5 min a container)",
        "requests/s",
        lambda at: (
            (at.ingest_concurrency + at.process_concurrency)
            * at.e.secrets_per_container
            / at.s.secret_cache_seconds
        ),
        "secrets_manager_get_secret_value_tps",
        lift="none needed (a hard limit)",
    ),
    Stage(
        "Lambda account concurrency (all functions)",
        "concurrent executions",
        lambda at: (
            at.ingest_concurrency
            + at.process_concurrency
            + at.outbox_concurrency
            + at.scheduled_concurrency
        ),
        "lambda_concurrent_executions",
        limit=lambda at: at.account,
        lift="a Lambda concurrency quota increase",
    ),
    Stage(
        "waiting run (every {at.waiting_every_minutes:.0f} min, "
        "{at.s.waiting_timeout_seconds:.0f} s timeout)",
        "re-drives/s",
        lambda at: at.rate * at.e.waiting_redrives,
        STACK_SETTINGS,
        limit=lambda at: at.waiting_limit,
        lift=f"its timeout (`WAITING_TIMEOUT_SECONDS` in {STACK_SETTINGS})",
        webhook_path=False,
    ),
    Stage(
        "reconciliation (hourly, {at.reconciliation.orders_read_per_run:,.0f} orders a run, "
        "{at.reconciliation.reads_per_change:g} reads a change)",
        "orders changed/s",
        lambda at: at.payments_per_second,
        "infra/reconciliation.py",
        limit=lambda at: at.reconciliation.changes_per_second,
        lift="{at.reconciliation.limited_by}: the Map's `max_concurrency` (up to 40) in "
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
