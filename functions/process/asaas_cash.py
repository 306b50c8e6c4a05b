"""What the ledger holds of an Asaas payment's cash receipts, for its map
(`functions/asaas/models.py`, "CashBooks"): each receipt and each undo's reversal,
whether it counted, and when its delivery was stamped.

One consistent Query of the order's entries of the payment whose ref is a cash ref, after one
read of the payment's binding when the payment names no order. The map takes from it which
receipt an undo reverses and which undo a receipt follows; the transaction still decides
whether each entry counts (a reversal only if what it reverses counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from functions.asaas.models import PROVIDER, CashItem, cash_ref, is_cash_ref
from functions.shared.bindings import bound_orders
from functions.shared.domain import COUNTED_OUTCOMES, Transition
from functions.shared.dynamo import from_attributes, raise_unclassified
from functions.shared.errors import WriteContendedError
from functions.store import queries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CASH_TRANSITIONS = frozenset({Transition.PAID.value, Transition.PAYMENT_REVERSED.value})


class LedgerCash:
    """`CashBooks` read from the ledger table."""

    def __init__(self, dynamodb: DynamoDBClient, ledger: str) -> None:
        self._db = dynamodb
        self._ledger = ledger

    def __call__(self, order_id: str | None, payment_id: str) -> Sequence[CashItem]:
        order = order_id or self._bound_order(payment_id)
        if order is None:
            return ()  # a payment no order holds yet has booked nothing
        items: list[CashItem] = []
        query = {
            **queries.entries_with_ref_prefix(
                self._ledger, order, payment_id, cash_ref(payment_id, None)
            ),
            # An undo must see the receipt written just before it, or it reverses the wrong one.
            "ConsistentRead": True,
        }
        try:
            for page in self._db.get_paginator("query").paginate(**query):
                for raw in page.get("Items", []):
                    item = from_attributes(raw)
                    ref = str(item.get("external_ref", ""))
                    transition = str(item.get("transition", ""))
                    if transition in CASH_TRANSITIONS and is_cash_ref(payment_id, ref):
                        items.append(
                            CashItem(
                                Transition(transition),
                                ref,
                                counted=item.get("outcome") in COUNTED_OUTCOMES,
                                at=int(str(item.get("event_created", 0))),
                            )
                        )
        except ClientError as exc:
            raise_unclassified(exc, "Query")
        return tuple(items)

    def _bound_order(self, payment_id: str) -> str | None:
        found, unread = bound_orders(self._db, self._ledger, PROVIDER, [payment_id])
        if unread:
            raise WriteContendedError("BatchGetItem left the payment's binding unread")
        return found.get(payment_id)
