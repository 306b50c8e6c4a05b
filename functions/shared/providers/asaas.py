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

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
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
from functions.shared.errors import MalformedEventError
from functions.shared.money import InvalidFieldError, to_minor
from functions.shared.provider_fields import DecimalAmount, refused

PROVIDER: Final = "asaas"
CURRENCY: Final = "brl"
BRAZIL: Final = timezone(timedelta(hours=-3))
IN_CASH: Final = "RECEIVED_IN_CASH"
# Statuses of a payment whose money came in (card, Pix, boleto), whatever happened to it since.
MONEY_IN: Final = frozenset(
    {
        "CONFIRMED",
        "RECEIVED",
        "REFUNDED",
        "REFUND_REQUESTED",
        "REFUND_IN_PROGRESS",
        "CHARGEBACK_REQUESTED",
        "CHARGEBACK_DISPUTE",
        "AWAITING_CHARGEBACK_REVERSAL",
        "DUNNING_RECEIVED",
    }
)
IN_CHARGEBACK: Final = frozenset(
    {"CHARGEBACK_REQUESTED", "CHARGEBACK_DISPUTE", "AWAITING_CHARGEBACK_REVERSAL"}
)
REFUND_DONE: Final = "DONE"
CHARGEBACK_WON: Final = frozenset({"REVERSED"})
CHARGEBACK_LOST: Final = frozenset({"DISPUTE_LOST", "DONE"})
# Mapped to nothing on purpose, each with what the ledger records as the reason.
NOTHING_TO_BOOK: Final[Mapping[str, str]] = {
    "PAYMENT_DELETED": "a deleted charge was never paid: nothing to book",
    "PAYMENT_RESTORED": "a restored charge is pending again: nothing received to book",
}
PAYMENT_ID: Final = r"^pay_\w+$"

# Asaas's payments API: the payment as `GET /v3/payments/{id}` answers it, None when Asaas
# does not know it (404).
PaymentSource = Callable[[str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class CashItem:
    """One of a payment's cash entries the ledger holds: a receipt (`order.paid`) or an undo's
    reversal, whether it counted, and the provider time of the delivery that wrote it."""

    transition: Transition
    ref: str
    counted: bool
    at: int


# What the ledger holds of a payment's cash receipts: given the order the payment names (None:
# found through the payment's binding) and the payment id. A dependency, as Mercado Pago's
# DisputeBooks is, so the map stays a function of what it reads.
CashBooks = Callable[[str | None, str], Sequence[CashItem]]


def nothing_in_cash(order_id: str | None, payment_id: str) -> Sequence[CashItem]:
    return ()


def cash_ref(payment_id: str, after_undo: int | None) -> str:
    """The key of a cash receipt: the first, or the one received after the undo at `after_undo`."""
    return f"{payment_id}:cash" if after_undo is None else f"{payment_id}:cash:{after_undo}"


def cash_ref_start(payment_id: str, ref: str) -> int | None:
    """The undo a cash receipt's ref follows (None: the first receipt, or not a cash ref)."""
    rest = ref.removeprefix(f"{payment_id}:cash:")
    return int(rest) if rest != ref and rest.isdigit() else None


def is_cash_ref(payment_id: str, ref: str) -> bool:
    return ref == cash_ref(payment_id, None) or cash_ref_start(payment_id, ref) is not None


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
    """The payment as Asaas's API answers it."""

    id: str = Field(pattern=PAYMENT_ID)
    value: DecimalAmount
    status: str | None = None
    deleted: bool = False
    externalReference: str | None = None
    installment: str | None = None
    refunds: list[AsaasRefund] | None = None
    chargeback: AsaasChargeback | None = None


class NamedPayment(_AsaasModel):
    """What the webhook says of its payment that is used: which payment (nothing else)."""

    id: str = Field(pattern=PAYMENT_ID)


class AsaasEvent(_AsaasModel):
    id: str = Field(min_length=1)
    event: str = Field(min_length=1)
    dateCreated: str
    payment: NamedPayment | None = None


Reader = Callable[[AsaasPayment, Delivery, "CashBooks"], tuple[Interpretation, ...]]


def _brazil_epoch(stamp: str, field: str) -> int:
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=BRAZIL)
    except ValueError as exc:
        shown = repr(stamp) if len(stamp) <= 40 else f"{stamp[:37]!r}..."
        raise InvalidFieldError(field, f"{shown} is not a date as Asaas sends it") from exc
    return int(moment.timestamp())


def _order_of(payment: AsaasPayment) -> str | None:
    return checked_order_id(payment.externalReference, "payment.externalReference")


def _entry(
    payment: AsaasPayment,
    delivery: Delivery,
    transition: Transition,
    ref: str,
    value: tuple[int, str] | None = None,
    note: str | None = None,
) -> Effect:
    """An entry of `payment`, of its value or of `value` (minor units and the field they are
    read from)."""
    minor, field = value or (to_minor(payment.value, CURRENCY, "payment.value"), "payment.value")
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=ref,
        amount=movement(minor, CURRENCY, field, _WHAT[transition]),
        order_id=_order_of(payment),
        # Without externalReference it waits for an operator to attach the payment.
        order_lookup=(payment.id,),
        payment=payment.id,
        note=note,
    )


