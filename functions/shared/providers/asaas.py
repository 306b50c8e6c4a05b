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
  REVERSED is won, DISPUTE_LOST or DONE is lost. A chargeback is for its own value
  (`payment.chargeback.value`: what the cardholder disputed, less than the payment after a
  partial refund, or one installment's share); a payment that carries no chargeback object is
  disputed for what its DONE refunds left of `payment.value`.
`dateCreated` has no zone: it is Brazil's official time, UTC-3 (no daylight time since 2019).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Final

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
from functions.shared.errors import MalformedEventError
from functions.shared.money import InvalidFieldError, to_minor
from functions.shared.providers.fields import DecimalAmount, refused

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
    value: DecimalAmount


class AsaasChargeback(_AsaasModel):
    status: str | None = None
    value: DecimalAmount | None = None


class AsaasPayment(_AsaasModel):
    id: str = Field(pattern=r"^pay_\w+$")
    value: DecimalAmount
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


def _brazil_epoch(stamp: str, field: str) -> int:
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=BRAZIL)
    except ValueError as exc:
        shown = repr(stamp) if len(stamp) <= 40 else f"{stamp[:37]!r}..."
        raise InvalidFieldError(field, f"{shown} is not a date as Asaas sends it") from exc
    return int(moment.timestamp())


def _entry(
    payment: AsaasPayment,
    delivery: Delivery,
    transition: Transition,
    ref: str,
    value: tuple[int, str] | None = None,
) -> Effect:
    """An entry of `payment`, of its value or of `value` (minor units and the field they are
    read from)."""
    minor, field = value or (to_minor(payment.value, CURRENCY, "payment.value"), "payment.value")
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=ref,
        amount=movement(minor, CURRENCY, field, _WHAT[transition]),
        order_id=checked_order_id(payment.externalReference, "payment.externalReference"),
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
    for n, refund in enumerate(payment.refunds):
        field = f"payment.refunds.{n}.value"
        minor = to_minor(refund.value, CURRENCY, field)
        identity = (refund.dateCreated, str(minor))
        seen[identity] += 1
        if refund.status != REFUND_DONE:
            continue
        ref = f"{payment.id}:refund:{identity[0]}:{identity[1]}#{seen[identity]}"
        at = _brazil_epoch(refund.dateCreated, f"payment.refunds.{n}.dateCreated")
        entries.append(
            _entry(
                payment,
                Delivery(delivery.provider, delivery.event_id, delivery.event_type, at),
                Transition.REFUNDED,
                ref,
                (minor, field),
            )
        )
    return tuple(entries) or (NoEffect(delivery, "no refund of the payment is DONE yet"),)


def _disputed(payment: AsaasPayment) -> tuple[int, str]:
    """What the chargeback withdraws, in minor units, and the field that says so: its own
    value, else what the payment's DONE refunds left of it (never the whole payment again)."""
    chargeback = payment.chargeback
    if chargeback is not None and chargeback.value is not None:
        field = "payment.chargeback.value"
        return to_minor(chargeback.value, CURRENCY, field), field
    refunded = sum(
        to_minor(refund.value, CURRENCY, f"payment.refunds.{n}.value")
        for n, refund in enumerate(payment.refunds or [])
        if refund.status == REFUND_DONE
    )
    # Refunds past the value leave nothing to dispute (no entry: see _chargeback).
    return max(to_minor(payment.value, CURRENCY, "payment.value") - refunded, 0), "payment.value"


def _chargeback(payment: AsaasPayment, delivery: Delivery) -> tuple[Interpretation, ...]:
    ref = f"{payment.id}:chargeback"
    # The opening and its verdict post one amount, so the dispute nets to zero when it closes.
    disputed = _disputed(payment)
    if not disputed[0]:
        # Refunded in full before the chargeback: nothing is withdrawn (said, not refused).
        return (NoEffect(delivery, f"chargeback of {payment.id} with nothing left to withdraw"),)
    opened = _entry(payment, delivery, Transition.DISPUTED, ref, disputed)
    status = payment.chargeback.status if payment.chargeback else None
    if delivery.event_type == "PAYMENT_AWAITING_CHARGEBACK_REVERSAL" or status in CHARGEBACK_WON:
        return (opened, _entry(payment, delivery, Transition.DISPUTE_WON, ref, disputed))
    if status in CHARGEBACK_LOST:
        return (opened, _entry(payment, delivery, Transition.DISPUTE_LOST, ref, disputed))
    return (opened,)


# What each entry's money is, for a reason that says what cannot be zero
_WHAT: Final[Mapping[Transition, str]] = {
    Transition.PAID: "payment",
    Transition.PAYMENT_REVERSED: "payment",
    Transition.REFUNDED: "refund",
    Transition.DISPUTED: "dispute",
    Transition.DISPUTE_WON: "dispute",
    Transition.DISPUTE_LOST: "dispute",
}

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
    except ValidationError as exc:
        raise refused(exc, what="not an Asaas event") from exc
    created = _brazil_epoch(event.dateCreated, "dateCreated")
    delivery = Delivery(PROVIDER, event.id, event.event, created)
    read = ASAAS_EVENTS.get(event.event)
    if read is None:
        return (NoEffect(delivery, "event has no mapped effect"),)
    if event.payment is None:
        raise InvalidFieldError("payment", f"{event.event} {event.id} carries no payment")
    return read(event.payment, delivery)
