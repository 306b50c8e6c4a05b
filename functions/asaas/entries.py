"""What each event of Asaas's map books from the payment its API answers: the payment received,
in cash or not, an undone cash receipt, its refunds, its chargeback (functions/asaas/events.py
says which event reads which)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from functions.asaas.models import (
    CHARGEBACK_LOST,
    CHARGEBACK_WON,
    CURRENCY,
    IN_CASH,
    IN_CHARGEBACK,
    MONEY_IN,
    REFUND_DONE,
    AsaasPayment,
    CashBooks,
    CashItem,
    brazil_epoch,
    cash_ref,
    cash_ref_start,
)
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
from functions.shared.money import to_minor


def _order_of(payment: AsaasPayment) -> str | None:
    return checked_order_id(payment.externalReference, "payment.externalReference")


def payment_entry(
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


def from_received(
    payment: AsaasPayment, delivery: Delivery, cash: CashBooks
) -> tuple[Interpretation, ...]:
    if payment.deleted:
        # Only an unpaid charge is deleted; an undo of a receipt before it still reverses it.
        return (NoEffect(delivery, f"payment {payment.id} is deleted at Asaas: nothing received"),)
    if payment.status == IN_CASH:
        return (_cash_receipt(payment, delivery, cash(_order_of(payment), payment.id)),)
    if payment.status in MONEY_IN:
        return (payment_entry(payment, delivery, Transition.PAID, payment.id),)
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
    """The receipt the API shows, keyed after the latest undo the ledger knows (see
    events.py's doc); stamped after that undo, which it follows."""
    after = max(_undo_times(payment.id, items), default=None)
    at = delivery.created if after is None else max(delivery.created, after + 1)
    return payment_entry(payment, _at(delivery, at), Transition.PAID, cash_ref(payment.id, after))


def from_cash_undone(
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
    entries: list[Interpretation] = [
        payment_entry(payment, delivery, Transition.PAYMENT_REVERSED, target)
    ]
    if payment.status == IN_CASH and not payment.deleted:
        after = max(undos | {undone_at})
        entries.append(
            payment_entry(
                payment,
                _at(delivery, after + 1),
                Transition.PAID,
                cash_ref(payment.id, after),
                note="received in cash again after the undo, as Asaas shows the payment",
            )
        )
    return tuple(entries)


def from_refunds(
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
        at = brazil_epoch(refund.dateCreated, f"payment.refunds.{n}.dateCreated")
        entries.append(
            payment_entry(payment, _at(delivery, at), Transition.REFUNDED, ref, (minor, field))
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
    # Refunds past the value leave nothing to dispute (no entry: see from_chargeback).
    return max(to_minor(payment.value, CURRENCY, "payment.value") - refunded, 0), "payment.value"


def from_chargeback(
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
    opened = payment_entry(payment, delivery, Transition.DISPUTED, ref, disputed)
    status = payment.chargeback.status if payment.chargeback else None
    if delivery.event_type == "PAYMENT_AWAITING_CHARGEBACK_REVERSAL" or status in CHARGEBACK_WON:
        return (opened, payment_entry(payment, delivery, Transition.DISPUTE_WON, ref, disputed))
    if status in CHARGEBACK_LOST:
        return (opened, payment_entry(payment, delivery, Transition.DISPUTE_LOST, ref, disputed))
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
