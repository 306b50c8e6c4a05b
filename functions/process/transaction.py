"""The effect transaction by named slots: what each item of a TransactWriteItems is for, what a
cancellation says about each, and what that decides.

DynamoDB answers a cancelled transaction with one reason per item, by position. The items are
built here with the slot each occupies (`Transaction`), the reasons are read back by slot
(`Refusal`), and the decision is plain code over them (`decide`): no caller counts positions,
and the decision is tested without DynamoDB (tests/unit/test_effect_transaction.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from functions.shared.dynamo import Cancellation

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef


class Slot(StrEnum):
    """What an item of an effect's transaction does, and so what its refusal means."""

    KEY = "key"  # the effect key's reservation (attribute_not_exists): refused, a duplicate
    ORDER = "order"  # the order's update, guarded by ordering and currency: refused, stale
    OUTBOX = "outbox"  # the notification, written with the entry
    REVERSED = "reversed"  # the entry a reversal reverses must have counted: refused, void
    BINDING = "binding"  # an object bound to this order (first writer wins): refused, conflict
    AUDIT = "audit"  # the delivery's audit record
    VOIDED = "voided"  # a void's reservation of the key it reverses: refused, counted since
    CAPTURED = "captured"  # a top-up's move of its payment's capture mark: refused, moved since
    # The waiting room's moves (waiting.py):
    PARKED = "parked"  # a parked delivery's removal: refused, re-driven or attached meanwhile
    UNMATCHED = "unmatched"  # the delivery as unmatched money
    DORMANT = "dormant"  # a delivery that only binds, kept past its wait


@dataclass(frozen=True)
class Placed:
    """One item of the transaction, with its slot (and, for a binding, the object it binds)."""

    slot: Slot
    item: TransactWriteItemTypeDef
    ref: str | None = None


@dataclass(frozen=True)
class Refused:
    """A slot whose condition did not hold, and the item it found (ALL_OLD), if returned."""

    slot: Slot
    ref: str | None
    found: dict[str, object] | None


@dataclass(frozen=True)
class Refusal:
    """What a cancelled transaction said, by slot."""

    refused: tuple[Refused, ...]
    contended: bool
    codes: tuple[str | None, ...]

    def failed(self, slot: Slot) -> bool:
        return any(r.slot is slot for r in self.refused)

    def found(self, slot: Slot) -> dict[str, object] | None:
        """The item the refused slot found, if DynamoDB returned it."""
        return next((r.found for r in self.refused if r.slot is slot), None)

    def binding(self) -> Refused | None:
        """The first binding refused: its object is bound to another order."""
        return next((r for r in self.refused if r.slot is Slot.BINDING), None)

    @property
    def only_audit_refused(self) -> bool:
        """Every other slot held; only the audit record was there already."""
        return bool(self.refused) and all(r.slot is Slot.AUDIT for r in self.refused)


@dataclass(frozen=True)
class Transaction:
    """The items of one TransactWriteItems, each in its slot."""

    placed: tuple[Placed, ...]

    @classmethod
    def of(cls, *placed: Placed | Iterable[Placed]) -> Transaction:
        flat: list[Placed] = []
        for part in placed:
            flat.extend([part] if isinstance(part, Placed) else part)
        return cls(tuple(flat))

    @property
    def items(self) -> list[TransactWriteItemTypeDef]:
        return [p.item for p in self.placed]

    def item(self, slot: Slot) -> TransactWriteItemTypeDef:
        """The first item in `slot` (a slot other than BINDING holds one)."""
        return next(p.item for p in self.placed if p.slot is slot)

    def without(self, slot: Slot) -> Transaction:
        return Transaction(tuple(p for p in self.placed if p.slot is not slot))

    def refusal(self, cancellation: Cancellation) -> Refusal:
        """The cancellation's reasons, read back by the slot each item occupies."""
        refused = tuple(
            Refused(placed.slot, placed.ref, cancellation.old_item(position))
            for position, placed in enumerate(self.placed)
            if cancellation.failed_condition(position)
        )
        return Refusal(refused, cancellation.contended, cancellation.codes)


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
