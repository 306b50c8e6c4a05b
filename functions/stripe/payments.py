"""Stripe's payments as its event table reads them: PaymentIntents, charges, invoices (legacy
and basil-shaped), invoice payments and Checkout sessions, which know the order."""

from __future__ import annotations

from functions.shared.domain import Binding, Delivery, Effect, Interpretation, NoEffect, Transition
from functions.stripe.models import (
    BasilInvoice,
    Charge,
    CheckoutSession,
    InvoicePayment,
    LegacyInvoice,
    PaymentIntent,
    StripeEvent,
    order_of,
)
from functions.stripe.reading import Readings, money, payment_refs, read_object


def from_payment_intent(event: StripeEvent, delivery: Delivery) -> Readings:
    intent = read_object(PaymentIntent, event)
    return (
        Effect(
            delivery=delivery,
            transition=Transition.PAID,
            external_ref=intent.id,
            amount=money(intent.amount_received, intent.currency, "amount_received", "payment"),
            order_id=order_of(intent.metadata),
            # Without metadata (Checkout, invoices) its order is what bound it.
            order_lookup=(intent.id,),
            registers=payment_refs(intent.id, intent.latest_charge),
            recipient=intent.receipt_email,
            payment=intent.id,
            captured_so_far=True,
            partly_captured=intent.amount is not None and intent.amount_received < intent.amount,
        ),
    )


def from_charge(event: StripeEvent, delivery: Delivery) -> Readings:
    charge = read_object(Charge, event)
    if not charge.captured:
        return (NoEffect(delivery, "charge authorized but not captured: no money moved yet"),)
    email = charge.receipt_email or (
        charge.billing_details.email if charge.billing_details else None
    )
    captured, field = charge.captured_amount
    return (
        Effect(
            delivery=delivery,
            transition=Transition.PAID,
            external_ref=charge.payment,
            amount=money(captured, charge.currency, field, "payment"),
            order_id=order_of(charge.metadata),
            order_lookup=payment_refs(charge.payment_intent, charge.id),
            registers=payment_refs(charge.payment_intent, charge.id),
            recipient=email,
            payment=charge.payment,
            # Only `amount_captured` grows with each capture; `amount` is what was authorized.
            captured_so_far=field == "amount_captured",
            partly_captured=field == "amount_captured" and captured < charge.amount,
        ),
    )


def from_capture_so_far(event: StripeEvent, delivery: Delivery) -> Readings:
    """A capture of a payment captured in parts (multicapture): Stripe updates the charge at
    each one (`charge.updated`, `amount_captured` against its `previous_attributes`), and the
    PaymentIntent after each one that is not final (`payment_intent.amount_capturable_updated`,
    `amount_received` so far). Each says what was captured in all: the payment's entries are
    topped up to it. Any other change of either moves no money."""
    previous = event.data.previous_attributes or {}
    if event.type == "charge.updated":
        if "amount_captured" not in previous:
            return (NoEffect(delivery, "charge updated, nothing captured: no money moved"),)
        return from_charge(event, delivery)
    if not event.data.object.get("amount_received"):
        return (NoEffect(delivery, "authorized, nothing captured yet: no money moved"),)
    return from_payment_intent(event, delivery)


def from_invoice(event: StripeEvent, delivery: Delivery) -> Readings:
    if "payment_intent" not in event.data.object:
        return (_basil_invoice_binding(read_object(BasilInvoice, event), delivery),)
    invoice = read_object(LegacyInvoice, event)
    if invoice.payment_intent is None:
        return (NoEffect(delivery, "invoice paid without a PaymentIntent (out of band or zero)"),)
    if invoice.amount_paid == 0:
        # A trial, a full coupon, a customer's credit balance: an invoice can be paid with
        # nothing to pay. No money moved, so no entry; recorded, with why.
        return (NoEffect(delivery, f"invoice {invoice.id} paid nothing (amount_paid 0)"),)
    return (
        Effect(
            delivery=delivery,
            transition=Transition.PAID,
            external_ref=invoice.payment_intent,
            amount=money(invoice.amount_paid, invoice.currency, "amount_paid", "payment"),
            order_id=invoice.order_id,
            order_lookup=payment_refs(invoice.payment_intent, invoice.id, invoice.subscription),
            registers=payment_refs(invoice.payment_intent, invoice.charge, invoice.id),
            recipient=invoice.customer_email,
            payment=invoice.payment_intent,
        ),
    )


