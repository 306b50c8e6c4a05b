"""The items of the effect transaction and of the ledger's other writes, as DynamoDB takes
them: what each item holds and the condition it is written under (the key reserved once, the
order moved only by a later event and in its own currency, a binding held by its first order,
a reversal only of what counted, a capture mark moved only from what was read).

Plain renderers over what the processor decided (functions/process/service.py): no I/O here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from functions.shared import tables
from functions.shared.domain import (
    TRANSITION_RULES,
    VIA_DELIVERY,
    VIA_STATEMENT,
    Delivery,
    Outcome,
    RoutedEffect,
    ordering_token,
)
from functions.shared.dynamo import to_attributes
from functions.shared.outbox import OutboxStatus, outbox_id_for
from functions.store.transaction import Placed, Slot

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        PutTypeDef,
        TransactWriteItemTypeDef,
        UpdateItemInputTypeDef,
        UpdateTypeDef,
    )


class LedgerItems:
    """Renders the ledger's and the outbox's items for one stack's tables and clock."""

    def __init__(
        self, table_names: tables.TableNames, clock: Callable[[], float], retention_seconds: int
    ) -> None:
        self._tables = table_names
        self._clock = clock
        self._retention_seconds = retention_seconds

    def key_reservation(
        self,
        routed: RoutedEffect,
        outcome: Outcome,
        *,
        key: str | None = None,
        taught_recipient: bool = False,
    ) -> TransactWriteItemTypeDef:
        effect = routed.effect
        transition = effect.transition
        if key is not None and key != routed.key:
            reverses = TRANSITION_RULES[effect.transition].reverses
            transition = reverses if reverses is not None else transition
        item = {
            tables.PARTITION_KEY: tables.order_pk(routed.order_id),
            tables.SORT_KEY: tables.effect_sk(key or routed.key),
            "effect_key": key or routed.key,
            "order_id": routed.order_id,
            "outcome": outcome.value,
            "transition": transition.value,
            "external_ref": effect.external_ref,
            "payment": effect.payment,
            "amount": effect.amount.minor,
            "currency": effect.amount.currency,
            "ordering_token": ordering_token(effect),
            # Whether the counted event named the customer: a duplicate that does teaches the
            # order its address (no second request otherwise).
            "named_recipient": bool(effect.recipient),
            # Whether counting it taught its order whom to e-mail: its redelivery re-opens the
            # order's owed e-mails again, in case the re-open after its commit failed.
            "taught_recipient": taught_recipient,
            # What the adapter decided about the entry (a stamp taken from another field)
            "note": effect.note,
            **self.audit(effect.delivery),
        }
        return {
            "Put": {
                "TableName": self._tables.ledger,
                "Item": to_attributes(item),
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def order_update(self, routed: RoutedEffect) -> UpdateTypeDef:
        """Move the lifecycle only if this event is not older; post the entry to the totals.

        Within one second, events of *different* payments are not ordered against each other:
        a second payment stamped with the same second as the refund of the first is applied.
        """
        effect = routed.effect
        rule = TRANSITION_RULES[effect.transition]
        sets = {
            "lifecycle_status": ":status",
            "last_event_at": ":token",
            "last_event_second": ":second",
            "last_event_id": ":event_id",
            "last_transition": ":transition",
            "currency": "if_not_exists(#currency, :currency)",
            "order_id": ":order_id",
            "updated_at": ":now",
        }
        values: dict[str, object] = {
            ":status": rule.lifecycle_status,
            ":token": ordering_token(effect),
            ":second": effect.delivery.created,
            ":event_id": effect.delivery.event_id,
            ":transition": effect.transition.value,
            ":currency": effect.amount.currency,
            ":order_id": routed.order_id,
        }
        guard = "attribute_not_exists(#last_event_at) OR #last_event_at <= :token"
        if effect.payment:
            sets["last_payment"] = ":payment"
            values[":payment"] = effect.payment
            guard += " OR (#last_event_second = :second AND #last_payment <> :payment)"
        update = self.order_postings(routed, sets, values)
        update["ConditionExpression"] = (
            f"({guard}) AND (attribute_not_exists(#currency) OR #currency = :currency)"
        )
        update["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return update

    def order_postings(
        self, routed: RoutedEffect, sets: dict[str, str], values: dict[str, object]
    ) -> UpdateTypeDef:
        """The Update shared by applied and stale entries: totals, count, recipient, time."""
        effect = routed.effect
        now = self.now()
        # `changed_bucket` puts the order in the keys-only `changed` index the incremental
        # reconciliation reads: orders by the hour they last changed.
        sets = {**sets, "updated_at": ":now", tables.CHANGES_BUCKET: ":changed"}
        values = {
            **values,
            ":now": now,
            ":changed": tables.changes_bucket(routed.order_id, now),
            ":one": 1,
        }
        if effect.recipient:
            # Learned at payment time, kept for the refund and dispute notifications.
            sets["recipient"] = "if_not_exists(#recipient, :recipient)"
            values[":recipient"] = effect.recipient
        adds = {"effect_count": ":one"}
        for n, (total, sign) in enumerate(TRANSITION_RULES[effect.transition].postings):
            adds[total.value] = f":amount{n}"
            values[f":amount{n}"] = sign * effect.amount.minor
        expression = "SET " + ", ".join(f"#{k} = {v}" for k, v in sets.items())
        expression += " ADD " + ", ".join(f"#{k} {v}" for k, v in adds.items())
        names = [*sets, *adds, "last_event_at", "last_event_second", "last_payment", "pk"]
        used = {name for name in names if f"#{name}" in expression}
        return {
            "TableName": self._tables.ledger,
            "Key": self.order_key(routed.order_id),
            "UpdateExpression": expression,
            "ExpressionAttributeNames": {f"#{name}": name for name in used},
            "ExpressionAttributeValues": to_attributes(values),
        }

    def outbox_put(
        self, routed: RoutedEffect, *, late: bool, superseded: bool = False
    ) -> TransactWriteItemTypeDef:
        effect = routed.effect
        item = {
            tables.OUTBOX_KEY: outbox_id_for(routed.key),
            "effect_key": routed.key,
            "order_id": routed.order_id,
            "transition": effect.transition.value,
            "amount": effect.amount.minor,
            "currency": effect.amount.currency,
            "recipient": effect.recipient,
            "provider": effect.delivery.provider,
            "external_ref": effect.external_ref,
            "payment": effect.payment,
            "event_id": effect.delivery.event_id,
            "provider_time": effect.delivery.created,
            "late": late,
            "superseded": superseded,
            # Booked from the provider's statement: no delivery ever brought it.
            "found_by_statement": effect.delivery.via == VIA_STATEMENT,
            "status": OutboxStatus.PENDING.value,
            "attempts": 0,
            # In no index: the stream's first try sends it; only an item it could not send
            # enters the due index (an index write saved for every item sent at once).
            "created_at": self.now(),
        }
        return {
            "Put": {
                "TableName": self._tables.outbox,
                "Item": to_attributes(item),
                "ConditionExpression": "attribute_not_exists(#id)",
                "ExpressionAttributeNames": {"#id": tables.OUTBOX_KEY},
            }
        }

    def reversed_check(self, routed: RoutedEffect) -> list[Placed]:
        """A reversal counts only if the entry it reverses counted (a refund that never
        succeeded never counts, so neither does its failure)."""
        reversed_key = routed.reversed_key
        if reversed_key is None:
            return []
        check: TransactWriteItemTypeDef = {
            "ConditionCheck": {
                "TableName": self._tables.ledger,
                "Key": to_attributes(
                    {
                        tables.PARTITION_KEY: tables.order_pk(routed.order_id),
                        tables.SORT_KEY: tables.effect_sk(reversed_key),
                    }
                ),
                "ConditionExpression": "attribute_exists(#pk) AND #outcome IN (:a, :s)",
                "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY, "#outcome": "outcome"},
                "ExpressionAttributeValues": to_attributes(
                    {":a": Outcome.APPLIED.value, ":s": Outcome.STALE.value}
                ),
            }
        }
        return [Placed(Slot.REVERSED, check)]

    def binding(
        self, provider: str, order_id: str, ref: str, attached_at: int | None = None
    ) -> TransactWriteItemTypeDef:
        """`ref` bound to `order_id`, only if no other order holds it (first writer wins);
        `attached_at` when a person attached it (`umavez attach`)."""
        attached = {} if attached_at is None else {"attached_at": attached_at}
        return {
            "Put": {
                "TableName": self._tables.ledger,
                "Item": to_attributes(
                    {
                        tables.PARTITION_KEY: tables.ref_pk(provider, ref),
                        tables.SORT_KEY: tables.REF_SORT,
                        "ref": ref,
                        "order_id": order_id,
                        **attached,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(#pk) OR #order = :order",
                "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY, "#order": "order_id"},
                "ExpressionAttributeValues": to_attributes({":order": order_id}),
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }

    def capture_mark(self, routed: RoutedEffect) -> list[Placed]:
        """A top-up moves its payment's capture mark from what it read to the new total."""
        effect = routed.effect
        if routed.captured_before is None or effect.payment is None:
            return []
        item = {
            tables.PARTITION_KEY: tables.order_pk(routed.order_id),
            tables.SORT_KEY: tables.capture_sk(effect.delivery.provider, effect.payment),
            "payment": effect.payment,
            "captured": routed.captured_before + effect.amount.minor,
            "currency": effect.amount.currency,
            "effect_key": routed.key,
        }
        put: TransactWriteItemTypeDef = {
            "Put": {
                "TableName": self._tables.ledger,
                "Item": to_attributes(item),
                "ConditionExpression": "attribute_not_exists(#pk) OR #captured = :seen",
                "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY, "#captured": "captured"},
                "ExpressionAttributeValues": to_attributes({":seen": routed.captured_before}),
            }
        }
        return [Placed(Slot.CAPTURED, put)]

    def entry_audit(
        self, routed: RoutedEffect, outcome: Outcome, reason: str
    ) -> TransactWriteItemTypeDef:
        """The delivery's audit record, naming the entry it concerns."""
        return self.delivery_put(
            routed.effect.delivery, outcome, reason, order_id=routed.order_id, effect_key=routed.key
        )

    def delivery_put(
        self,
        delivery: Delivery,
        outcome: Outcome,
        reason: str,
        order_id: str | None = None,
        effect_key: str | None = None,
    ) -> TransactWriteItemTypeDef:
        item = {
            tables.PARTITION_KEY: tables.delivery_pk(delivery.provider, delivery.event_id),
            tables.SORT_KEY: tables.DELIVERY_SORT,
            "outcome": outcome.value,
            "reason": reason,
            "order_id": order_id,
            "effect_key": effect_key,
            **self.audit(delivery),
            # An audit of a delivery that changed nothing is kept for the retention, then
            # expires (TTL); effect keys and orders never do: they make a resend a duplicate.
            tables.EXPIRES_AT: int(self._clock()) + self._retention_seconds,
        }
        return {"Put": {"TableName": self._tables.ledger, "Item": to_attributes(item)}}

    def order_key(self, order_id: str) -> dict[str, AttributeValueTypeDef]:
        return to_attributes(
            {tables.PARTITION_KEY: tables.order_pk(order_id), tables.SORT_KEY: tables.ORDER_SORT}
        )

    def audit(self, delivery: Delivery) -> dict[str, object]:
        return {
            "provider": delivery.provider,
            "event_id": delivery.event_id,
            "event_type": delivery.event_type,
            "event_created": delivery.created,
            "recorded_at": self.now(),
            **({"via": delivery.via} if delivery.via != VIA_DELIVERY else {}),
        }

    def now(self) -> str:
        return datetime.fromtimestamp(self._clock(), tz=UTC).isoformat(timespec="milliseconds")

    def stale_update(self, routed: RoutedEffect) -> UpdateTypeDef:
        """A stale entry's posting: the totals only, on an order that exists, in its currency;
        no status, no ordering token."""
        update = self.order_postings(routed, {}, {":currency": routed.effect.amount.currency})
        update["ConditionExpression"] = "attribute_exists(#pk) AND #currency = :currency"
        update["ExpressionAttributeNames"] = {
            **update["ExpressionAttributeNames"],
            "#pk": tables.PARTITION_KEY,
            "#currency": "currency",
        }
        return update

    def recipient_learned(self, routed: RoutedEffect, recipient: str) -> UpdateItemInputTypeDef:
        """The order's customer, set only on an order that knows none yet."""
        return {
            "TableName": self._tables.ledger,
            "Key": self.order_key(routed.order_id),
            "UpdateExpression": "SET #recipient = if_not_exists(#recipient, :recipient)",
            "ConditionExpression": "attribute_exists(#pk) AND attribute_not_exists(#recipient)",
            "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY, "#recipient": "recipient"},
            "ExpressionAttributeValues": to_attributes({":recipient": recipient}),
        }

    @staticmethod
    def first_record(put: PutTypeDef, *, found_if_refused: bool = False) -> PutTypeDef:
        """`put` written only where its key holds nothing yet: a delivery's record is written
        once, and the same delivery again finds it (returned on refusal when asked)."""
        first: PutTypeDef = {
            **put,
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY},
        }
        if found_if_refused:
            first["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
        return first
