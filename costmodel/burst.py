"""A burst (`umavez capacity --burst N`: a provider's backlog after an outage, delivered at
once): the API admits it at its tightest limit (the rest is refused with 429 and retried by the
provider), SQS holds what process has not taken yet, each later stage drains at its own rate;
and what waits meanwhile against how long it may wait."""

from __future__ import annotations

import math
from dataclasses import dataclass

from costmodel.headroom import Capacity, Row
from costmodel.limits import StackSettings
from costmodel.per_event import PerEvent


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
    """The rate the API takes deliveries in at, and what holds it: the tightest API limit on
    a webhook's way, or the concurrency the account leaves ingest."""
    gates = [
        r
        for r in capacity.applying()
        if r.webhook_path and r.unit == "requests/s" and r.limit and "API" in r.component
    ]
    ingest = _row(capacity, "ingest")
    ingest_per_second = (
        ingest.limit / e.seconds["ingest"] if ingest.limit and e.seconds.get("ingest") else math.inf
    )
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
    deadlines = _deadlines(settings, deliveries / intake_rate, drain, outbox, email)
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


def _deadlines(
    settings: StackSettings, refused: float, drain: float, outbox: float, email: float
) -> list[Deadline]:
    s = settings
    return [
        Deadline(
            "a delivery refused with 429 until the API takes it (the providers retry: "
            "Stripe for 3 days)",
            refused,
            s.wait_limit_seconds,
            "the provider stops retrying: `umavez replay` the window",
        ),
        Deadline(
            "the last accepted delivery, in the webhook queue",
            drain,
            s.queue_retention_seconds,
            "SQS deletes it unprocessed (queue retention)",
        ),
        Deadline(
            "a parked delivery whose binding is still queued",
            drain,
            s.wait_limit_seconds,
            "it moves to unmatched (money nobody can route: alarmed, attachable)",
        ),
        Deadline(
            "a new outbox item, before its stream record is sent",
            outbox - drain,
            s.outbox_stream_max_record_age_seconds,
            "the mapping drops the record; the sweeper parks the item and sends it",
        ),
        Deadline(
            "an outbox item still pending (the reconciliation's deadline)",
            max(outbox, email) - drain,
            s.outbox_pending_deadline_seconds,
            "the reconciliation reports it stuck (an alarm, nothing lost)",
        ),
        Deadline(
            "an e-mail held back by SES's sending rate",
            email - drain,
            s.outbox_give_up_seconds,
            "the item is given up (dead, alarmed; `umavez outbox revive --all-dead`)",
        ),
    ]
