"""Deliberately broken processors: each simplifies one guarantee away.

The guarantee tests are run against these to prove that each would be caught
(tests/functional/test_broken_designs_are_caught.py).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from functions.process.service import EffectProcessor, Known, Processed
from functions.shared import tables
from functions.shared.domain import Effect, Outcome, RoutedEffect
from functions.shared.dynamo import to_attributes
from functions.store.transaction import Placed, Slot, Transaction

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef, UpdateTypeDef


class CheckThenInsert(EffectProcessor):
    """Reads the key, then writes without conditions: two readers both see 'absent'."""

    def _apply(self, routed: RoutedEffect) -> Processed:
        existing = self._db.get_item(
            TableName=self._tables.ledger,
            Key={
                tables.PARTITION_KEY: {"S": tables.order_pk(routed.order_id)},
                tables.SORT_KEY: {"S": tables.effect_sk(routed.key)},
            },
            ConsistentRead=True,
        )
        if "Item" in existing:
            return self._processed(routed, Outcome.DUPLICATE)
        transaction = self._applied(routed, self._bound_objects(routed))
        for slot in (Slot.KEY, Slot.OUTBOX):
            put = transaction.item(slot)["Put"]
            del put["ConditionExpression"], put["ExpressionAttributeNames"]
        self._db.transact_write_items(TransactItems=transaction.items)
        return self._processed(routed, Outcome.APPLIED)


class EventIdKey(EffectProcessor):
    """Keys by the provider's event id: catches literal redelivery only."""

    def _routed(self, effect: Effect, order_id: str) -> RoutedEffect:
        key = hashlib.sha256(effect.delivery.event_id.encode()).hexdigest()
        return RoutedEffect(effect, order_id, key)


class NoOrderingGuard(EffectProcessor):
    """Updates the order whatever its last_event_at: an old event sends it back whenever the
    read before writing did not already see the newer one."""

    def _order_update(self, routed: RoutedEffect) -> UpdateTypeDef:
        update = super()._order_update(routed)
        update["ConditionExpression"] = "attribute_not_exists(#currency) OR #currency = :currency"
        return update


class OutboxOutsideTransaction(EffectProcessor):
    """Commits the effect, then writes the outbox item in a second request."""

    def _applied(self, routed: RoutedEffect, to_bind: tuple[str, ...]) -> Transaction:
        return super()._applied(routed, to_bind).without(Slot.OUTBOX)

    def _apply(self, routed: RoutedEffect) -> Processed:
        processed = super()._apply(routed)
        if processed.outcome is Outcome.APPLIED:
            self._db.put_item(**self._outbox_put(routed, late=False)["Put"])
        return processed


class StaleNotAnnounced(EffectProcessor):
    """Counts a late movement but tells nobody: downstream books miss money that moved."""

    def _outbox_put(
        self, routed: RoutedEffect, *, late: bool, superseded: bool = False
    ) -> TransactWriteItemTypeDef:
        if not late:
            return super()._outbox_put(routed, late=late)
        # Something harmless in the outbox item's slot.
        item = {tables.PARTITION_KEY: f"UNANNOUNCED#{routed.key}", tables.SORT_KEY: "-"}
        return {"Put": {"TableName": self._tables.ledger, "Item": to_attributes(item)}}


class LastBindingWins(EffectProcessor):
    """Binds a payment to whichever order the latest event names: one payment, two credits."""

    def _binding(self, provider: str, order_id: str, ref: str) -> TransactWriteItemTypeDef:
        put = super()._binding(provider, order_id, ref)
        for field in (
            "ConditionExpression",
            "ExpressionAttributeNames",
            "ExpressionAttributeValues",
            "ReturnValuesOnConditionCheckFailure",
        ):
            put["Put"].pop(field)  # type: ignore[misc]
        return put


class ReversalWithoutCheck(EffectProcessor):
    """Takes a failed refund's amount back whether or not the refund ever counted."""

    def _reversed_check(self, routed: RoutedEffect) -> list[Placed]:
        return []

    def _reverses_what_never_counted(self, routed: RoutedEffect, known: Known) -> bool:
        return False


BROKEN_DESIGNS = (
    CheckThenInsert,
    EventIdKey,
    NoOrderingGuard,
    OutboxOutsideTransaction,
    StaleNotAnnounced,
    ReversalWithoutCheck,
    LastBindingWins,
)
