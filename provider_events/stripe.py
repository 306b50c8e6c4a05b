"""Real-shaped Stripe events for the tests and the fire drill, from the shapes in tests/events."""

from __future__ import annotations

import json
from typing import Any

from provider_events.shapes import EVENTS_DIR, shape
from provider_events.shapes import unique as unique  # stripe.unique("pi"): ids for these events


def fixture_text(name: str) -> str:
    return (EVENTS_DIR / "stripe" / f"{name}.json").read_text()


def _event(template: str, created: int, fields: dict[str, Any]) -> str:
    event = shape(f"stripe/{template}.json")
    event["id"] = unique("evt")
    event["created"] = created
    event["data"]["object"].update(fields)
    return json.dumps(event)


def payment_intent_succeeded(
    order_id: str | None,
    intent: str,
    amount: int,
    created: int,
    charge: str | None = None,
    currency: str = "brl",
) -> str:
    metadata = {"order_id": order_id} if order_id else {}
    return _event(
        "payment_intent.succeeded",
        created,
        {
            "id": intent,
            "amount": amount,
            "amount_received": amount,
            "currency": currency,
            "metadata": metadata,
            "latest_charge": charge,
        },
    )


def charge_succeeded(order_id: str, intent: str, charge: str, amount: int, created: int) -> str:
    return _event(
        "charge.succeeded",
        created,
        {
            "id": charge,
            "amount": amount,
            "amount_captured": amount,
            "metadata": {"order_id": order_id},
            "payment_intent": intent,
        },
    )


def invoice_payment_paid(intent: str, amount: int, created: int) -> str:
    return _event(
        "invoice_payment.paid",
        created,
        {
            "id": unique("inpay"),
            "amount_paid": amount,
            "amount_requested": amount,
            "payment": {"type": "payment_intent", "payment_intent": intent},
        },
    )


def refund_created(
    intent: str,
    refund: str,
    amount: int,
    created: int,
    charge: str | None = None,
    order_id: str | None = None,
) -> str:
    return refund_event("refund.created", intent, refund, amount, created, charge, order_id)


def refund_failed(intent: str, refund: str, amount: int, created: int, charge: str) -> str:
    """A refund that failed (after succeeding, or before): its money is back with the merchant."""
    return refund_event("refund.failed", intent, refund, amount, created, charge)


def refund_event(
    template: str,
    intent: str,
    refund: str,
    amount: int,
    created: int,
    charge: str | None = None,
    order_id: str | None = None,
) -> str:
    return _event(
        template,
        created,
        {
            "id": refund,
            "amount": amount,
            "created": created,
            "payment_intent": intent,
            "charge": charge,
            "metadata": {"order_id": order_id} if order_id else {},
        },
    )


def dispute_created(intent: str, dispute: str, amount: int, created: int) -> str:
    return dispute_event("charge.dispute.created", intent, dispute, amount, created, created)


def dispute_event(
    template: str, intent: str, dispute: str, amount: int, created: int, opened: int
) -> str:
    """A dispute event from the fixture `template` (its status is the template's): created,
    inquiry, funds_withdrawn, closed.won/lost/warning_closed, funds_reinstated."""
    return _event(
        template,
        created,
        {"id": dispute, "amount": amount, "payment_intent": intent, "created": opened},
    )


def with_new_event_id(body: str) -> str:
    """The same change announced again by a different event (e.g. a dashboard resend)."""
    event = json.loads(body)
    event["id"] = unique("evt")
    return json.dumps(event)


def checkout_session(
    template: str, order_id: str, intent: str | None, session: str, created: int, amount: int = 5000
) -> str:
    """A checkout.session.* event (completed.card / completed.boleto / async_payment_succeeded /
    async_payment_failed / expired): the order on the session, not on its PaymentIntent."""
    return _event(
        template,
        created,
        {
            "id": session,
            "client_reference_id": order_id,
            "metadata": {"order_id": order_id},
            "payment_intent": intent,
            "amount_total": amount,
        },
    )


def subscription_invoice_paid(order_id: str, invoice: str, subscription: str, created: int) -> str:
    """A basil invoice.paid: no payment on it, the order in the subscription's details."""
    event = json.loads(
        _event("invoice.paid.basil.subscription", created, {"id": invoice, "metadata": {}})
    )
    event["data"]["object"]["parent"]["subscription_details"].update(
        {"metadata": {"order_id": order_id}, "subscription": subscription}
    )
    return json.dumps(event)


def subscription_invoice_payment_paid(invoice: str, intent: str, amount: int, created: int) -> str:
    return _event(
        "invoice_payment.paid.subscription",
        created,
        {
            "id": unique("inpay"),
            "invoice": invoice,
            "amount_paid": amount,
            "payment": {"type": "payment_intent", "payment_intent": intent},
        },
    )
