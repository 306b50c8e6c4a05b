"""What the processor reads before it writes: the prefetch of one entry (its key, its order,
the bindings of the objects it names, the entry it settles) and a payment's capture mark; and
an order's entries, read consistently."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from functions.shared import tables
from functions.shared.domain import RoutedEffect, ordering_token
from functions.shared.dynamo import from_attributes, raise_unclassified, to_attributes
from functions.shared.errors import WriteContendedError
from functions.shared.items import Binding, CaptureMark, Entry, Order
from functions.store import queries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass(frozen=True)
class Known:
    """What the read before the transaction found: the effect key's item, the order, and the
    order each named provider object is bound to."""

    key_item: Entry | None
    order: Order | None
    bound: dict[str, str]
    # The entry a settling one settles (a verdict's opening, a refund's success), if written.
    settled: Entry | None = None

    def later_second_than(self, routed: RoutedEffect) -> bool:
        """The order's last event is from a later second: this entry is stale for good."""
        second = self.order.last_event_second if self.order is not None else None
        return second is not None and second > routed.effect.delivery.created


class LedgerReads:
    """The reads of one stack's ledger table."""

    def __init__(self, dynamodb: DynamoDBClient, ledger: str) -> None:
        self._db = dynamodb
        self._ledger = ledger

    def before_writing(self, routed: RoutedEffect, objects: tuple[str, ...]) -> Known:
        """One eventually consistent BatchGetItem: the effect key, the order, the objects to
        bind (what it saw can only stay true, so a lagging read sees less, never something
        false; the transaction decides the rest). A settling entry also reads the entry it
        settles, consistently: what it posts is what that one counted."""
        ledger = self._ledger
        settles = routed.reversed_key
        sorts = [tables.effect_sk(routed.key), tables.ORDER_SORT]
        if settles is not None:
            sorts.append(tables.effect_sk(settles))
        keys = [
            {tables.PARTITION_KEY: tables.order_pk(routed.order_id), tables.SORT_KEY: sk}
            for sk in sorts
        ] + [
            {
                tables.PARTITION_KEY: tables.ref_pk(routed.effect.delivery.provider, ref),
                tables.SORT_KEY: tables.REF_SORT,
            }
            for ref in objects
        ]
        try:
            response = self._db.batch_get_item(
                RequestItems={
                    ledger: {
                        "Keys": [to_attributes(k) for k in keys],
                        "ConsistentRead": settles is not None,
                    }
                }
            )
        except ClientError as exc:
            raise_unclassified(exc, "BatchGetItem")
        if settles is not None and response.get("UnprocessedKeys"):
            # What the entry it settles counted must be known: never guess it.
            raise WriteContendedError("BatchGetItem left the settled entry unread")
        # Keys left unread (throttling) are simply not seen: the transaction decides for them.
        found = [from_attributes(item) for item in response["Responses"].get(ledger, [])]
        by_sort = {str(item[tables.SORT_KEY]): item for item in found}
        key_item = by_sort.get(tables.effect_sk(routed.key))
        order = by_sort.get(tables.ORDER_SORT)
        settled = by_sort.get(tables.effect_sk(settles)) if settles is not None else None
        bindings = [Binding.of(i) for i in found if i[tables.SORT_KEY] == tables.REF_SORT]
        return Known(
            key_item=Entry.of(key_item) if key_item else None,
            order=Order.of(order) if order else None,
            bound={binding.ref: binding.order_id for binding in bindings},
            settled=Entry.of(settled) if settled else None,
        )

    def capture_mark(self, routed: RoutedEffect) -> int:
        """What the payment's capture mark says its entries counted, read consistently (0:
        no mark, the payment was captured once)."""
        effect = routed.effect
        try:
            response = self._db.get_item(
                TableName=self._ledger,
                Key=to_attributes(
                    {
                        tables.PARTITION_KEY: tables.order_pk(routed.order_id),
                        tables.SORT_KEY: tables.capture_sk(
                            effect.delivery.provider, str(effect.payment)
                        ),
                    }
                ),
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise_unclassified(exc, "GetItem")
        item = response.get("Item")
        return CaptureMark.of(from_attributes(item)).captured if item else 0

    def superseded(self, routed: RoutedEffect) -> bool:
        """Whether a movement of the same payment newer than this stale one counted already:
        what the customer was told of that payment is newer than this. One Query of the
        order's entries, on this rare path only. (A newer one of the payment counted in the
        instant between this read and the transaction is not seen: its own e-mail then
        follows this one, in the provider's order.)"""
        effect = routed.effect
        if effect.payment is None:
            return True
        pages = self._db.get_paginator("query").paginate(
            **queries.newer_counted_entries(
                self._ledger, routed.order_id, effect.payment, ordering_token(effect)
            ),
            ConsistentRead=True,
        )
        try:
            return any(page["Items"] for page in pages)
        except ClientError as exc:
            raise_unclassified(exc, "Query")


def order_entries(db: DynamoDBClient, ledger: str, order_id: str) -> list[dict[str, Any]]:
    """The order's entries, in one consistent Query."""
    pages = db.get_paginator("query").paginate(
        **queries.entries(ledger, order_id), ConsistentRead=True
    )
    return [from_attributes(item) for page in pages for item in page["Items"]]
