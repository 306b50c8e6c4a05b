"""Stripe's refunds as its event table reads them: each refund is its own entry, keyed by its
`re_…` id, whether its own event names it or a charge.refunded lists it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from pydantic import ValidationError

from functions.shared.domain import (
    Delivery,
    Effect,
    Interpretation,
    NoEffect,
    Transition,
    checked_order_id,
    movement,
)
from functions.shared.provider_fields import refused
from functions.stripe.models import (
    OBJECT,
    ORDER_METADATA_KEY,
    REFUND_COUNTS,
    REFUND_REVERSED,
    Charge,
    Refund,
    RefundSource,
    StripeEvent,
    order_of,
)
from functions.stripe.reading import Readings, payment_refs, read_object


def _refund_entry(
    refund: Refund, delivery: Delivery, order_id: str | None = None, at: str = OBJECT
) -> Interpretation:
    """A succeeded refund counts; one that failed or was canceled reverses it (and counts only
    if the refund had counted); any other status moves no money yet."""
    if refund.status == REFUND_COUNTS:
        transition = Transition.REFUNDED
    elif refund.status in REFUND_REVERSED:
        transition = Transition.REFUND_REVERSED
    else:
        return NoEffect(
            delivery, f"refund {refund.id} is {refund.status!r}; it counts once it succeeds"
        )
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=refund.id,
        amount=movement(refund.amount, refund.currency, f"{at}.amount", "refund"),
        order_id=checked_order_id(
            refund.metadata.get(ORDER_METADATA_KEY), f"{at}.metadata.order_id"
        )
        or order_id,
        order_lookup=payment_refs(refund.payment_intent, refund.charge),
        order_from_metadata=True,
        payment=refund.payment_intent or refund.charge,
    )


def from_refund(event: StripeEvent, delivery: Delivery) -> Readings:
    return (_refund_entry(read_object(Refund, event), delivery),)


def refund_entries(
    charge: Charge, refunds: list[tuple[Refund, str]], delivery: Delivery
) -> Readings:
    return tuple(
        _refund_entry(
            refund.model_copy(
                update={"payment_intent": refund.payment_intent or charge.payment_intent}
            ),
            replace(delivery, created=refund.created or delivery.created),
            order_id=order_of(charge.metadata),
            at=at,
        )
        # Stripe lists newest first; applied oldest first, so none is needlessly late.
        for refund, at in sorted(refunds, key=lambda listed: listed[0].created or 0)
    ) or (NoEffect(delivery, "charge.refunded lists no refund"),)


def listed_refunds(source: RefundSource, charge: str) -> Iterator[tuple[Refund, str]]:
    """The charge's refunds as the refunds API lists them, each with its path there."""
    for n, listed in enumerate(source(charge)):
        at = f"refunds_api.data.{n}"
        try:
            yield Refund.model_validate(listed), at
        except ValidationError as exc:
            raise refused(exc, at) from exc


def all_settled(refunds: list[tuple[Refund, str]]) -> bool:
    return all(r.status == REFUND_COUNTS or r.status in REFUND_REVERSED for r, _ in refunds)


def with_recheck(charge: Charge, refunds: list[tuple[Refund, str]], readings: Readings) -> Readings:
    """A refund still pending when its charge.refunded was read through the API: before acacia,
    only `charge.refund.updated` says when it succeeds, and an endpoint need not subscribe it.
    The charge is read again later (the waiting function re-drives the delivery) until none of
    its refunds is pending, so the refund counts whichever events the endpoint subscribed."""
    if all_settled(refunds):
        return readings
    return tuple(
        replace(reading, recheck=charge.id) if isinstance(reading, NoEffect) else reading
        for reading in readings
    )
