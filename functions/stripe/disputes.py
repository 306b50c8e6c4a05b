"""Stripe's disputes as its event table reads them: the opening (funds withdrawn, or an
inquiry), an inquiry's escalation, and the verdict after the opening it settles."""

from __future__ import annotations

from dataclasses import replace

from functions.shared.domain import Delivery, Effect, NoEffect, Transition
from functions.stripe.models import (
    CLOSED_STATUSES,
    INQUIRY_STATUSES,
    Dispute,
    StripeEvent,
    order_of,
)
from functions.stripe.reading import Readings, money, payment_refs, read_object


def _dispute_entry(
    dispute: Dispute,
    delivery: Delivery,
    transition: Transition,
    *,
    opened: bool = False,
    amount: int | None = None,
) -> Effect:
    at = dispute.created if opened and dispute.created else delivery.created
    return Effect(
        delivery=replace(delivery, created=at),
        transition=transition,
        external_ref=dispute.id,
        amount=money(
            dispute.amount if amount is None else amount, dispute.currency, "amount", "dispute"
        ),
        order_id=order_of(dispute.metadata),
        order_lookup=payment_refs(dispute.payment_intent, dispute.charge),
        order_from_metadata=True,
        payment=dispute.payment_intent or dispute.charge,
    )


def _openings(dispute: Dispute, delivery: Delivery) -> tuple[Effect, ...]:
    """The dispute's opening entries, which every later dispute event carries too: an opening
    announced again is a duplicate, and a verdict can never arrive before its opening.

    A dispute seen past the inquiry stage also closes the inquiry it may have been (Stripe
    escalates an inquiry in place, same id): counted after the inquiry's opening, that closes
    it; processed before it, the close voids the pair, so an opening arriving later never
    counts. Either way no inquiry stays open, whichever events the endpoint subscribes."""
    if _is_inquiry(dispute):
        return (_dispute_entry(dispute, delivery, Transition.INQUIRY_OPENED, opened=True),)
    return (
        replace(
            _dispute_entry(dispute, delivery, Transition.INQUIRY_CLOSED, opened=True),
            audited=False,
        ),
        _dispute_entry(
            dispute, delivery, Transition.DISPUTED, opened=True, amount=dispute.withdrawn
        ),
    )


def _is_inquiry(dispute: Dispute) -> bool:
    return (dispute.status or "").startswith("warning_")


def _prevented(dispute: Dispute, delivery: Delivery) -> Readings:
    """Stopped before it was filed (Visa RDR, Order Insight; 2025-08-27.basil): nothing was
    withdrawn. Money a resolution gives back to the cardholder comes as a refund."""
    return (NoEffect(delivery, f"dispute {dispute.id} was prevented: no funds withdrawn"),)


def from_dispute_opened(event: StripeEvent, delivery: Delivery) -> Readings:
    """created / funds_withdrawn: funds withdrawn, or an inquiry (no funds moved)."""
    dispute = read_object(Dispute, event)
    if dispute.status == "prevented":
        return _prevented(dispute, delivery)
    if dispute.status in CLOSED_STATUSES:
        return from_dispute_closed(event, delivery)
    return _openings(dispute, delivery)


def from_dispute_updated(event: StripeEvent, delivery: Delivery) -> Readings:
    """Only an inquiry escalating into a dispute moves money: the inquiry closes, funds go."""
    dispute = read_object(Dispute, event)
    before = (event.data.previous_attributes or {}).get("status")
    escalated = not _is_inquiry(dispute) and dispute.status not in CLOSED_STATUSES | {"prevented"}
    if isinstance(before, str) and before in INQUIRY_STATUSES and escalated:
        inquiry = dispute.model_copy(update={"status": before})
        return (
            _dispute_entry(inquiry, delivery, Transition.INQUIRY_OPENED, opened=True),
            *_openings(dispute, delivery),
        )
    return (NoEffect(delivery, f"dispute {dispute.id} updated to {dispute.status!r}: no money"),)


def from_dispute_closed(event: StripeEvent, delivery: Delivery) -> Readings:
    """closed / funds_reinstated: the verdict, after the opening it settles.

    The verdict is the dispute's status, never the event's name: Stripe sends
    `funds_reinstated` for a dispute it decided against the merchant on a partially refunded
    charge (status `lost`), giving back the refunded part. What was withdrawn and given back
    is what the dispute's balance transactions say."""
    dispute = read_object(Dispute, event)
    if dispute.status == "prevented":
        return _prevented(dispute, delivery)
    if dispute.status == "warning_closed":
        inquiry = dispute.model_copy(update={"status": "warning_needs_response"})
        return (
            *_openings(inquiry, delivery),
            _dispute_entry(dispute, delivery, Transition.INQUIRY_CLOSED),
        )
    if dispute.status not in {"won", "lost"}:
        return (NoEffect(delivery, f"dispute {dispute.id} closed as {dispute.status!r}"),)
    opened = dispute.model_copy(update={"status": "needs_response"})
    won = dispute.status == "won"
    verdict = Transition.DISPUTE_WON if won else Transition.DISPUTE_LOST
    entries = [
        *_openings(opened, delivery),
        _dispute_entry(dispute, delivery, verdict, amount=dispute.withdrawn),
    ]
    if not won and dispute.reinstated:
        entries.append(
            _dispute_entry(
                dispute,
                delivery,
                Transition.FUNDS_REINSTATED,
                amount=min(dispute.reinstated, dispute.withdrawn),
            )
        )
    return tuple(entries)
