"""Mercado Pago's Orders API (topic `order`): what an order's transactions moved.

Checkout API, Point and QR Code integrate through orders today; the `payment` topic is the
legacy Checkout API's (https://www.mercadopago.com.br/developers/en/docs/your-integrations/notifications.md).
The notification names the order (`data.id`, `ORD…`) and, like a payment's, is not trusted for
what it says: the order is read from `GET /v1/orders/{id}` with the access token, and each of its
transactions becomes an entry:

- a payment transaction whose status says the money came in (`processed`; `refunded` and
  `charged_back` once it had) is `order.paid`; a failed or expired one moved nothing, so a
  payment failed then retried in the same order is paid once, by the retry;
- each `processed` refund is `order.refunded`, for its own amount;
- a chargeback filed against a payment withdraws what the payment still holds
  (`order.disputed`). The Orders API says a chargeback is `opened` or `closed`, not who won,
  so no verdict is booked from it: the chargeback's outcome is read in Mercado Pago's panel.

Keys: a transaction that names its Payments API object (`reference.id`, the numeric id the
`payment` topic announces) is keyed by it, so the same money announced through `payment` and
through `order` is one effect; otherwise by the transaction's own id. A refund is
`refund:{id}` like a payment's. The order of umavez is the order's `external_reference`.

Transactions carry no dates: a payment is stamped at the order's `created_date` (it cannot be
earlier), refunds and chargebacks at its `last_updated_date`; a re-read yields the same entries
with the same keys (https://www.mercadopago.com.br/developers/en/docs/checkout-api-orders/payment-management/status/order-status.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.domain import (
    Delivery,
    Effect,
    Interpretation,
    NoEffect,
    Transition,
    checked_order_id,
    movement,
)
from functions.shared.money import InvalidFieldError, to_minor
from functions.shared.provider_fields import Currency, DecimalAmount, refused

TOPIC: Final = "order"
PAYMENT_MOVED_MONEY: Final = frozenset({"processed", "refunded", "charged_back"})
REFUND_MOVED_MONEY: Final = "processed"

OrderSource = Callable[[str], Mapping[str, Any]]


class _OrdersModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Reference(_OrdersModel):
    id: str | int | None = None


class PaymentTransaction(_OrdersModel):
    id: str
    status: str
    status_detail: str | None = None
    amount: DecimalAmount
    paid_amount: DecimalAmount | None = None
    reference: Reference | None = None


class RefundTransaction(_OrdersModel):
    id: str
    transaction_id: str
    amount: DecimalAmount
    status: str | None = None
    reference: Reference | None = None


class ChargebackTransaction(_OrdersModel):
    id: str
    transaction_id: str
    status: str | None = None


class Transactions(_OrdersModel):
    payments: list[PaymentTransaction] = Field(default_factory=list)
    refunds: list[RefundTransaction] = Field(default_factory=list)
    chargebacks: list[ChargebackTransaction] = Field(default_factory=list)


class Payer(_OrdersModel):
    email: str | None = None


class Order(_OrdersModel):
    id: str
    status: str
    status_detail: str | None = None
    currency: Currency
    external_reference: str | None = None
    created_date: str
    last_updated_date: str
    transactions: Transactions = Field(default_factory=Transactions)
    payer: Payer | None = None


def keyed(transaction_id: str, reference: Reference | None) -> str:
    """The Payments API id a transaction names, else its own: the key of its money."""
    named = None if reference is None or reference.id in (None, "") else str(reference.id)
    return named or transaction_id


def order_effects(
    document: Mapping[str, Any], received: Delivery, epoch: Callable[[object, str], int]
) -> list[Interpretation]:
    """The entries an order read from the Orders API holds (see the module's doc)."""
    try:
        order = Order.model_validate(document)
    except ValidationError as exc:
        raise refused(exc, "order") from exc
    order_id = checked_order_id(order.external_reference, "order.external_reference")
    currency = order.currency
    email = order.payer.email if order.payer else None
    created = epoch(order.created_date, "order.created_date")
    updated = epoch(order.last_updated_date, "order.last_updated_date")
    payments = {payment.id: payment for payment in order.transactions.payments}

    def effect(transition: Transition, ref: str, minor: int, at: int, paid: str) -> Effect:
        return Effect(
            delivery=Delivery(received.provider, received.event_id, received.event_type, at),
            transition=transition,
            external_ref=ref,
            amount=movement(minor, currency, "order.transactions", _WHAT[transition]),
            order_id=order_id,
            order_lookup=(paid,),
            recipient=email,
            payment=paid,
        )

    effects: list[Interpretation] = []
    held: dict[str, int] = {}
    for n, payment in enumerate(order.transactions.payments):
        field = f"order.transactions.payments.{n}"
        amount = payment.paid_amount if payment.paid_amount is not None else payment.amount
        minor = to_minor(amount, currency, f"{field}.paid_amount")
        if payment.status not in PAYMENT_MOVED_MONEY or not minor:
            continue
        paid = keyed(payment.id, payment.reference)
        held[payment.id] = minor
        effects.append(effect(Transition.PAID, paid, minor, created, paid))
    for n, refund in enumerate(order.transactions.refunds):
        field = f"order.transactions.refunds.{n}"
        minor = to_minor(refund.amount, currency, f"{field}.amount")
        if refund.status != REFUND_MOVED_MONEY:
            continue
        refunded = payments.get(refund.transaction_id)
        if refunded is None:
            raise InvalidFieldError(
                f"{field}.transaction_id", f"{refund.transaction_id!r} is no payment of the order"
            )
        held[refund.transaction_id] = max(held.get(refund.transaction_id, 0) - minor, 0)
        paid = keyed(refunded.id, refunded.reference)
        ref = f"refund:{keyed(refund.id, refund.reference)}"
        effects.append(effect(Transition.REFUNDED, ref, minor, updated, paid))
    for chargeback in order.transactions.chargebacks:
        disputed = payments.get(chargeback.transaction_id)
        left = held.get(chargeback.transaction_id, 0)
        if disputed is None or not left:
            effects.append(
                NoEffect(received, f"chargeback {chargeback.id} holds nothing of the order")
            )
            continue
        paid = keyed(disputed.id, disputed.reference)
        effects.append(effect(Transition.DISPUTED, f"{paid}:dispute", left, updated, paid))
    return effects


_WHAT: Final[Mapping[Transition, str]] = {
    Transition.PAID: "payment",
    Transition.REFUNDED: "refund",
    Transition.DISPUTED: "dispute",
}