def _at(delivery: Delivery, created: int) -> Delivery:
    return replace(delivery, created=created)


def _received(
    payment: AsaasPayment, delivery: Delivery, cash: CashBooks
) -> tuple[Interpretation, ...]:
    if payment.deleted:
        # Only an unpaid charge is deleted; an undo of a receipt before it still reverses it.
        return (NoEffect(delivery, f"payment {payment.id} is deleted at Asaas: nothing received"),)
    if payment.status == IN_CASH:
        return (_cash_receipt(payment, delivery, cash(_order_of(payment), payment.id)),)
    if payment.status in MONEY_IN:
        return (_entry(payment, delivery, Transition.PAID, payment.id),)
    return (
        NoEffect(delivery, f"Asaas shows payment {payment.id} {payment.status}: nothing received"),
    )


def _undo_times(payment_id: str, items: Sequence[CashItem]) -> set[int]:
    """When each undo of the payment the ledger knows of came: its reversal's time, or the
    time a receipt's key says it follows."""
    times = {i.at for i in items if i.transition is Transition.PAYMENT_REVERSED}
    starts = (cash_ref_start(payment_id, i.ref) for i in items)
    return times | {start for start in starts if start is not None}


def _cash_receipt(
    payment: AsaasPayment, delivery: Delivery, items: Sequence[CashItem]
) -> Interpretation:
    """The receipt the API shows, keyed after the latest undo the ledger knows (see the
    module's doc); stamped after that undo, which it follows."""
    after = max(_undo_times(payment.id, items), default=None)
    at = delivery.created if after is None else max(delivery.created, after + 1)
    return _entry(payment, _at(delivery, at), Transition.PAID, cash_ref(payment.id, after))


def _cash_undone(
    payment: AsaasPayment, delivery: Delivery, cash: CashBooks
) -> tuple[Interpretation, ...]:
    undone_at = delivery.created
    items = cash(_order_of(payment), payment.id)
    undos = _undo_times(payment.id, items)
    reversals = [i for i in items if i.transition is Transition.PAYMENT_REVERSED]
    # A redelivery reverses what this undo reversed the first time (its reversal is stamped so).
    mine = [i.ref for i in reversals if i.at == undone_at]
    reversed_refs = {i.ref for i in reversals}

    def start(ref: str) -> int:
        return cash_ref_start(payment.id, ref) or 0

    open_receipts = [
        i.ref
        for i in items
        if i.transition is Transition.PAID
        and i.counted
        and i.ref not in reversed_refs
        and start(i.ref) < undone_at
    ]
    if mine:
        target = mine[0]
    elif open_receipts:
        target = max(open_receipts, key=start)
    else:
        # Its receipt is not booked (yet, or ever: read after this undo): its key, reserved
        # as voided by the reversal, then never counts.
        target = cash_ref(payment.id, max((t for t in undos if t < undone_at), default=None))
    entries: list[Interpretation] = [_entry(payment, delivery, Transition.PAYMENT_REVERSED, target)]
    if payment.status == IN_CASH and not payment.deleted:
        after = max(undos | {undone_at})
        entries.append(
            _entry(
                payment,
                _at(delivery, after + 1),
                Transition.PAID,
                cash_ref(payment.id, after),
                note="received in cash again after the undo, as Asaas shows the payment",
            )
        )
    return tuple(entries)


def _refunds(
    payment: AsaasPayment, delivery: Delivery, cash: CashBooks
) -> tuple[Interpretation, ...]:
    if not payment.refunds:
        # Never guess an amount: a full refund after partial ones would count twice.
        raise MalformedEventError(
            f"{delivery.event_type} {delivery.event_id}: Asaas lists no refund of {payment.id}"
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
        entries.append(_entry(payment, _at(delivery, at), Transition.REFUNDED, ref, (minor, field)))
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


def _chargeback(
    payment: AsaasPayment, delivery: Delivery, cash: CashBooks
) -> tuple[Interpretation, ...]:
    if payment.chargeback is None and payment.status not in IN_CHARGEBACK:
        return (NoEffect(delivery, f"Asaas shows no chargeback of {payment.id}"),)
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
        readings.append(_entry(payment, delivery, Transition.PAID, payment.id))
    if any(refund.status == REFUND_DONE for refund in payment.refunds or []):
        readings += _refunds(payment, delivery, nothing_in_cash)
    if payment.chargeback is not None or payment.status in IN_CHARGEBACK:
        readings += _chargeback(payment, delivery, nothing_in_cash)
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
        created = _brazil_epoch(event.dateCreated, "dateCreated")
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
