"""Stripe: which events are effects, and which object each effect *is*.

Each webhook endpoint keeps its own API version, so legacy and current (basil and later)
payload shapes arrive side by side; the models accept both and read only what they need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.domain import Delivery, Effect, Interpretation, Money, NoEffect, Transition
from functions.shared.errors import MalformedEventError

PROVIDER: Final = "stripe"
ORDER_METADATA_KEY: Final = "order_id"


class _StripeModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class StripeEventData(_StripeModel):
    object: dict[str, Any]


class StripeEvent(_StripeModel):
    id: str = Field(pattern=r"^evt_\w+$")
    object: str = Field(pattern=r"^event$")
    type: str = Field(min_length=1)
    created: int = Field(gt=0)
    api_version: str | None = None
    livemode: bool = False
    data: StripeEventData


class PaymentIntent(_StripeModel):
    id: str = Field(pattern=r"^pi_\w+$")
    amount_received: int = Field(ge=0)
    currency: str
    metadata: dict[str, str] = Field(default_factory=dict)
    receipt_email: str | None = None
    latest_charge: str | None = None
    status: str


class BillingDetails(_StripeModel):
    email: str | None = None


class Charge(_StripeModel):
    id: str = Field(pattern=r"^(ch|py)_\w+$")
    amount_captured: int = Field(ge=0)
    captured: bool
    currency: str
    metadata: dict[str, str] = Field(default_factory=dict)
    payment_intent: str | None = None
    receipt_email: str | None = None
    billing_details: BillingDetails | None = None


class Refund(_StripeModel):
    id: str = Field(pattern=r"^(re|pyr)_\w+$")
    amount: int = Field(ge=0)
    currency: str
    status: str
    metadata: dict[str, str] = Field(default_factory=dict)
    charge: str | None = None
    payment_intent: str | None = None


class Dispute(_StripeModel):
    id: str = Field(pattern=r"^(dp|du)_\w+$")
    amount: int = Field(ge=0)
    currency: str
    metadata: dict[str, str] = Field(default_factory=dict)
    charge: str | None = None
    payment_intent: str | None = None


class LegacyInvoice(_StripeModel):
    """An invoice as API versions up to 2024 (acacia) shape it: it names its PaymentIntent."""

    id: str = Field(pattern=r"^in_\w+$")
    amount_paid: int = Field(ge=0)
    currency: str
    metadata: dict[str, str] = Field(default_factory=dict)
    payment_intent: str | None = None
    charge: str | None = None
    customer_email: str | None = None


class InvoicePaymentTarget(_StripeModel):
    type: str
    payment_intent: str | None = None
    charge: str | None = None


class InvoicePayment(_StripeModel):
    """Basil's link between an invoice and the payment that paid it."""

    id: str = Field(pattern=r"^inpay_\w+$")
    amount_paid: int | None = Field(default=None, ge=0)
    currency: str
    invoice: str
    status: str
    payment: InvoicePaymentTarget


Reading = Effect | NoEffect


@dataclass(frozen=True)
class EventRule:
    transition: Transition
    read: Callable[[StripeEvent, Delivery, Transition], Reading]


def _order_of(metadata: Mapping[str, str]) -> str | None:
    return metadata.get(ORDER_METADATA_KEY) or None


def _payment_refs(*object_ids: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(object_id for object_id in object_ids if object_id))


def _from_payment_intent(event: StripeEvent, delivery: Delivery, transition: Transition) -> Reading:
    intent = PaymentIntent.model_validate(event.data.object)
    refs = _payment_refs(intent.id, intent.latest_charge)
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=intent.id,
        amount=Money(intent.amount_received, intent.currency),
        order_id=_order_of(intent.metadata),
        registers=refs,
        recipient=intent.receipt_email,
    )


def _from_charge(event: StripeEvent, delivery: Delivery, transition: Transition) -> Reading:
    charge = Charge.model_validate(event.data.object)
    if not charge.captured:
        return NoEffect(delivery, "charge authorized but not captured: no money moved yet")
    email = charge.receipt_email or (
        charge.billing_details.email if charge.billing_details else None
    )
    return Effect(
        delivery=delivery,
        transition=transition,
        # A charge of a PaymentIntent is that payment; only a bare Charges-API charge is its own.
        external_ref=charge.payment_intent or charge.id,
        amount=Money(charge.amount_captured, charge.currency),
        order_id=_order_of(charge.metadata),
        order_lookup=_payment_refs(charge.payment_intent),
        registers=_payment_refs(charge.payment_intent, charge.id),
        recipient=email,
    )


