"""What a refused effect transaction means: plain code over the refusal, read by slot
(functions/store/transaction.py), tested without DynamoDB (tests/unit/test_effect_transaction.py).
"""

from __future__ import annotations

from enum import StrEnum

from functions.store.transaction import Refusal, Slot


class Verdict(StrEnum):
    """What a refused effect transaction means."""

    DUPLICATE = "duplicate"  # the key was reserved first: this entry exists
    RETRY = "retry"  # contention (another transaction on these items): SQS delivers it again
    CONFLICT = "conflict"  # an object is bound to another order: recorded, not applied
    VOID = "void"  # it reverses an entry that never counted: both keys voided
    STALE = "stale"  # the order has a later event: counted and announced, status kept
    UNEXPECTED = "unexpected"  # nothing above: fail loudly, the record goes back to SQS


def decide(refusal: Refusal, *, stale_attempt: bool) -> Verdict:
    """In this order: a reserved key says the entry exists whatever else failed; contention
    (or a capture mark moved by another capture) is retried before anything is concluded from
    it; a binding held by another order is a
    conflict; a reversal of what never counted is void; the order's guard makes the entry
    stale, on the first attempt only (the stale transaction guards no status)."""
    if refusal.failed(Slot.KEY):
        return Verdict.DUPLICATE
    if refusal.contended or refusal.failed(Slot.CAPTURED):
        # A capture mark moved since it was read: another capture counted; read it again.
        return Verdict.RETRY
    if refusal.binding() is not None:
        return Verdict.CONFLICT
    if refusal.failed(Slot.REVERSED):
        return Verdict.VOID
    if not stale_attempt and refusal.failed(Slot.ORDER):
        return Verdict.STALE
    return Verdict.UNEXPECTED
