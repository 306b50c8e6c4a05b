"""A burst: a provider's backlog delivered at once. The API admits it at its tightest limit (the
rest is refused with 429 and retried by the provider), SQS holds what process has not taken yet,
each later stage drains at its rate; what waits is held to its deadline (capacity.toml)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodel.headroom import CAPACITY_TABLE, Capacity, Row
from costmodel.measurement import StackSettings
from costmodel.per_event import PerEvent

# What waits: `what`, which of the waits below, the setting bounding it, what happens past it.
DEADLINES: list[dict[str, str]] = CAPACITY_TABLE["deadline"]


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
        Deadline(d["what"], waits[d["wait"]], getattr(settings, d["limit"]), d["then"])
        for d in DEADLINES
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