def _from_legacy_invoice(event: StripeEvent, delivery: Delivery, transition: Transition) -> Reading:
    if "payment_intent" not in event.data.object:
        return NoEffect(
            delivery,
            "invoice shaped by API 2025-03-31 (basil) or later names no payment; "
            "the payment is applied from its payment_intent/invoice_payment event",
        )
    invoice = LegacyInvoice.model_validate(event.data.object)
    if invoice.payment_intent is None:
        return NoEffect(delivery, "invoice paid without a PaymentIntent (out of band or zero)")
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=invoice.payment_intent,
        amount=Money(invoice.amount_paid, invoice.currency),
        order_id=_order_of(invoice.metadata),
        order_lookup=_payment_refs(invoice.payment_intent),
        registers=_payment_refs(invoice.payment_intent, invoice.charge),
        recipient=invoice.customer_email,
    )


def _from_invoice_payment(
    event: StripeEvent, delivery: Delivery, transition: Transition
) -> Reading:
    link = InvoicePayment.model_validate(event.data.object)
    payment = link.payment.payment_intent or link.payment.charge
    if link.status != "paid" or payment is None or link.amount_paid is None:
        return NoEffect(delivery, f"invoice payment {link.status!r} names no settled payment")
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=payment,
        amount=Money(link.amount_paid, link.currency),
        order_lookup=_payment_refs(payment),
    )


def _from_refund(event: StripeEvent, delivery: Delivery, transition: Transition) -> Reading:
    refund = Refund.model_validate(event.data.object)
    if refund.status != "succeeded":
        return NoEffect(
            delivery, f"refund is {refund.status!r}; it counts once a refund event says succeeded"
        )
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=refund.id,
        amount=Money(refund.amount, refund.currency),
        order_id=_order_of(refund.metadata),
        order_lookup=_payment_refs(refund.payment_intent, refund.charge),
    )


def _from_dispute(event: StripeEvent, delivery: Delivery, transition: Transition) -> Reading:
    dispute = Dispute.model_validate(event.data.object)
    return Effect(
        delivery=delivery,
        transition=transition,
        external_ref=dispute.id,
        amount=Money(dispute.amount, dispute.currency),
        order_id=_order_of(dispute.metadata),
        order_lookup=_payment_refs(dispute.payment_intent, dispute.charge),
    )


# The one map from Stripe event type to transition. An event becomes an effect only when it
# can name the provider object that *is* the effect; otherwise it is recorded as ignored:
# - payment_intent.succeeded, charge.succeeded/captured, invoice_payment.paid and legacy
#   invoice.paid/payment_succeeded all name the PaymentIntent: one payment, one effect.
# - basil-shaped invoice.paid/payment_succeeded name no payment at all, so they are ignored
#   (a second credit for the same payment would otherwise be possible).
# - refund.created/updated and charge.refund.updated name the refund: two partial refunds
#   are two effects. charge.refunded only carries the cumulative amount_refunded and cannot
#   say which refund fired it, so it is ignored.
# - charge.dispute.created names the dispute.
STRIPE_EVENTS: Final[Mapping[str, EventRule]] = {
    "payment_intent.succeeded": EventRule(Transition.PAID, _from_payment_intent),
    "charge.succeeded": EventRule(Transition.PAID, _from_charge),
    "charge.captured": EventRule(Transition.PAID, _from_charge),
    "invoice_payment.paid": EventRule(Transition.PAID, _from_invoice_payment),
    "invoice.paid": EventRule(Transition.PAID, _from_legacy_invoice),
    "invoice.payment_succeeded": EventRule(Transition.PAID, _from_legacy_invoice),
    "refund.created": EventRule(Transition.REFUNDED, _from_refund),
    "refund.updated": EventRule(Transition.REFUNDED, _from_refund),
    "charge.refund.updated": EventRule(Transition.REFUNDED, _from_refund),
    "charge.dispute.created": EventRule(Transition.DISPUTED, _from_dispute),
}

NAMED_NO_EFFECT: Final[Mapping[str, str]] = {
    "charge.refunded": "carries only the cumulative amount_refunded; refund.* names the refund",
}


def interpret(raw_body: str) -> tuple[Interpretation]:
    return (_interpret_one(raw_body),)


def _interpret_one(raw_body: str) -> Interpretation:
    try:
        event = StripeEvent.model_validate_json(raw_body)
    except ValidationError as exc:
        raise MalformedEventError(f"not a Stripe event: {_summary(exc)}") from exc
    delivery = Delivery(PROVIDER, event.id, event.type, event.created)
    rule = STRIPE_EVENTS.get(event.type)
    if rule is None:
        reason = NAMED_NO_EFFECT.get(event.type, "event type has no mapped effect")
        return NoEffect(delivery, reason)
    try:
        return rule.read(event, delivery, rule.transition)
    except ValidationError as exc:
        raise MalformedEventError(f"{event.type} {event.id}: {_summary(exc)}") from exc


def _summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
        for error in exc.errors()[:5]
    )
