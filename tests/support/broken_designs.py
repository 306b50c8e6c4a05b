"""Deliberately broken processors: each simplifies one guarantee away.

Each is the real processor given one broken part through its constructor: a store that
renders an item without its condition, reads a reversed entry as counted or commits the
outbox item apart, or another keying rule. No private method is overridden, so the processor's
internals can change freely. The guarantee tests are run against these to prove that each
would be caught (tests/functional/test_broken_designs_are_caught.py).
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import TYPE_CHECKING, ClassVar

from functions.process.interpreters import Interpreters
from functions.process.service import EffectProcessor
from functions.shared import tables
from functions.shared.domain import Effect, Outcome, RoutedEffect, effect_key
from functions.shared.dynamo import to_attributes
from functions.shared.items import Entry
from functions.shared.settings import DEFAULT_RETENTION_DAYS
from functions.store.ledger import LedgerItems
from functions.store.reads import Known, LedgerReads
from functions.store.transaction import Placed, Refusal, Slot, Transaction, commit

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef, UpdateTypeDef

CONDITION_FIELDS = (
    "ConditionExpression",
    "ExpressionAttributeNames",
    "ExpressionAttributeValues",
    "ReturnValuesOnConditionCheckFailure",
)


def unconditioned(item: TransactWriteItemTypeDef) -> TransactWriteItemTypeDef:
    """The same Put, written whatever is there."""
    for field in CONDITION_FIELDS:
        item["Put"].pop(field, None)  # type: ignore[misc]
    return item


class BrokenDesign(EffectProcessor):
    """The processor, built through its constructor with the parts a design below replaces."""

    items_kind: ClassVar[type[LedgerItems]] = LedgerItems
    reads_kind: ClassVar[type[LedgerReads]] = LedgerReads

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        clock: Callable[[], float],
        interpreters: Interpreters | None = None,
        retention_seconds: int = DEFAULT_RETENTION_DAYS * 86_400,
    ) -> None:
        super().__init__(
            dynamodb,
            table_names,
            clock,
            interpreters,
            retention_seconds,
            items=self.items_kind(table_names, clock, retention_seconds),
            reads=self.reads_kind(dynamodb, table_names.ledger),
            committer=type(self).committed,
            keyed=type(self).keyed,
        )

    @staticmethod
    def committed(db: DynamoDBClient, transaction: Transaction) -> Refusal | None:
        return commit(db, transaction)

    @staticmethod
    def keyed(effect: Effect, order_id: str) -> str:
        return effect_key(effect, order_id)


class _NoKeyCondition(LedgerItems):
    def key_reservation(
        self,
        routed: RoutedEffect,
        outcome: Outcome,
        *,
        key: str | None = None,
        taught_recipient: bool = False,
    ) -> TransactWriteItemTypeDef:
        reservation = super().key_reservation(
            routed, outcome, key=key, taught_recipient=taught_recipient
        )
        return unconditioned(reservation)

    def outbox_put(
        self, routed: RoutedEffect, *, late: bool, superseded: bool = False
    ) -> TransactWriteItemTypeDef:
        return unconditioned(super().outbox_put(routed, late=late, superseded=superseded))


class CheckThenInsert(BrokenDesign):
    """Reads the key, then writes without conditions: two readers both see 'absent'."""

    items_kind = _NoKeyCondition


class EventIdKey(BrokenDesign):
    """Keys by the provider's event id: catches literal redelivery only."""

    @staticmethod
    def keyed(effect: Effect, order_id: str) -> str:
        return hashlib.sha256(effect.delivery.event_id.encode()).hexdigest()


class _UnguardedOrder(LedgerItems):
    def order_update(self, routed: RoutedEffect) -> UpdateTypeDef:
        update = super().order_update(routed)
        update["ConditionExpression"] = "attribute_not_exists(#currency) OR #currency = :currency"
        return update


class NoOrderingGuard(BrokenDesign):
    """Updates the order whatever its last_event_at: an old event sends it back whenever the
    read before writing did not already see the newer one."""

    items_kind = _UnguardedOrder


class OutboxOutsideTransaction(BrokenDesign):
    """Commits the effect, then writes the outbox item in a second request."""

    @staticmethod
    def committed(db: DynamoDBClient, transaction: Transaction) -> Refusal | None:
        outbox = [p.item for p in transaction.placed if p.slot is Slot.OUTBOX]
        refusal = commit(db, transaction.without(Slot.OUTBOX))
        if refusal is None:
            for item in outbox:
                db.put_item(**item["Put"])
        return refusal


class _LateUnannounced(LedgerItems):
    def outbox_put(
        self, routed: RoutedEffect, *, late: bool, superseded: bool = False
    ) -> TransactWriteItemTypeDef:
        if not late:
            return super().outbox_put(routed, late=late)
        # Something harmless in the outbox item's slot.
        item = {tables.PARTITION_KEY: f"UNANNOUNCED#{routed.key}", tables.SORT_KEY: "-"}
        return {"Put": {"TableName": self._tables.ledger, "Item": to_attributes(item)}}


class StaleNotAnnounced(BrokenDesign):
    """Counts a late movement but tells nobody: downstream books miss money that moved."""

    items_kind = _LateUnannounced


class _LastWriterBinds(LedgerItems):
    def binding(
        self, provider: str, order_id: str, ref: str, attached_at: int | None = None
    ) -> TransactWriteItemTypeDef:
        return unconditioned(super().binding(provider, order_id, ref, attached_at))


class LastBindingWins(BrokenDesign):
    """Binds a payment to whichever order the latest event names: one payment, two credits."""

    items_kind = _LastWriterBinds


class _NoReversedCheck(LedgerItems):
    def reversed_check(self, routed: RoutedEffect) -> list[Placed]:
        return []


class _ReversedReadAsCounted(LedgerReads):
    """Says the entry a reversal reverses counted, whatever the ledger holds."""

    def before_writing(self, routed: RoutedEffect, objects: tuple[str, ...]) -> Known:
        known = super().before_writing(routed, objects)
        settled = known.settled
        if routed.reversed_key is None or (settled is not None and settled.counted):
            return known
        amount = routed.effect.amount
        counted = Entry(
            effect_key=routed.reversed_key,
            order_id=routed.order_id,
            outcome=Outcome.APPLIED.value,
            amount=amount.minor,
            currency=amount.currency,
        )
        return replace(known, settled=counted)


class ReversalWithoutCheck(BrokenDesign):
    """Takes a failed refund's amount back whether or not the refund ever counted."""

    items_kind = _NoReversedCheck
    reads_kind = _ReversedReadAsCounted


BROKEN_DESIGNS = (
    CheckThenInsert,
    EventIdKey,
    NoOrderingGuard,
    OutboxOutsideTransaction,
    StaleNotAnnounced,
    ReversalWithoutCheck,
    LastBindingWins,
)
