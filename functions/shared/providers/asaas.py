"""Asaas: the webhook carries the whole payment; the payment id names its entries.

Map (one place; anything else is ignored):
- PAYMENT_CONFIRMED (card approved) and PAYMENT_RECEIVED (money in) are one payment: one
  entry keyed by the payment id, whichever arrives first. A receipt marked in cash
  (status RECEIVED_IN_CASH) is its own entry (`{id}:cash`), which PAYMENT_RECEIVED_IN_CASH_UNDONE
  reverses: the payment can still be paid for real afterwards.
- PAYMENT_REFUNDED and PAYMENT_PARTIALLY_REFUNDED carry `payment.refunds[]`, every refund so
  far. Refunds have no id, so each DONE refund is keyed by what identifies it within the
  payment: its `dateCreated` and `value` (and its rank among identical ones): the same list
  delivered again, or grown by one, adds only the new refunds. A refund event that lists none
  is malformed (DLQ): guessing its amount could count a refund twice.
- PAYMENT_CHARGEBACK_REQUESTED and PAYMENT_CHARGEBACK_DISPUTE (the merchant contests) are one
  open dispute (`{id}:chargeback`, funds withdrawn); PAYMENT_AWAITING_CHARGEBACK_REVERSAL means
  the merchant won (the funds come back); a chargeback whose `chargeback.status` says
  REVERSED is won, DISPUTE_LOST or DONE is lost.
`dateCreated` has no zone: it is Brazil's official time, UTC-3 (no daylight time since 2019).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.domain import Delivery, Effect, Interpretation, Money, NoEffect, Transition
from functions.shared.errors import MalformedEventError
from functions.shared.money import to_minor

PROVIDER: Final = "asaas"
CURRENCY: Final = "brl"
BRAZIL: Final = timezone(timedelta(hours=-3))
IN_CASH: Final = "RECEIVED_IN_CASH"
REFUND_DONE: Final = "DONE"
CHARGEBACK_WON: Final = frozenset({"REVERSED"})
CHARGEBACK_LOST: Final = frozenset({"DISPUTE_LOST", "DONE"})


class _AsaasModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AsaasRefund(_AsaasModel):
    dateCreated: str
    status: str | None = None
    value: float | int | str


class AsaasChargeback(_AsaasModel):
    status: str | None = None


class AsaasPayment(_AsaasModel):
    id: str = Field(pattern=r"^pay_\w+$")
    value: float | int | str
    status: str | None = None
    externalReference: str | None = None
    refunds: list[AsaasRefund] | None = None
    chargeback: AsaasChargeback | None = None


class AsaasEvent(_AsaasModel):
    id: str = Field(min_length=1)
    event: str = Field(min_length=1)
    dateCreated: str
    payment: AsaasPayment | None = None


Reader = Callable[[AsaasPayment, Delivery], tuple[Interpretation, ...]]


def _brazil_epoch(stamp: str) -> int:
    moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=BRAZIL)
    return int(moment.timestamp())


def _entry(
    payment: AsaasPayment,
    delivery: Delivery,
    transition: Transition,
    ref: str,
    value: object | None = None,
) -> Effect:
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=ref,
        amount=Money(to_minor(payment.value if value is None else value, CURRENCY), CURRENCY),
        order_id=payment.externalReference or None,
        # Without externalReference it waits for an operator to attach the payment.
        order_lookup=(payment.id,),
        payment=payment.id,
    )


def _received(payment: AsaasPayment, delivery: Delivery) -> tuple[Interpretation, ...]:
    ref = f"{payment.id}:cash" if payment.status == IN_CASH else payment.id
    return (_entry(payment, delivery, Transition.PAID, ref),)


def _cash_undone(payment: AsaasPayment, delivery: Delivery) -> tuple[Interpretation, ...]:
    return (_entry(payment, delivery, Transition.PAYMENT_REVERSED, f"{payment.id}:cash"),)


def _refunds(payment: AsaasPayment, delivery: Delivery) -> tuple[Interpretation, ...]:
    if not payment.refunds:
        # Never guess an amount: a full refund after partial ones would count twice.
        raise MalformedEventError(
            f"{delivery.event_type} {delivery.event_id} lists no refund in payment.refunds"
        )
    seen: Counter[tuple[str, str]] = Counter()
    entries: list[Interpretation] = []
    for refund in payment.refunds:
        identity = (refund.dateCreated, str(to_minor(refund.value, CURRENCY)))
        seen[identity] += 1
        if refund.status != REFUND_DONE:
            continue
        ref = f"{payment.id}:refund:{identity[0]}:{identity[1]}#{seen[identity]}"
        at = _brazil_epoch(refund.dateCreated)
        entries.append(
            _entry(
                payment,
                Delivery(delivery.provider, delivery.event_id, delivery.event_type, at),
                Transition.REFUNDED,
                ref,
                refund.value,
            )
        )
    return tuple(entries) or (NoEffect(delivery, "no refund of the payment is DONE yet"),)


def _chargeback(payment: AsaasPayment, delivery: Delivery) -> tuple[Interpretation, ...]:
    ref = f"{payment.id}:chargeback"
    opened = _entry(payment, delivery, Transition.DISPUTED, ref)
    status = payment.chargeback.status if payment.chargeback else None
    if delivery.event_type == "PAYMENT_AWAITING_CHARGEBACK_REVERSAL" or status in CHARGEBACK_WON:
        return (opened, _entry(payment, delivery, Transition.DISPUTE_WON, ref))
    if status in CHARGEBACK_LOST:
        return (opened, _entry(payment, delivery, Transition.DISPUTE_LOST, ref))
    return (opened,)


ASAAS_EVENTS: Final[Mapping[str, Reader]] = {
    "PAYMENT_CONFIRMED": _received,
    "PAYMENT_RECEIVED": _received,
    "PAYMENT_RECEIVED_IN_CASH_UNDONE": _cash_undone,
    "PAYMENT_REFUNDED": _refunds,
    "PAYMENT_PARTIALLY_REFUNDED": _refunds,
    "PAYMENT_CHARGEBACK_REQUESTED": _chargeback,
    "PAYMENT_CHARGEBACK_DISPUTE": _chargeback,
    "PAYMENT_AWAITING_CHARGEBACK_REVERSAL": _chargeback,
}


def interpret(raw_body: str) -> tuple[Interpretation, ...]:
    try:
        event = AsaasEvent.model_validate_json(raw_body)
        created = _brazil_epoch(event.dateCreated)
    except (ValidationError, ValueError) as exc:
        raise MalformedEventError(f"not an Asaas event: {exc}") from exc
    delivery = Delivery(PROVIDER, event.id, event.event, created)
    read = ASAAS_EVENTS.get(event.event)
    if read is None:
        return (NoEffect(delivery, "event has no mapped effect"),)
    if event.payment is None:
        raise MalformedEventError(f"{event.event} {event.id} carries no payment")
    try:
        return read(event.payment, delivery)
    except ValueError as exc:
        raise MalformedEventError(f"{event.event} {event.id}: {exc}") from exc