def _basil_invoice_binding(invoice: BasilInvoice, delivery: Delivery) -> Interpretation:
    """Basil invoices name no payment: the payment is applied from invoice_payment.paid, which
    finds its order through the invoice bound here."""
    details = invoice.subscription
    subscription = details.subscription if details else None
    if order_of(invoice.metadata):
        # The order of this invoice only: the subscription may bill other orders.
        return Binding(
            delivery,
            invoice.order_id,
            (invoice.id,),
            f"invoice {invoice.id} bound to order {invoice.order_id}",
        )
    if invoice.order_id is not None:
        return Binding(
            delivery,
            invoice.order_id,
            payment_refs(invoice.id, subscription),
            f"invoice {invoice.id} and its subscription bound to order {invoice.order_id}",
        )
    if subscription is not None:
        # A renewal: Stripe does not copy a Checkout's client_reference_id to the subscription.
        return Binding(
            delivery,
            None,
            (invoice.id,),
            f"renewal invoice {invoice.id} bound through subscription {subscription}",
            order_lookup=(subscription,),
        )
    return NoEffect(
        delivery, "invoice (API 2025-03-31 basil or later) names no payment and no order"
    )


def from_invoice_payment(event: StripeEvent, delivery: Delivery) -> Readings:
    link = read_object(InvoicePayment, event)
    payment = link.payment.payment_intent or link.payment.charge
    if link.status != "paid" or payment is None or link.amount_paid is None:
        return (NoEffect(delivery, f"invoice payment {link.status!r} names no settled payment"),)
    if link.amount_paid == 0:
        return (NoEffect(delivery, f"invoice payment {link.id} paid nothing (amount_paid 0)"),)
    return (
        Effect(
            delivery=delivery,
            transition=Transition.PAID,
            external_ref=payment,
            amount=money(link.amount_paid, link.currency, "amount_paid", "payment"),
            order_lookup=payment_refs(payment, link.invoice),
            registers=payment_refs(payment),
            payment=payment,
        ),
    )


# -- Checkout: the session knows the order ---------------------------------------------------


def from_checkout_session(event: StripeEvent, delivery: Delivery) -> Readings:
    """completed / async_payment_succeeded / async_payment_failed / expired.

    The session binds its PaymentIntent (or invoice, subscription) to the order from
    `client_reference_id` or `metadata.order_id`. Paid, it is the payment itself, keyed like
    the PaymentIntent's own events; unpaid (boleto, Pix) it only binds, and the payment comes
    with async_payment_succeeded (or the PaymentIntent's events, which now find the order).
    """
    session = read_object(CheckoutSession, event)
    if event.type == "checkout.session.expired":
        return (NoEffect(delivery, f"checkout session {session.id} expired unpaid"),)
    order_id = session.order_id
    if order_id is None:
        return (NoEffect(delivery, f"checkout session {session.id} names no order"),)
    objects = payment_refs(
        session.payment_intent, session.invoice, session.subscription, session.id
    )
    if event.type == "checkout.session.async_payment_failed":
        return (Binding(delivery, order_id, objects, f"{session.id}: the delayed payment failed"),)
    intent = session.payment_intent
    if (
        session.payment_status != "paid"
        or intent is None
        or session.amount_total is None
        or session.currency is None
    ):
        return (
            Binding(
                delivery,
                order_id,
                objects,
                f"{session.id} {session.payment_status}: bound, paid when its payment succeeds",
            ),
        )
    if session.amount_total == 0:
        # Paid with nothing to pay (a full discount): it still says which order is whose.
        return (Binding(delivery, order_id, objects, f"{session.id} paid nothing: bound only"),)
    return (
        Effect(
            delivery=delivery,
            transition=Transition.PAID,
            external_ref=intent,
            amount=money(session.amount_total, session.currency, "amount_total", "payment"),
            order_id=order_id,
            registers=objects,
            recipient=session.customer_details.email if session.customer_details else None,
            payment=intent,
        ),
    )
