"""A TransactWriteItems by named slots, and what DynamoDB says when it refuses one.

DynamoDB answers a cancelled transaction with one reason per item, by position. The items are
placed here with the slot each occupies (`Transaction`), and the reasons are read back by slot
(`Refusal`), so that no caller counts positions. `commit` runs a transaction and returns its
refusal, if any: the verdicts over a refusal are plain code (functions/process/verdict.py).
This module is the only place in functions/ that reads a cancellation's reasons.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from functions.shared.dynamo import from_attributes, raise_unclassified

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

CONDITION_FAILED: Final = "ConditionalCheckFailed"
# Codes that mean "nothing was written, the same request may succeed later".
CONTENDED_REASONS: Final = frozenset(
    {
        "TransactionConflict",
        "ThrottlingError",
        "ProvisionedThroughputExceeded",
        "RequestLimitExceeded",
    }
)


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
    # The statement's:
    FEE = "fee"  # a statement line's fee, recorded once: refused, recorded before


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


@dataclass(frozen=True)
class Cancellation:
    """Why a TransactWriteItems was cancelled, by the position of each item."""

    codes: tuple[str | None, ...]
    items: tuple[Mapping[str, Any] | None, ...]

    def failed_condition(self, position: int) -> bool:
        return position < len(self.codes) and self.codes[position] == CONDITION_FAILED

    def old_item(self, position: int) -> dict[str, Any] | None:
        item = self.items[position] if position < len(self.items) else None
        return from_attributes(item) if item else None

    @property
    def contended(self) -> bool:
        return any(code in CONTENDED_REASONS for code in self.codes)


def cancellation_of(exc: ClientError, operation: str) -> Cancellation:
    """Return the cancellation, or raise the typed error for a failure that is not one."""
    if exc.response.get("Error", {}).get("Code") != "TransactionCanceledException":
        raise_unclassified(exc, operation)
    reasons: Sequence[Mapping[str, Any]] = exc.response.get("CancellationReasons", [])
    return Cancellation(
        codes=tuple(_reason_code(reason) for reason in reasons),
        items=tuple(reason.get("Item") for reason in reasons),
    )


# How a transaction is committed: `commit`, or (in the broken-design harness) a broken one.
Committer = Callable[["DynamoDBClient", Transaction], "Refusal | None"]


def commit(db: DynamoDBClient, transaction: Transaction) -> Refusal | None:
    """Write the transaction, all or nothing: None once written, else what refused it. A
    failure that is no cancellation raises its typed error (retryable or not)."""
    try:
        db.transact_write_items(TransactItems=transaction.items)
    except ClientError as exc:
        return transaction.refusal(cancellation_of(exc, "TransactWriteItems"))
    return None


def is_condition_failure(exc: ClientError) -> bool:
    """A single-item write whose condition did not hold."""
    return exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException"


def _reason_code(reason: Mapping[str, Any]) -> str | None:
    code = reason.get("Code")
    return None if code in (None, "None") else str(code)
