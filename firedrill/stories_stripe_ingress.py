"""The fire drill's Stripe stories of how an order's events come in: through a Checkout Session
or a subscription, naming no order or two, live on a test stack, late, lost (healed by the
statement), through EventBridge, or as thin events."""

from __future__ import annotations

import json

from firedrill.statement import card_fee
from firedrill.story import Expected, Post, Story
from fixtures import stripe
from fixtures.shapes import unique


def stripe_checkout_card(order: str, at: int) -> Story:
    """Checkout: the order is on the session; the PaymentIntent, without it, may come first."""
    intent, session = unique("pi"), unique("cs")
    return Story(
        "checkout (card)",
        order,
        [
            [
                Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at)),
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.completed.card", order, intent, session, at
                    ),
                ),
            ]
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_checkout_boleto(order: str, at: int) -> Story:
    """Checkout with boleto: completed unpaid (bound), paid later; another session fails."""
    intent, session = unique("pi"), unique("cs")
    return Story(
        "checkout (boleto, paid later)",
        order,
        [
            [
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.completed.boleto", order, intent, session, at
                    ),
                ),
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.async_payment_failed",
                        order,
                        unique("pi"),
                        unique("cs"),
                        at,
                    ),
                ),
            ],
            [
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.async_payment_succeeded", order, intent, session, at + 600
                    ),
                ),
                Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at + 600)),
            ],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_subscription_invoice(order: str, at: int) -> Story:
    """A basil subscription invoice carries the order; its payment events do not."""
    intent, invoice, subscription = unique("pi"), unique("in"), unique("sub")
    return Story(
        "subscription invoice",
        order,
        [
            [
                Post("stripe", stripe.subscription_invoice_paid(order, invoice, subscription, at)),
                Post("stripe", stripe.subscription_invoice_payment_paid(invoice, intent, 5000, at)),
                Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at)),
            ]
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_conflicting_metadata(order: str, at: int) -> Story:
    """The PaymentIntent's order changed after its charge copied the old one: one credit."""
    intent, charge, other = unique("pi"), unique("ch"), unique("ord")
    return Story(
        "one payment named for two orders",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [Post("stripe", stripe.charge_succeeded(other, intent, charge, 5000, at))],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
        conflicting_order=other,
    )


def stripe_live_event_on_a_test_stack(order: str, at: int) -> Story:
    """A Connect platform's endpoint gets the other mode's events too: a live-mode refund of
    this test-mode payment must be acknowledged and never counted."""
    intent, charge = unique("pi"), unique("ch")
    live_refund = json.loads(stripe.refund_created(intent, unique("re"), 5000, at + 60, charge))
    live_refund["livemode"] = True
    return Story(
        "live-mode event on a test stack",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [Post("stripe", json.dumps(live_refund), other_mode=True)],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


# Longer than the local SQS retry budget (5 receives x 3 s): only waiting saves the refund.
LATE_PAYMENT_SECONDS = 18.0


def stripe_payment_after_the_retry_budget(order: str, at: int) -> Story:
    """A refund (no order on it) whose payment arrives after SQS would have dead-lettered it."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    late = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    return Story(
        "payment long after its refund",
        order,
        [
            [Post("stripe", stripe.refund_created(intent, refund, 1000, at + 60, charge))],
            [Post("stripe", late, after_seconds=LATE_PAYMENT_SECONDS)],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=1000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
    )


def stripe_unmatched_payment(order: str, at: int) -> Story:
    """A payment no event ever binds: unmatched, listed, then attached to `order` by hand."""
    intent = unique("pi")
    return Story(
        "unmatched payment, attached",
        order,
        [[Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at))]],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
        unmatched_object=intent,
    )


def stripe_webhooks_lost(order: str, at: int) -> Story:
    """A webhook outage past Stripe's retries (and its Events API's 30 days): after the order's
    first event, its payment and a partial refund were never delivered. Only Stripe's balance
    holds them: the statement books both, once, each announced as found by it."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    opened = json.loads(stripe.payment_intent_succeeded(order, intent, 5000, at))
    opened["type"] = "payment_intent.created"
    opened["data"]["object"].update({"status": "requires_payment_method", "amount_received": 0})
    paid = stripe.charge_succeeded(order, intent, charge, 5000, at + 60)
    refunded = stripe.refund_created(intent, refund, 2000, at + 120, charge)
    return Story(
        "webhooks lost, healed by the statement",
        order,
        [[Post("stripe", json.dumps(opened))]],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=2000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
        stripe_balance=[
            stripe.balance_transaction(paid, "charge", 5000, fee=card_fee(5000)),
            stripe.balance_transaction(refunded, "refund", 2000),
        ],
    )


def stripe_through_eventbridge(order: str, at: int) -> Story:
    """A merchant on Stripe's EventBridge destination and its webhook at once
    (`stripeIngress=both`): the payment and its refund put on the partner bus (twice, as
    EventBridge delivers at least once), the payment also posted to the webhook: each booked
    once."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    refunded = stripe.refund_created(intent, refund, 2000, at + 60, charge)
    return Story(
        "stripe through EventBridge and its webhook",
        order,
        [
            [Post("stripe", paid, via_eventbridge=True), Post("stripe", paid)],
            [
                Post("stripe", refunded, via_eventbridge=True),
                Post("stripe", refunded, via_eventbridge=True),
            ],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=2000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
    )


def stripe_thin_events(order: str, at: int) -> Story:
    """A merchant on thin destinations (a webhook and EventBridge) beside its snapshot
    webhook: the payment and its refund announced thin (the refund's event on both
    destinations) and the payment by snapshot too; umavez reads each object from Stripe's API,
    as it is now: each booked once."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    refunded = stripe.refund_created(intent, refund, 2000, at + 60, charge)

    # One thin event per change, sent to every destination: the webhook and EventBridge.
    paid_thin, refunded_thin = stripe.thin_of(paid), stripe.thin_of(refunded)
    return Story(
        "stripe thin events beside snapshot ones",
        order,
        [
            [Post("stripe", paid_thin, copies=2, announces=paid), Post("stripe", paid)],
            [
                Post("stripe", refunded_thin, announces=refunded),
                Post("stripe", refunded_thin, announces=refunded, via_eventbridge=True),
            ],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=2000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
        stripe_objects={
            stripe.object_of(body)[1]["id"]: stripe.object_of(body)[1] for body in (paid, refunded)
        },
    )
