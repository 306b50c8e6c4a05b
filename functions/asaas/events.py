"""Asaas: the webhook names a payment and says what happened; the payment is read back from
Asaas's API (`GET /v3/payments/{id}`), and only what the API answers is booked.

Asaas authenticates a webhook with one static token and signs nothing, so the body's amounts
and statuses are a claim: anyone holding the token could write them. The event type still
says what happened; the value, the status, the refunds and the chargeback come from the
payment the API answers (it carries `refunds[]` and `chargeback` itself). A payment the API
does not know (404) books nothing: the delivery is recorded as ignored, with that reason.

Map (one place; anything else is ignored, with its reason):
- PAYMENT_CONFIRMED (card approved) and PAYMENT_RECEIVED (money in) are one payment: one
  entry keyed by the payment id, whichever arrives first, booked while the API shows the money
  in (a payment still PENDING books nothing).
- A receipt marked in cash (status RECEIVED_IN_CASH) is an entry of its own, which
  PAYMENT_RECEIVED_IN_CASH_UNDONE reverses; the undo returns the charge to pending, so it can be
  received again, in cash too. Each cash receipt is keyed by the undo it follows: `{id}:cash`
  for the first, `{id}:cash:{t}` for one received after the undo stamped `t` (epoch seconds).
  Nothing in the payment names a receipt once it is undone (`paymentDate` is a day, and null
  after the undo), so the receipt's place is read from the ledger (`CashBooks`: the payment's
  cash entries and when each undo came):
  - a receipt is booked only while the API shows the payment RECEIVED_IN_CASH (one undone since
    books nothing: its undo then voids it), keyed after the latest undo the ledger knows: the
    receipt the API shows came after every undo made so far;
  - an undo reverses the newest counted receipt keyed before it and not reversed yet (or the
    one keyed after the undo before it, which then never counts); if the API shows the payment
    received in cash again, the receipt it shows is booked too, keyed after this undo: a receipt
    whose webhook was read before this undo was booked under the older key, which this undo
    has just reversed.
  A redelivery of a receipt or of an undo finds its keys again (an undo keeps the receipt it
  reversed first), so each stays one effect. Not covered: an undo that read the payment just
  before the charge was received again, and whose reversal commits only after the new
  receipt's webhook read the ledger (one processing's window): that receipt is then taken for
  the one reversed (a duplicate), and the order reads unpaid until a delivery of either is
  processed again.
- PAYMENT_REFUNDED and PAYMENT_PARTIALLY_REFUNDED: the payment's `refunds[]`, every refund so
  far. Refunds have no id, so each DONE refund is keyed by what identifies it within the
  payment: its `dateCreated` and `value` (and its rank among identical ones): the same list
  read again, or grown by one, adds only the new refunds. A refund event whose payment lists
  none is malformed (DLQ): guessing its amount could count a refund twice.
- PAYMENT_CHARGEBACK_REQUESTED and PAYMENT_CHARGEBACK_DISPUTE (the merchant contests) are one
  open dispute (`{id}:chargeback`, funds withdrawn); PAYMENT_AWAITING_CHARGEBACK_REVERSAL means
  the merchant won (the funds come back); a chargeback whose `chargeback.status` says
  REVERSED is won, DISPUTE_LOST or DONE is lost. A chargeback is for its own value
  (`payment.chargeback.value`: what the cardholder disputed, less than the payment after a
  partial refund); a payment in a chargeback status that carries no chargeback object is
  disputed for what its DONE refunds left of `payment.value`; one in neither books nothing.
- Installments: each installment is a payment of its own (its `installment` names the plan),
  all naming the order in `externalReference`; each is booked, refunded and charged back as
  the payment it is.
- PAYMENT_DELETED and PAYMENT_RESTORED book nothing: Asaas deletes only a charge nobody paid,
  and restores it unpaid.
`dateCreated` has no zone: it is Brazil's official time, UTC-3 (no daylight time since 2019).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from functions.asaas.entries import (
    from_cash_undone,
    from_chargeback,
    from_received,
    from_refunds,
    payment_entry,
)
from functions.asaas.models import (
    IN_CHARGEBACK,
    MONEY_IN,
    NOTHING_TO_BOOK,
    PROVIDER,
    REFUND_DONE,
    AsaasEvent,
    AsaasPayment,
    CashBooks,
    PaymentSource,
    Reader,
    brazil_epoch,
    nothing_in_cash,
)
from functions.shared.domain import Delivery, Effect, Interpretation, NoEffect, Transition
from functions.shared.errors import MalformedEventError
from functions.shared.money import InvalidFieldError
from functions.shared.provider_fields import refused

ASAAS_EVENTS: Final[Mapping[str, Reader]] = {
    "PAYMENT_CONFIRMED": from_received,
    "PAYMENT_RECEIVED": from_received,
    "PAYMENT_RECEIVED_IN_CASH_UNDONE": from_cash_undone,
    "PAYMENT_REFUNDED": from_refunds,
    "PAYMENT_PARTIALLY_REFUNDED": from_refunds,
    "PAYMENT_CHARGEBACK_REQUESTED": from_chargeback,
    "PAYMENT_CHARGEBACK_DISPUTE": from_chargeback,
    "PAYMENT_AWAITING_CHARGEBACK_REVERSAL": from_chargeback,
}


def statement_readings(
    answered: Mapping[str, Any], delivery: Delivery
) -> tuple[Interpretation, ...]:
    """What a payment, as Asaas's API answers it now, moved through the account: its receipt,
    its DONE refunds, its chargeback -- the entries its webhooks book, under their keys. A
    receipt in cash moved nothing through Asaas: its statement has no line of it."""
    try:
        payment = AsaasPayment.model_validate(answered)
    except ValidationError as exc:
        raise refused(exc, "payment") from exc
    readings: list[Interpretation] = []
    if payment.status in MONEY_IN and not payment.deleted:
        readings.append(payment_entry(payment, delivery, Transition.PAID, payment.id))
    if any(refund.status == REFUND_DONE for refund in payment.refunds or []):
        readings += from_refunds(payment, delivery, nothing_in_cash)
    if payment.chargeback is not None or payment.status in IN_CHARGEBACK:
        readings += from_chargeback(payment, delivery, nothing_in_cash)
    return tuple(r for r in readings if isinstance(r, Effect))


class Interpreter:
    """Reads the event, then the payment it names from Asaas's API, and books what the API
    answers (see the module's doc)."""

    def __init__(self, payments: PaymentSource, cash: CashBooks = nothing_in_cash) -> None:
        self._payments = payments
        self._cash = cash

    def __call__(self, raw_body: str) -> tuple[Interpretation, ...]:
        try:
            event = AsaasEvent.model_validate_json(raw_body)
        except ValidationError as exc:
            raise refused(exc, what="not an Asaas event") from exc
        created = brazil_epoch(event.dateCreated, "dateCreated")
        delivery = Delivery(PROVIDER, event.id, event.event, created)
        read = ASAAS_EVENTS.get(event.event)
        if read is None:
            return (
                NoEffect(delivery, NOTHING_TO_BOOK.get(event.event, "event has no mapped effect")),
            )
        if event.payment is None:
            raise InvalidFieldError("payment", f"{event.event} {event.id} carries no payment")
        answered = self._payments(event.payment.id)
        if answered is None:
            reason = f"Asaas does not know payment {event.payment.id}: nothing booked"
            return (NoEffect(delivery, reason),)
        try:
            payment = AsaasPayment.model_validate(answered)
        except ValidationError as exc:
            raise refused(exc, "payment") from exc
        if payment.id != event.payment.id:
            raise MalformedEventError(f"Asaas answered payment {payment.id} for {event.payment.id}")
        return read(payment, delivery, self._cash)
