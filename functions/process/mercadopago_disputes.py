"""What the ledger holds of a Mercado Pago payment's disputes, for its map
(`functions/mercadopago/models.py`, "DisputeBooks"): which of the dispute's keys, the
one of today and the two used before, have an opening that counted, what it withdrew, and
whether its verdict counted too.

A verdict noted as a mediation's release (`RELEASED`) says a chargeback filed afterwards is a
claim of its own.

One consistent BatchGetItem of the openings and verdicts, after one of the payment's binding
when the payment names no order. The map decides from it only what cannot change after the
read: the old keys' openings are never written again, and an opening keeps its amount; whether
a dispute is still open is left to the transaction (the release counts only if it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from functions.mercadopago.models import PROVIDER, RELEASED, BookedDispute
from functions.shared import tables
from functions.shared.bindings import Key, bound_orders, ledger_items
from functions.shared.domain import COUNTED_OUTCOMES, Transition, key_of
from functions.shared.dynamo import raise_unclassified
from functions.shared.errors import WriteContendedError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class LedgerDisputes:
    """`DisputeBooks` read from the ledger table."""

    def __init__(self, dynamodb: DynamoDBClient, ledger: str) -> None:
        self._db = dynamodb
        self._ledger = ledger

    def __call__(
        self, order_id: str | None, payment_id: str, refs: tuple[str, ...]
    ) -> Mapping[str, BookedDispute]:
        order = order_id or self._bound_order(payment_id)
        if order is None:
            return {}  # a payment no order holds yet has booked nothing
        openings = {ref: self._entry(order, Transition.DISPUTED, ref) for ref in refs}
        verdicts = {ref: self._entry(order, Transition.DISPUTE_WON, ref) for ref in refs}
        try:
            found, unread = ledger_items(
                self._db, self._ledger, [*openings.values(), *verdicts.values()]
            )
        except ClientError as exc:
            raise_unclassified(exc, "BatchGetItem")
        if unread:
            # Deciding on what was not read could open a dispute a second time: retry.
            raise WriteContendedError("BatchGetItem left dispute keys unread")

        def counted(key: Key) -> bool:
            return found.get(key, {}).get("outcome") in COUNTED_OUTCOMES

        def released(key: Key) -> bool:
            return counted(key) and found[key].get("note") == RELEASED

        return {
            ref: BookedDispute(
                int(found[opening]["amount"]),
                settled=counted(verdicts[ref]),
                released=released(verdicts[ref]),
            )
            for ref, opening in openings.items()
            if counted(opening)
        }

    @staticmethod
    def _entry(order: str, transition: Transition, ref: str) -> Key:
        # Won and lost share the verdict's key (domain.KEY_SLOT): either one is the verdict.
        key = key_of(transition, order, PROVIDER, ref)
        return (tables.order_pk(order), tables.effect_sk(key))

    def _bound_order(self, payment_id: str) -> str | None:
        found, unread = bound_orders(self._db, self._ledger, PROVIDER, [payment_id])
        if unread:
            raise WriteContendedError("BatchGetItem left the payment's binding unread")
        return found.get(payment_id)
