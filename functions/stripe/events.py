"""Stripe: which events are money movements, and which object each movement *is*.

The event table first (`STRIPE_EVENTS`), then the interpreter that reads a delivery through it.
Each kind of movement is read in its own module: payments.py (Checkout too), refunds.py and
disputes.py, on the objects of models.py; thin.py reads a thin event's object, balance.py a
statement line, through the same table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

from pydantic import ValidationError

from functions.shared.domain import Delivery, NoEffect
from functions.shared.errors import MalformedEventError
from functions.shared.provider_fields import refused
from functions.stripe import thin
from functions.stripe.disputes import from_dispute_closed, from_dispute_opened, from_dispute_updated
from functions.stripe.models import (
    NEWEST_KNOWN_API_VERSION,
    OBJECT,
    PROVIDER,
    REFUND_EVENTS_FOR_CARDS_SINCE,
    ApiVersionFieldError,
    Charge,
    RefundSource,
    StripeApiNotConfiguredError,
    StripeEvent,
)
from functions.stripe.payments import (
    from_capture_so_far,
    from_charge,
    from_checkout_session,
    from_invoice,
    from_invoice_payment,
    from_payment_intent,
)
from functions.stripe.reading import EventRule, Readings, read_object
from functions.stripe.refunds import (
    all_settled,
    from_refund,
    listed_refunds,
    refund_entries,
    with_recheck,
)

# The one map from Stripe event type to movement. An event becomes an entry only when it can
# name the provider object that *is* the movement; otherwise it is recorded as ignored:
# - payment_intent.succeeded, charge.succeeded/captured, invoice_payment.paid and legacy
#   invoice.paid/payment_succeeded all name the PaymentIntent: one payment, one entry.
# - basil-shaped invoice.paid/payment_succeeded name no payment at all: they only bind the
#   invoice (and its subscription) to the order they carry (a second credit for the same
#   payment would otherwise be possible); invoice_payment.paid then finds it.
# - checkout.session.* bind the session's PaymentIntent to the order; paid, they are the
#   payment itself (same key as the PaymentIntent's events).
# - refund.created/updated/failed and charge.refund.updated name the refund: two partial
#   refunds are two entries; a failed or canceled refund is its reversal. charge.refunded
#   (see Interpreter) names the refunds when embedded, or makes us read them from the API.
# - dispute events name the dispute: opening (funds withdrawn, or an inquiry), verdict.
STRIPE_EVENTS: Final[Mapping[str, EventRule]] = {
    "payment_intent.succeeded": EventRule(from_payment_intent),
    "charge.succeeded": EventRule(from_charge),
    "charge.captured": EventRule(from_charge),
    "charge.updated": EventRule(from_capture_so_far),
    "payment_intent.amount_capturable_updated": EventRule(from_capture_so_far),
    "invoice_payment.paid": EventRule(from_invoice_payment),
    "invoice.paid": EventRule(from_invoice),
    "invoice.payment_succeeded": EventRule(from_invoice),
    "checkout.session.completed": EventRule(from_checkout_session),
    "checkout.session.async_payment_succeeded": EventRule(from_checkout_session),
    "checkout.session.async_payment_failed": EventRule(from_checkout_session),
    "checkout.session.expired": EventRule(from_checkout_session),
    "refund.created": EventRule(from_refund),
    "refund.updated": EventRule(from_refund),
    "refund.failed": EventRule(from_refund),
    "charge.refund.updated": EventRule(from_refund),
    "charge.dispute.created": EventRule(from_dispute_opened),
    "charge.dispute.funds_withdrawn": EventRule(from_dispute_opened),
    "charge.dispute.updated": EventRule(from_dispute_updated),
    "charge.dispute.funds_reinstated": EventRule(from_dispute_closed),
    "charge.dispute.closed": EventRule(from_dispute_closed),
}

# The updates whose meaning is what `data.previous_attributes` says changed.
READS_PREVIOUS_ATTRIBUTES: Final = frozenset({"charge.updated", "charge.dispute.updated"})

NAMED_NO_EFFECT: Final[Mapping[str, str]] = {
    "payment_intent.created": "a PaymentIntent was created; no money moved",
    "charge.pending": "a charge is pending; it counts once it succeeds",
}


class Interpreter:
    """Stripe's map; `refunds` reads a charge's refunds when an event names none of them,
    `related` the object a thin event names (functions/stripe/thin.py)."""

    def __init__(
        self,
        refunds: RefundSource | None = None,
        related: thin.RelatedObjectSource | None = None,
    ) -> None:
        self._refunds = refunds
        self._related = related
        self._rules: Mapping[str, EventRule] = {
            **STRIPE_EVENTS,
            "charge.refunded": EventRule(self._from_charge_refunded),
        }

    def __call__(self, raw_body: str) -> Readings:
        try:
            payload = json.loads(raw_body)
        except ValueError as exc:
            raise MalformedEventError("not a Stripe event: the body is not JSON") from exc
        if isinstance(payload, dict) and thin.is_thin(payload):
            return self._thin(thin.notification_of(payload))
        try:
            event = StripeEvent.model_validate(payload)
        except ValidationError as exc:
            raise refused(exc, what="not a Stripe event") from exc
        return self._read(event, Delivery(PROVIDER, event.id, event.type, event.created))

    def _thin(self, notification: thin.EventNotification) -> Readings:
        """A thin event: its related object read now, through the rule of its snapshot type;
        nothing is read for a type that books nothing."""
        delivery = Delivery(
            PROVIDER, notification.id, notification.type, notification.created_seconds
        )
        snapshot_type = notification.snapshot_type
        if snapshot_type is None or snapshot_type not in self._rules:
            reason = NAMED_NO_EFFECT.get(snapshot_type or "", "no mapped effect")
            return (NoEffect(delivery, reason),)
        if self._related is None:
            raise StripeApiNotConfiguredError(
                f"thin event {notification.id} ({notification.type}) names its object only; "
                "reading it needs a Stripe API key: set the stripe/api-key secret"
            )
        snapshot = thin.snapshot_of(
            notification, snapshot_type, self._related, NEWEST_KNOWN_API_VERSION
        )
        try:
            event = StripeEvent.model_validate(snapshot)
        except ValidationError as exc:
            raise refused(exc, what="not a Stripe object") from exc
        return self._read(event, delivery)

    def _read(self, event: StripeEvent, delivery: Delivery) -> Readings:
        rule = self._rules.get(event.type)
        if rule is None:
            return (NoEffect(delivery, NAMED_NO_EFFECT.get(event.type, "no mapped effect")),)
        if (
            event.type in READS_PREVIOUS_ATTRIBUTES
            and event.api_version_unknown
            and event.api_version is not None
            and "previous_attributes" not in event.data.model_fields_set
        ):
            # What changed is read from it: absent, an update would read as no change.
            raise ApiVersionFieldError("data.previous_attributes", "absent", event.api_version)
        try:
            return rule.read(event, delivery)
        except ValidationError as exc:
            field = refused(exc, OBJECT)
            if event.api_version_unknown and event.api_version is not None:
                raise ApiVersionFieldError(field.field, field.problem, event.api_version) from exc
            raise field from exc

    def _from_charge_refunded(self, event: StripeEvent, delivery: Delivery) -> Readings:
        """One entry per refund of the charge, keyed by its `re_…` id, whichever way it came:
        embedded (API < 2022-11-15), read from the refunds API, or its own refund.* event."""
        charge = read_object(Charge, event)
        embedded = charge.refunds
        if embedded is not None and not embedded.has_more:
            # Each refund with the path its fields are named by in a dead letter's reason
            refunds = [(r, f"{OBJECT}.refunds.data.{n}") for n, r in enumerate(embedded.data)]
            if self._refunds is not None and not all_settled(refunds):
                # The snapshot holds a refund still pending, and a re-drive of this delivery
                # would read the same snapshot: the refunds are read from the API instead, now
                # and at each re-check, so its success counts whichever events are subscribed.
                refunds = list(listed_refunds(self._refunds, charge.id))
                return with_recheck(charge, refunds, refund_entries(charge, refunds, delivery))
        elif not event.api_version_before(REFUND_EVENTS_FOR_CARDS_SINCE):
            return (
                NoEffect(
                    delivery,
                    "charge.refunded names no refund on this API version; "
                    "refund.created/updated/failed name each one",
                ),
            )
        elif self._refunds is not None:
            refunds = list(listed_refunds(self._refunds, charge.id))
            readings = refund_entries(charge, refunds, delivery)
            return with_recheck(charge, refunds, readings)
        else:
            raise StripeApiNotConfiguredError(
                f"charge.refunded {event.id} (API {event.api_version}) names no refund and no "
                "Stripe API key is configured to read them; set the stripe/api-key secret"
            )
        return refund_entries(charge, refunds, delivery)


def interpret(raw_body: str) -> Readings:
    """Stripe's map without the refunds API (tests and tools that need no network)."""
    return Interpreter()(raw_body)
