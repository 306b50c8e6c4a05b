"""What the capacity holds the load to: AWS's documented quotas (quotas.toml, each with its
source) and the stack's own settings as deployed by default, read from infra/settings.py,
infra/config.py, infra/mappings.py and the functions' named constants."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from functions.process.waiting import WAIT_LIMIT_SECONDS
from functions.reconcile.service import PENDING_DEADLINE_SECONDS
from functions.shared.settings import DEFAULT_OUTBOX_GIVE_UP_HOURS
from functions.shared.tables import CHANGES_SHARDS, OUTBOX_DUE_SHARDS
from infra import settings as stack
from infra.mappings import DEFAULT_PROCESS_MAX_CONCURRENCY
from infra.reconciliation import RECONCILIATION
from infra.reconciliation import reconciliation_capacity as fanout_capacity

QUOTAS_PATH = Path(__file__).with_name("quotas.toml")
HOUR = 3600.0
DAY = 24 * HOUR


@dataclass(frozen=True)
class Quota:
    name: str
    value: float
    unit: str
    adjustable: bool
    source: str
    as_of: str
    note: str = ""


def numbers(loaded: Mapping[str, Any], table: str) -> dict[str, float]:
    """A TOML table of plain figures (quotas.toml's and prices.toml's `[assumptions]`, ...)."""
    return {name: float(value) for name, value in loaded[table].items()}


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
    loaded = tomllib.loads(path.read_text())["provider_limits"]
    found = {}
    for name, entry in loaded.items():
        requests = entry.get("requests")
        per_second = float(requests) / float(entry["per_seconds"]) if requests else None
        found[name] = ProviderLimit(
            per_second,
            str(entry["unit"]),
            str(entry["title"]),
            str(entry.get("source", "")),
            str(entry["as_of"]),
            str(entry.get("note", "")),
            float(entry.get("per_seconds", 1)),
        )
    return found


def _ingest_secret_cache_seconds() -> float:
    """How long ingest caches a secret. Imported when asked, not with this module: the handler's
    module builds its logger, tracer and metrics from the environment as it is imported, and
    the embedded stack imports it under its own."""
    from functions.ingest.handler import SECRET_CACHE_SECONDS

    return float(SECRET_CACHE_SECONDS)


@dataclass(frozen=True)
class StackSettings:
    """What the capacity depends on, as deployed by default; a merchant changes some of these
    (`processMaxConcurrency`, the SES quota, the account's Lambda concurrency)."""

    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    process_batch_size: int = stack.PROCESS_BATCH_SIZE
    outbox_batch_size: int = stack.OUTBOX_BATCH_SIZE
    outbox_parallelization_factor: int = stack.OUTBOX_PARALLELIZATION_FACTOR
    api_throttle_rate: float = stack.API_THROTTLE_RATE
    waf_requests_per_address_per_5_minutes: float = stack.WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES
    # None: AWS's default quota (costmodel/quotas.toml).
    ses_send_rate: float | None = None
    account_concurrency: float | None = None
    queue_retention_seconds: float = stack.WEBHOOK_QUEUE_RETENTION_DAYS * DAY
    outbox_stream_max_record_age_seconds: float = stack.OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS
    waiting_every_seconds: float = stack.SCHEDULE_MINUTES["waiting"] * 60.0
    waiting_timeout_seconds: float = stack.WAITING_TIMEOUT_SECONDS
    reconciliation_every_seconds: float = stack.SCHEDULE_MINUTES["reconciliation"] * 60.0
    scheduled_functions: int = len(stack.SCHEDULED_FUNCTIONS)
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


# -- the reconciliation -------------------------------------------------------------------------


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
