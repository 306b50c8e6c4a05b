"""`umavez capacity`: what rate the deployed stack sustains, and what gives first.

Each component on a webhook's way and each scheduled run is a stage of capacity.toml: its load at
a rate of payments a second (from what one delivery of the drill mix uses, per_event.py), its limit
(AWS's quotas, the stack's settings) and the setting that lifts it. `model` folds the table at a
rate: headroom = limit / load; a Lambda stage's throughput = concurrency x batch / its duration.
burst.py: a provider's backlog delivered at once, drained stage by stage, against the deadlines.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import Any

from costmodel.measurement import HOUR, Quotas, StackSettings
from costmodel.per_event import PerEvent
from infra.reconciliation import RECONCILIATION
from infra.reconciliation import reconciliation_capacity as fanout_capacity

CAPACITY_PATH = Path(__file__).with_name("capacity.toml")
QUOTA_INCREASE = "a quota increase request"


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


@dataclass(frozen=True)
class At:
    """A rate's figures, which the stages of capacity.toml name: what one delivery uses (`e`),
    the settings (`s`), the quotas (`q`); `part`, `amount`: the table or index a stage repeats
    over, and its figure."""

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
    def process_throughput(self) -> float | None:
        """A Lambda stage's throughput: concurrency x batch / its duration."""
        seconds = self.process_batch_seconds
        lanes, batch = self.s.process_max_concurrency, self.s.process_batch_size
        return lanes * batch / seconds if seconds else None

    @property
    def outbox_throughput(self) -> float | None:
        seconds = self.outbox_batch_seconds
        return self.outbox_lanes * self.s.outbox_batch_size / seconds if seconds else None

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
    def all_concurrency(self) -> float:
        busy = self.ingest_concurrency + self.process_concurrency + self.outbox_concurrency
        return busy + self.scheduled_concurrency

    @property
    def ingest_limit(self) -> float:
        """What the account leaves ingest: the others' concurrency at its most."""
        most = self.s.process_max_concurrency + self.outbox_lanes + self.scheduled_concurrency
        return self.account - most

    @property
    def per_source_address(self) -> float:
        return self.rate / self.q.assumptions["provider_source_addresses"]

    @property
    def waf_limit(self) -> float:
        window = self.q.value("waf_rate_window_seconds")
        return self.s.waf_requests_per_address_per_5_minutes / window

    @property
    def secret_reads(self) -> float:
        warm = self.ingest_concurrency + self.process_concurrency
        return warm * self.e.secrets_per_container / self.s.secret_cache_seconds

    @property
    def story_write_units(self) -> float:
        """One order's partition: a payment's whole story, its busiest table's writes."""
        return max(self.e.write_units.values(), default=0.0) * self.e.deliveries_per_payment

    @property
    def new_table_peak(self) -> dict[str, float]:
        """Each table's writes and reads as one linear combination, in write units."""
        write, read = self.e.write_units, self.e.read_units
        q = self.q.value
        ratio = q("dynamodb_new_table_write_units") / q("dynamodb_new_table_read_units")
        return {t: write.get(t, 0.0) + read.get(t, 0.0) * ratio for t in sorted({*write, *read})}

    @property
    def index_partitions(self) -> dict[str, float]:
        """An index's writes spread over its shards (those of the hour, for `changed`)."""
        shards = {"changed": self.s.changed_index_shards, "due": self.s.due_index_shards}
        found: dict[str, float] = {}
        for index, units in self.e.index_write_units.items():
            name = index.split("/", 1)[-1]
            n = shards.get(name, 1)
            hour = " of the hour" if name == "changed" else ""
            found[f"`{name}`: each of its {n} partitions{hour}"] = units / n
        return found

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

    def figure(self, path: str) -> Any:
        """A figure by its path in capacity.toml (`rate`, `e.emails`, `s.api_throttle_rate`)."""
        return attrgetter(path)(self)

    def product(self, paths: str) -> float:
        """A load of capacity.toml: a figure, or a product of figures (`rate * e.emails`)."""
        return float(math.prod(self.figure(path.strip()) for path in paths.split("*")))


@dataclass(frozen=True)
class AtLeast:
    """A lift: the setting and, over the limit, the value that carries the load (the limit
    grows with the setting, now the figure `current`); `most`: the quota holding AWS's ceiling
    on it."""

    setting: str
    current: str
    unit: str = ""
    most: str | None = None
    beyond: str = "and more"

    def __call__(self, at: At, load: float, limit: float | None) -> str:
        if limit is None or load <= limit:
            return self.setting
        needed = math.ceil(at.figure(self.current) * load / limit)
        most = at.q.value(self.most) if self.most else None
        if most is not None and needed > most:
            return f"{self.setting} at its most ({most:,.0f}{self.unit}), {self.beyond}"
        return f"{self.setting} >= {needed:,}{self.unit}"


@dataclass(frozen=True)
class Stage:
    """A component as data, a stage of capacity.toml (its header says each field)."""

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

    def rows(self, at: At) -> Iterable[Row]:
        parts: Mapping[str, float] = at.figure(self.parts) if self.parts else {"": 0.0}
        for part, amount in parts.items():
            yield self.row(replace(at, part=part, amount=amount))

    def row(self, at: At) -> Row:
        quota = at.q.quotas.get(self.source)
        load = at.product(self.load)
        limit = at.figure(self.limit) if self.limit else at.q.value(self.source)
        limit = None if self.no_limit else limit
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


def _stage(entry: Mapping[str, Any]) -> Stage:
    lift = entry.get("lift", QUOTA_INCREASE)
    return Stage(**{**entry, "lift": AtLeast(**lift) if isinstance(lift, dict) else lift})


# The table, a row per component in the page's order, and what waits in a burst.
CAPACITY_TABLE = tomllib.loads(CAPACITY_PATH.read_text())
STAGES = tuple(_stage(entry) for entry in CAPACITY_TABLE["stage"])


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
