"""Mercado Pago: the notification is thin and carries no status, so the payment is fetched.

One payment can hold several entries, each named by its own object:
- the payment itself (`order.paid`, external ref = payment id) once `date_approved` is set
  and its status says the money came in;
- each *approved* entry of `refunds` (`order.refunded`, external ref = the refund id): two
  partial refunds are two entries; a rejected or in-process refund moved no money;
- a mediation (`order.disputed`, `{id}:mediation`: the funds held) and a chargeback
  (`{id}:chargeback`), open while `status_detail` is `in_process`, lost when `settled` (the
  money is gone), won when `reimbursed` (Mercado Pago covered it);
- a payment back to `approved`/`refunded` after a mediation releases the hold
  (`order.dispute_won`, counted only if a dispute is open: the payment read is its current state).
A notification re-read later yields the same entries with the same keys, so reprocessing any
notification of a payment is safe. Amounts are decimals in major units of `currency_id`
(CLP 5000 is 5,000 pesos); the order is `external_reference` (or `metadata.order_id`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.domain import Delivery, Effect, Interpretation, Money, NoEffect, Transition
from functions.shared.errors import MalformedEventError
from functions.shared.money import to_minor

PROVIDER: Final = "mercadopago"
MONEY_RECEIVED: Final = frozenset({"approved", "refunded", "charged_back", "in_mediation"})
DISPUTED: Final = frozenset({"charged_back", "in_mediation"})
HOLD_RELEASED: Final = frozenset({"approved", "refunded"})
REFUND_MOVED_MONEY: Final = "approved"
CHARGEBACK_VERDICTS: Final[Mapping[str, Transition]] = {
    "settled": Transition.DISPUTE_LOST,
    "reimbursed": Transition.DISPUTE_WON,
}

PaymentSource = Callable[[str], Mapping[str, Any]]


class _MercadoPagoModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class NotificationData(_MercadoPagoModel):
    id: str | int


class Notification(_MercadoPagoModel):
    # Docs and captured payloads disagree on the types of id/user_id: accept both.
    id: str | int
    type: str | None = None
    action: str | None = None
    date_created: str | None = None
    data: NotificationData


class Refund(_MercadoPagoModel):
    id: str | int
    amount: float | int | str
    date_created: str
    status: str | None = None


class Payer(_MercadoPagoModel):
    email: str | None = None


class Payment(_MercadoPagoModel):
    id: str | int
    status: str
    status_detail: str | None = None
    currency_id: str = Field(min_length=3, max_length=3)
    transaction_amount: float | int | str
    date_approved: str | None = None
    date_last_updated: str
    external_reference: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    refunds: list[Refund] = Field(default_factory=list)
    payer: Payer | None = None


def _epoch(stamp: str) -> int:
    try:
        return int(datetime.fromisoformat(stamp).timestamp())
    except ValueError as exc:
        raise MalformedEventError(f"date {stamp!r} is not ISO 8601") from exc


class Interpreter:
    def __init__(self, payments: PaymentSource) -> None:
        self._payments = payments

    def __call__(self, raw_body: str) -> tuple[Interpretation, ...]:
        try:
            notification = Notification.model_validate_json(raw_body)
        except ValidationError as exc:
            raise MalformedEventError(f"not a Mercado Pago notification: {exc}") from exc
        event_type = notification.action or notification.type or "unknown"
        received = Delivery(
            PROVIDER,
            str(notification.id),
            event_type,
            _epoch(notification.date_created) if notification.date_created else 0,
        )
        topic = notification.type or event_type.split(".")[0]
        if topic != "payment":
            return (NoEffect(received, f"topic {topic!r} moves no money"),)
        try:
            payment = Payment.model_validate(self._payments(str(notification.data.id)))
        except ValidationError as exc:
            raise MalformedEventError(f"payment {notification.data.id}: {exc}") from exc
        effects = self._effects(payment, received)
        return tuple(effects) or (NoEffect(received, f"payment is {payment.status!r}"),)

    @staticmethod
    def _effects(payment: Payment, received: Delivery) -> list[Interpretation]:
        order_id = payment.external_reference or payment.metadata.get("order_id") or None
        currency = payment.currency_id.lower()
        email = payment.payer.email if payment.payer else None

        def effect(
            transition: Transition, ref: str, amount: object, at: str, *, only_if_open: bool = False
        ) -> Effect:
            return Effect(
                delivery=Delivery(PROVIDER, received.event_id, received.event_type, _epoch(at)),
                transition=transition,
                external_ref=ref,
                amount=Money(to_minor(amount, currency), currency),
                order_id=str(order_id) if order_id else None,
                order_lookup=(str(payment.id),),
                recipient=email,
                payment=str(payment.id),
                only_if_open=only_if_open,
            )

        effects: list[Interpretation] = []
        if payment.status in MONEY_RECEIVED and payment.date_approved:
            effects.append(
                effect(
                    Transition.PAID,
                    str(payment.id),
                    payment.transaction_amount,
                    payment.date_approved,
                )
            )
        effects += [
            effect(Transition.REFUNDED, f"refund:{r.id}", r.amount, r.date_created)
            for r in payment.refunds
            if r.status == REFUND_MOVED_MONEY
        ]
        # A mediation (a claim: funds held) and a chargeback are two disputes of one payment.
        mediation, chargeback = f"{payment.id}:mediation", f"{payment.id}:chargeback"
        amount, at = payment.transaction_amount, payment.date_last_updated
        if payment.status == "in_mediation":
            effects.append(effect(Transition.DISPUTED, mediation, amount, at))
        elif payment.status == "charged_back":
            effects.append(effect(Transition.DISPUTED, chargeback, amount, at))
            verdict = CHARGEBACK_VERDICTS.get(payment.status_detail or "")
            if verdict is not None:
                effects.append(effect(verdict, chargeback, amount, at))
        elif payment.status in HOLD_RELEASED:
            effects.append(effect(Transition.DISPUTE_WON, mediation, amount, at, only_if_open=True))
        return effects
