"""The entries one payment holds, as one delivery read it: the payment, its refunds and its one
dispute, booked under the keys the map's doc names (functions/mercadopago/events.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from functions.mercadopago.models import (
    CHARGEBACK_VERDICTS,
    CLOSED_BY_REFUND,
    PROVIDER,
    REFUND_MOVED_MONEY,
    RELEASED,
    BookedDispute,
    Payment,
    dispute_refs,
    epoch,
    moment_or_none,
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
from functions.shared.money import InvalidFieldError, to_minor


def approval_stamp(payment: Payment) -> tuple[int, str | None]:
    """The payment's stamp in epoch seconds, and a note when it is not the approval's own (see
    events.py's doc)."""
    approved = moment_or_none(payment.date_approved)
    if approved is not None:
        return approved, None
    if payment.date_approved is None:
        why = "null"
    elif payment.date_approved == "":
        why = "empty"
    else:
        why = "not an ISO 8601 moment with its offset"
    created = moment_or_none(payment.date_created)
    if created is None:
        raise InvalidFieldError(
            "payment.date_created",
            f"the payment is {payment.status} but date_approved is {why}, and date_created "
            "is no moment either",
        )
    return created, f"stamped at date_created: date_approved is {why}"


def order_of(payment: Payment) -> str | None:
    """`external_reference`, else `metadata.order_id`. Metadata keeps the JSON type it was
    created with, so a numeric order id is read as its digits; any other type is refused."""
    order_id = checked_order_id(payment.external_reference, "payment.external_reference")
    if order_id is not None:
        return order_id
    in_metadata = payment.metadata.get("order_id")
    if isinstance(in_metadata, int) and not isinstance(in_metadata, bool):
        in_metadata = str(in_metadata)
    return checked_order_id(in_metadata, "payment.metadata.order_id")


def held_by_dispute(payment: Payment, amount: int) -> int:
    """What a dispute opened now would hold: what the payment still has after its refunds."""
    currency = payment.currency_id
    if payment.transaction_amount_refunded is not None:
        refunded = to_minor(
            payment.transaction_amount_refunded, currency, "payment.transaction_amount_refunded"
        )
    else:
        refunded = sum(
            to_minor(refund.amount, currency, f"payment.refunds.{n}.amount")
            for n, refund in enumerate(payment.refunds)
            if refund.status == REFUND_MOVED_MONEY
        )
    # Refunds past the amount (a buyer's financing interest returned with it) leave nothing:
    # no dispute holds it, and the payment and its refunds still count as they are.
    return max(amount - refunded, 0)


def dispute_ref(payment_id: str, booked: Mapping[str, BookedDispute], status: str) -> str:
    """The ref the payment's dispute is booked under (see events.py's doc)."""
    dispute, mediation, chargeback = dispute_refs(payment_id)
    if chargeback in booked:
        return chargeback
    if mediation in booked and not booked[mediation].settled:
        return mediation
    if status == "charged_back" and dispute in booked and booked[dispute].released:
        return chargeback  # filed after the mediation the seller won: a second claim
    return dispute


AMOUNT_FIELD: Final = "payment.transaction_amount"


@dataclass(frozen=True)
class Entries:
    """Makes the entries of one payment as one delivery read it: each names the payment, its
    order and its payer, in the payment's currency."""

    payment: Payment
    received: Delivery
    order_id: str | None

    def effect(
        self,
        transition: Transition,
        ref: str,
        minor: int,
        at: int,
        field: str = AMOUNT_FIELD,
        *,
        only_if_open: bool = False,
        note: str | None = None,
    ) -> Effect:
        payment = self.payment
        return Effect(
            delivery=Delivery(PROVIDER, self.received.event_id, self.received.event_type, at),
            transition=transition,
            external_ref=ref,
            amount=movement(minor, payment.currency_id, field, _WHAT[transition]),
            order_id=self.order_id,
            order_lookup=(str(payment.id),),
            recipient=payment.payer.email if payment.payer else None,
            payment=str(payment.id),
            only_if_open=only_if_open,
            note=note,
        )


@dataclass(frozen=True)
class Dispute:
    """The payment's dispute as its entries book it, each stamped at the payment's last update."""

    ref: str
    # What its opening withdrew once that counted, else what the payment still has
    held: int
    withdrew: int | None  # None: no opening of it counted yet
    updated: int


def refund_effects(entries: Entries) -> tuple[list[Interpretation], int]:
    """An entry per refund that moved money, and what buyer protection gave back: the claim's
    loss, not a refund (see events.py's doc)."""
    currency = entries.payment.currency_id
    refunds: list[Interpretation] = []
    lost_to_claim = 0
    for n, refund in enumerate(entries.payment.refunds):
        at = f"payment.refunds.{n}"
        minor = to_minor(refund.amount, currency, f"{at}.amount")
        if refund.status != REFUND_MOVED_MONEY:
            continue
        if refund.by_buyer_protection:
            lost_to_claim += minor
            continue
        refunded_at = epoch(refund.date_created, f"{at}.date_created")
        ref = f"refund:{refund.id}"
        refunds.append(entries.effect(Transition.REFUNDED, ref, minor, refunded_at, f"{at}.amount"))
    return refunds, lost_to_claim


def dispute_opened(entries: Entries, dispute: Dispute) -> list[Interpretation]:
    """A mediation or a chargeback: what it holds withdrawn, and a chargeback's verdict."""
    payment = entries.payment
    if not dispute.held:
        # Refunded in full (or past its amount) before the cardholder disputed it: nothing
        # is held. Said, not refused: refusing would fail every later notification of the
        # payment too, and its refunds and verdict with them.
        return [NoEffect(entries.received, f"payment {payment.id} disputed with nothing left")]
    ref, held, updated = dispute.ref, dispute.held, dispute.updated
    opened: list[Interpretation] = [entries.effect(Transition.DISPUTED, ref, held, updated)]
    verdict = CHARGEBACK_VERDICTS.get(payment.status_detail or "")
    if payment.status == "charged_back" and verdict is not None:
        opened.append(entries.effect(verdict, ref, held, updated))
    return opened


def dispute_closed(entries: Entries, dispute: Dispute, lost_to_claim: int) -> list[Interpretation]:
    """A payment approved or refunded again: its claim lost to buyer protection, its hold
    closed by the seller's refund, or released."""
    ref, held, updated = dispute.ref, dispute.held, dispute.updated
    if lost_to_claim:
        # The buyer won the claim: buyer protection refunded what it held, from the
        # seller's money. The dispute is lost (opened too, if no read saw it held), for what
        # its opening withdrew or, never read, what buyer protection gave back.
        lost = dispute.withdrew if dispute.withdrew is not None else lost_to_claim
        return [
            entries.effect(Transition.DISPUTED, ref, lost, updated),
            entries.effect(Transition.DISPUTE_LOST, ref, lost, updated),
        ]
    if held and entries.payment.status == "refunded":
        # Refunded by the seller while a mediation held it: the refund is its own entry; the
        # hold closes, neither won nor lost.
        return [
            entries.effect(
                Transition.DISPUTE_REFUNDED,
                ref,
                held,
                updated,
                only_if_open=True,
                note=CLOSED_BY_REFUND,
            )
        ]
    if held:
        # Approved again: a hold, if one is open, is released for the merchant. Nothing
        # left on a payment never disputed is nothing to release.
        return [
            entries.effect(
                Transition.DISPUTE_WON, ref, held, updated, only_if_open=True, note=RELEASED
            )
        ]
    return []


# What each entry's money is, for a reason that says what cannot be zero
_WHAT: Final[Mapping[Transition, str]] = {
    Transition.PAID: "payment",
    Transition.REFUNDED: "refund",
    Transition.DISPUTED: "dispute",
    Transition.DISPUTE_WON: "dispute",
    Transition.DISPUTE_LOST: "dispute",
    Transition.DISPUTE_REFUNDED: "dispute",
}
