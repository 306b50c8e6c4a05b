"""Stripe: which events are money movements, and which object each movement *is*.

Each webhook endpoint keeps its own API version, so legacy and current (basil and later)
payload shapes arrive side by side; the models accept both, follow Stripe's nullability, and
read only what they need.

Long on purpose: Stripe's objects, its event map and the rules per API version belong
together; split, a reader would follow one event through several files.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Any, ClassVar, Final, TypeVar, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from functions.shared.domain import (
    VIA_STATEMENT,
    Binding,
    Delivery,
    Effect,
    Interpretation,
    Money,
    NoEffect,
    Transition,
    checked_order_id,
    movement,
)
from functions.shared.errors import MalformedEventError, UmavezError
from functions.shared.money import InvalidFieldError
from functions.shared.provider_fields import (
    Currency,
    EpochSeconds,
    MinorUnits,
    refused,
)
from functions.shared.providers import stripe_thin

PROVIDER: Final = "stripe"
OBJECT: Final = "data.object"  # where each field this module names lives in the event
ORDER_METADATA_KEY: Final = "order_id"
# From this API version Stripe sends refund.* events for card refunds too; before it, a card
# refund arrived only as charge.refunded (refunds embedded until 2022-11-15, then not at all).
REFUND_EVENTS_FOR_CARDS_SINCE: Final = "2024-10-28"
REFUNDS_EMBEDDED_UNTIL: Final = "2022-11-15"
# The API versions this map was checked against, field by field (docs/ledger.md, "Versions
# read"; https://docs.stripe.com/changelog/clover, https://docs.stripe.com/changelog/dahlia):
# clover and dahlia changed no field it reads. Dated versions before acacia are read as the
# notes above say. A delivery on a version newer than the newest is read only where every
# field it needs is there with the type known (`ApiVersionFieldError` otherwise).
KNOWN_API_VERSIONS: Final = (
    "2024-09-30.acacia",
    "2024-10-28.acacia",
    "2024-11-20.acacia",
    "2024-12-18.acacia",
    "2025-01-27.acacia",
    "2025-02-24.acacia",
    "2025-03-31.basil",
    "2025-04-30.basil",
    "2025-05-28.basil",
    "2025-06-30.basil",
    "2025-07-30.basil",
    "2025-08-27.basil",
    "2025-09-30.clover",
    "2025-10-29.clover",
    "2025-11-17.clover",
    "2025-12-15.clover",
    "2026-01-28.clover",
    "2026-02-25.clover",
    "2026-03-25.dahlia",
    "2026-04-22.dahlia",
    "2026-05-27.dahlia",
    "2026-06-24.dahlia",
)
NEWEST_KNOWN_API_VERSION: Final = KNOWN_API_VERSIONS[-1]
REFUND_COUNTS: Final = "succeeded"
REFUND_REVERSED: Final = frozenset({"failed", "canceled"})
INQUIRY_STATUSES: Final = frozenset({"warning_needs_response", "warning_under_review"})
CLOSED_STATUSES: Final = frozenset({"won", "lost", "warning_closed"})

# Lists the refunds of a charge (GET /v1/refunds?charge=…), every page.
RefundSource = Callable[[str], Sequence[Mapping[str, Any]]]


class StripeApiNotConfiguredError(UmavezError):
    """A charge.refunded on an API version that names no refund, and no API key to read them:
    the record goes to the DLQ (alarmed) rather than losing the refunds."""


class ApiVersionFieldError(InvalidFieldError):
    """A delivery on an API version newer than any this map was checked against, a field it
    needs absent or not of the type known: read anyway it could be misread (a renamed amount
    read as none), so it is refused and dead-lettered, naming the version and the field."""

    def __init__(self, field: str, problem: str, api_version: str) -> None:
        super().__init__(
            field,
            f"{problem} (API {api_version}, newer than the newest umavez reads, "
            f"{NEWEST_KNOWN_API_VERSION})",
        )
        self.api_version = api_version


def _empty_if_null(value: object) -> object:
    return {} if value is None else value


Metadata = Annotated[dict[str, str], BeforeValidator(_empty_if_null)]


class _StripeModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    # Fields Stripe leaves out of an object of a known version (the rest it sends, null or
    # not): on a newer, unknown version every other field must be there to be read.
    MAY_BE_ABSENT: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def needed(cls, payload: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(name for name in cls.model_fields if name not in cls.MAY_BE_ABSENT)


class StripeEventData(_StripeModel):
    object: dict[str, Any]
    previous_attributes: dict[str, Any] | None = None


class StripeEvent(_StripeModel):
    id: str = Field(pattern=r"^evt_\w+$")
    object: str = Field(pattern=r"^event$")
    type: str = Field(min_length=1)
    created: EpochSeconds
    api_version: str | None = None
    livemode: bool = False
    data: StripeEventData

    def api_version_before(self, version: str) -> bool:
        """API versions are dates (`2023-10-16`, `2024-10-28.acacia`): compare the date."""
        return self.api_version is None or self.api_version[:10] < version

    @property
    def api_version_unknown(self) -> bool:
        """Newer than every version the map was checked against (a statement line, read in
        the key's version, names none)."""
        return (
            self.api_version is not None and self.api_version[:10] > NEWEST_KNOWN_API_VERSION[:10]
        )


class PaymentIntent(_StripeModel):
    id: str = Field(pattern=r"^pi_\w+$")
    amount_received: MinorUnits
    # What was authorized: more than `amount_received` while captures remain or the rest was
    # released.
    amount: MinorUnits | None = None
    currency: Currency
    metadata: Metadata = Field(default_factory=dict)
    receipt_email: str | None = None
    latest_charge: str | None = None
    status: str | None = None

    MAY_BE_ABSENT: ClassVar[frozenset[str]] = frozenset({"receipt_email"})  # moves no money


class BillingDetails(_StripeModel):
    email: str | None = None


class Refund(_StripeModel):
    id: str = Field(pattern=r"^(re|pyr)_\w+$")
    amount: MinorUnits
    currency: Currency
    status: str | None = None
    created: EpochSeconds | None = None
    metadata: Metadata = Field(default_factory=dict)
    charge: str | None = None
    payment_intent: str | None = None


class RefundList(_StripeModel):
    data: list[Refund] = Field(default_factory=list)
    has_more: bool = False


class Charge(_StripeModel):
    id: str = Field(pattern=r"^(ch|py)_\w+$")
    amount: MinorUnits
    amount_captured: MinorUnits | None = None
    captured: bool
    currency: Currency
    metadata: Metadata = Field(default_factory=dict)
    payment_intent: str | None = None
    receipt_email: str | None = None
    billing_details: BillingDetails | None = None
    refunds: RefundList | None = None

    # Refunds are embedded only before 2022-11-15 (or when expanded); an e-mail moves no money.
    MAY_BE_ABSENT: ClassVar[frozenset[str]] = frozenset(
        {"refunds", "receipt_email", "billing_details"}
    )

    @property
    def captured_amount(self) -> tuple[int, str]:
        """What moved, and the field it was read from. Older API versions report
        amount_captured 0 (or omit it) on a captured charge: the charge's amount moved."""
        if self.amount_captured:
            return self.amount_captured, "amount_captured"
        return self.amount, "amount"

    @property
    def payment(self) -> str:
        # A charge of a PaymentIntent is that payment; only a bare Charges-API charge is its own.
        return self.payment_intent or self.id


class BalanceTransaction(_StripeModel):
    """A dispute's money as Stripe moved it: negative withdrawn (`dispute`), positive given
    back (`dispute_reversal`)."""

    amount: int = Field(strict=True)
    currency: str | None = None
    reporting_category: str | None = None


class Dispute(_StripeModel):
    id: str = Field(pattern=r"^(dp|du)_\w+$")
    amount: MinorUnits
    currency: Currency
    status: str | None = None
    created: EpochSeconds | None = None
    metadata: Metadata = Field(default_factory=dict)
    charge: str | None = None
    payment_intent: str | None = None
    balance_transactions: list[BalanceTransaction] = Field(default_factory=list)

    @property
    def _moved(self) -> list[int]:
        """Its balance transactions' amounts in the dispute's own currency: those settled in
        another currency (the account's) are not the order's money."""
        return [
            t.amount
            for t in self.balance_transactions
            if (t.currency or self.currency).lower() == self.currency.lower()
        ]

    @property
    def withdrawn(self) -> int:
        """What the dispute took from the merchant: its balance transactions' withdrawals, or
        (an event shaped without them) the disputed amount."""
        taken = -sum(amount for amount in self._moved if amount < 0)
        return taken or self.amount

    @property
    def reinstated(self) -> int:
        return sum(amount for amount in self._moved if amount > 0)


class SubscriptionDetails(_StripeModel):
    metadata: Metadata = Field(default_factory=dict)
    subscription: str | None = None


class InvoiceParent(_StripeModel):
    subscription_details: SubscriptionDetails | None = None


class LegacyInvoice(_StripeModel):
    """An invoice as API versions up to 2024 (acacia) shape it: it names its PaymentIntent."""

    id: str = Field(pattern=r"^in_\w+$")
    amount_paid: MinorUnits
    currency: Currency
    metadata: Metadata = Field(default_factory=dict)
    payment_intent: str | None = None
    charge: str | None = None
    customer_email: str | None = None
    subscription: str | None = None
    subscription_details: SubscriptionDetails | None = None

    @property
    def order_id(self) -> str | None:
        details = self.subscription_details
        return _order_of(self.metadata) or (
            _order_of(details.metadata, "subscription_details.metadata") if details else None
        )


class BasilInvoice(_StripeModel):
    """An invoice from API 2025-03-31 (basil) on: no payment on it; the order is on the invoice
    or, for a subscription, in `parent.subscription_details.metadata`."""

    id: str = Field(pattern=r"^in_\w+$")
    metadata: Metadata = Field(default_factory=dict)
    parent: InvoiceParent | None = None

    @property
    def subscription(self) -> SubscriptionDetails | None:
        return self.parent.subscription_details if self.parent else None

    @property
    def order_id(self) -> str | None:
        details = self.subscription
        return _order_of(self.metadata) or (
            _order_of(details.metadata, "parent.subscription_details.metadata") if details else None
        )


class CustomerDetails(_StripeModel):
    email: str | None = None


class CheckoutSession(_StripeModel):
    """The order of a Checkout payment lives here, not on its PaymentIntent."""

    id: str = Field(pattern=r"^cs_\w+$")
    client_reference_id: str | None = None
    metadata: Metadata = Field(default_factory=dict)
    payment_intent: str | None = None
    invoice: str | None = None
    subscription: str | None = None
    payment_status: str | None = None
    amount_total: MinorUnits | None = None
    currency: Currency | None = None
    customer_details: CustomerDetails | None = None

    MAY_BE_ABSENT: ClassVar[frozenset[str]] = frozenset({"customer_details"})  # moves no money

    @property
    def order_id(self) -> str | None:
        # metadata.order_id is the convention every other object follows here (and what a
        # PaymentIntent would carry); client_reference_id, often a cart id, comes second.
        return _order_of(self.metadata) or checked_order_id(
            self.client_reference_id, f"{OBJECT}.client_reference_id"
        )


class InvoicePaymentTarget(_StripeModel):
    type: str
    payment_intent: str | None = None
    charge: str | None = None

    @classmethod
    def needed(cls, payload: Mapping[str, Any]) -> tuple[str, ...]:
        # Stripe sends only the field its `type` names; a type of no known meaning needs a
        # PaymentIntent all the same, so it is refused rather than read as no payment.
        kind = payload.get("type")
        return ("type", kind if kind in ("payment_intent", "charge") else "payment_intent")


class InvoicePayment(_StripeModel):
    """Basil's link between an invoice and the payment that paid it."""

    id: str = Field(pattern=r"^inpay_\w+$")
    amount_paid: MinorUnits | None = None
    currency: Currency
    invoice: str
    status: str | None = None
    payment: InvoicePaymentTarget


Readings = tuple[Interpretation, ...]


def _model_in(annotation: Any) -> type[_StripeModel] | None:
    """The Stripe model a field holds (itself, in a list or optional), if any."""
    if isinstance(annotation, type) and issubclass(annotation, _StripeModel):
        return annotation
    for argument in get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _first_absent(model: type[_StripeModel], value: object, path: str) -> str | None:
    """The path of the first field `model` needs that `value` lacks, nested objects too."""
    if isinstance(value, list):
        for n, item in enumerate(value):
            if (absent := _first_absent(model, item, f"{path}.{n}")) is not None:
                return absent
        return None
    if not isinstance(value, Mapping):
        return None  # null, or an id: its type is pydantic's to judge
    for name in model.needed(value):
        at = f"{path}.{name}"
        if name not in value:
            return at
        field = model.model_fields.get(name)
        nested = _model_in(field.annotation) if field is not None else None
        if nested is not None and (absent := _first_absent(nested, value[name], at)) is not None:
            return absent
    return None


_Model = TypeVar("_Model", bound=_StripeModel)


def _read(model: type[_Model], event: StripeEvent) -> _Model:
    """The event's object as `model`; on an API version newer than the known ones, only if
    every field the model needs is there (absent, it is refused, never read as a default)."""
    if event.api_version_unknown and event.api_version is not None:
        absent = _first_absent(model, event.data.object, OBJECT)
        if absent is not None:
            raise ApiVersionFieldError(absent, "absent", event.api_version)
    return model.model_validate(event.data.object)


@dataclass(frozen=True)
class EventRule:
    read: Callable[[StripeEvent, Delivery], Readings]


def _order_of(metadata: Mapping[str, str], where: str = "metadata") -> str | None:
    """The order a metadata names, checked; `where` is the metadata's path in the object."""
    return checked_order_id(metadata.get(ORDER_METADATA_KEY), f"{OBJECT}.{where}.order_id")


def _money(minor: int, currency: str, field: str, what: str) -> Money:
    return movement(minor, currency, f"{OBJECT}.{field}", what)


def _payment_refs(*object_ids: str | None) -> tuple[str, ...]:
    return tuple(dict.fromkeys(object_id for object_id in object_ids if object_id))


# -- payments ------------------------------------------------------------------------------


def _from_payment_intent(event: StripeEvent, delivery: Delivery) -> Readings:
    intent = _read(PaymentIntent, event)
    return (
        Effect(
            delivery=delivery,
            transition=Transition.PAID,
            external_ref=intent.id,
            amount=_money(intent.amount_received, intent.currency, "amount_received", "payment"),
            order_id=_order_of(intent.metadata),
            # Without metadata (Checkout, invoices) its order is what bound it.
            order_lookup=(intent.id,),
            registers=_payment_refs(intent.id, intent.latest_charge),
            recipient=intent.receipt_email,
            payment=intent.id,
            captured_so_far=True,
            partly_captured=intent.amount is not None and intent.amount_received < intent.amount,
        ),
    )


def _from_charge(event: StripeEvent, delivery: Delivery) -> Readings:
    charge = _read(Charge, event)
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
            amount=_money(captured, charge.currency, field, "payment"),
            order_id=_order_of(charge.metadata),
            order_lookup=_payment_refs(charge.payment_intent, charge.id),
            registers=_payment_refs(charge.payment_intent, charge.id),
            recipient=email,
            payment=charge.payment,
            # Only `amount_captured` grows with each capture; `amount` is what was authorized.
            captured_so_far=field == "amount_captured",
            partly_captured=field == "amount_captured" and captured < charge.amount,
        ),
    )


def _from_capture_so_far(event: StripeEvent, delivery: Delivery) -> Readings:
    """A capture of a payment captured in parts (multicapture): Stripe updates the charge at
    each one (`charge.updated`, `amount_captured` against its `previous_attributes`), and the
    PaymentIntent after each one that is not final (`payment_intent.amount_capturable_updated`,
    `amount_received` so far). Each says what was captured in all: the payment's entries are
    topped up to it. Any other change of either moves no money."""
    previous = event.data.previous_attributes or {}
    if event.type == "charge.updated":
        if "amount_captured" not in previous:
            return (NoEffect(delivery, "charge updated, nothing captured: no money moved"),)
        return _from_charge(event, delivery)
    if not event.data.object.get("amount_received"):
        return (NoEffect(delivery, "authorized, nothing captured yet: no money moved"),)
    return _from_payment_intent(event, delivery)


def _from_invoice(event: StripeEvent, delivery: Delivery) -> Readings:
    if "payment_intent" not in event.data.object:
        return (_basil_invoice_binding(_read(BasilInvoice, event), delivery),)
    invoice = _read(LegacyInvoice, event)
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
            amount=_money(invoice.amount_paid, invoice.currency, "amount_paid", "payment"),
            order_id=invoice.order_id,
            order_lookup=_payment_refs(invoice.payment_intent, invoice.id, invoice.subscription),
            registers=_payment_refs(invoice.payment_intent, invoice.charge, invoice.id),
            recipient=invoice.customer_email,
            payment=invoice.payment_intent,
        ),
    )


def _basil_invoice_binding(invoice: BasilInvoice, delivery: Delivery) -> Interpretation:
    """Basil invoices name no payment: the payment is applied from invoice_payment.paid, which
    finds its order through the invoice bound here."""
    details = invoice.subscription
    subscription = details.subscription if details else None
    if _order_of(invoice.metadata):
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
            _payment_refs(invoice.id, subscription),
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


def _from_invoice_payment(event: StripeEvent, delivery: Delivery) -> Readings:
    link = _read(InvoicePayment, event)
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
            amount=_money(link.amount_paid, link.currency, "amount_paid", "payment"),
            order_lookup=_payment_refs(payment, link.invoice),
            registers=_payment_refs(payment),
            payment=payment,
        ),
    )


# -- Checkout: the session knows the order ---------------------------------------------------


def _from_checkout_session(event: StripeEvent, delivery: Delivery) -> Readings:
    """completed / async_payment_succeeded / async_payment_failed / expired.

    The session binds its PaymentIntent (or invoice, subscription) to the order from
    `client_reference_id` or `metadata.order_id`. Paid, it is the payment itself, keyed like
    the PaymentIntent's own events; unpaid (boleto, Pix) it only binds, and the payment comes
    with async_payment_succeeded (or the PaymentIntent's events, which now find the order).
    """
    session = _read(CheckoutSession, event)
    if event.type == "checkout.session.expired":
        return (NoEffect(delivery, f"checkout session {session.id} expired unpaid"),)
    order_id = session.order_id
    if order_id is None:
        return (NoEffect(delivery, f"checkout session {session.id} names no order"),)
    objects = _payment_refs(
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
            amount=_money(session.amount_total, session.currency, "amount_total", "payment"),
            order_id=order_id,
            registers=objects,
            recipient=session.customer_details.email if session.customer_details else None,
            payment=intent,
        ),
    )


# -- refunds -------------------------------------------------------------------------------


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
        order_lookup=_payment_refs(refund.payment_intent, refund.charge),
        order_from_metadata=True,
        payment=refund.payment_intent or refund.charge,
    )


def _from_refund(event: StripeEvent, delivery: Delivery) -> Readings:
    return (_refund_entry(_read(Refund, event), delivery),)


def _refund_entries(
    charge: Charge, refunds: list[tuple[Refund, str]], delivery: Delivery
) -> Readings:
    return tuple(
        _refund_entry(
            refund.model_copy(
                update={"payment_intent": refund.payment_intent or charge.payment_intent}
            ),
            replace(delivery, created=refund.created or delivery.created),
            order_id=_order_of(charge.metadata),
            at=at,
        )
        # Stripe lists newest first; applied oldest first, so none is needlessly late.
        for refund, at in sorted(refunds, key=lambda listed: listed[0].created or 0)
    ) or (NoEffect(delivery, "charge.refunded lists no refund"),)


def _listed_refunds(source: RefundSource, charge: str) -> Iterator[tuple[Refund, str]]:
    """The charge's refunds as the refunds API lists them, each with its path there."""
    for n, listed in enumerate(source(charge)):
        at = f"refunds_api.data.{n}"
        try:
            yield Refund.model_validate(listed), at
        except ValidationError as exc:
            raise refused(exc, at) from exc


def _all_settled(refunds: list[tuple[Refund, str]]) -> bool:
    return all(r.status == REFUND_COUNTS or r.status in REFUND_REVERSED for r, _ in refunds)


def _with_recheck(
    charge: Charge, refunds: list[tuple[Refund, str]], readings: Readings
) -> Readings:
    """A refund still pending when its charge.refunded was read through the API: before acacia,
    only `charge.refund.updated` says when it succeeds, and an endpoint need not subscribe it.
    The charge is read again later (the waiting function re-drives the delivery) until none of
    its refunds is pending, so the refund counts whichever events the endpoint subscribed."""
    if _all_settled(refunds):
        return readings
    return tuple(
        replace(reading, recheck=charge.id) if isinstance(reading, NoEffect) else reading
        for reading in readings
    )


class Interpreter:
    """Stripe's map; `refunds` reads a charge's refunds when an event names none of them,
    `related` the object a thin event names (functions/shared/providers/stripe_thin.py)."""

    def __init__(
        self,
        refunds: RefundSource | None = None,
        related: stripe_thin.RelatedObjectSource | None = None,
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
        if isinstance(payload, dict) and stripe_thin.is_thin(payload):
            return self._thin(stripe_thin.notification_of(payload))
        try:
            event = StripeEvent.model_validate(payload)
        except ValidationError as exc:
            raise refused(exc, what="not a Stripe event") from exc
        return self._read(event, Delivery(PROVIDER, event.id, event.type, event.created))

    def _thin(self, notification: stripe_thin.EventNotification) -> Readings:
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
        snapshot = stripe_thin.snapshot_of(
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
        charge = _read(Charge, event)
        embedded = charge.refunds
        if embedded is not None and not embedded.has_more:
            # Each refund with the path its fields are named by in a dead letter's reason
            refunds = [(r, f"{OBJECT}.refunds.data.{n}") for n, r in enumerate(embedded.data)]
            if self._refunds is not None and not _all_settled(refunds):
                # The snapshot holds a refund still pending, and a re-drive of this delivery
                # would read the same snapshot: the refunds are read from the API instead, now
                # and at each re-check, so its success counts whichever events are subscribed.
                refunds = list(_listed_refunds(self._refunds, charge.id))
                return _with_recheck(charge, refunds, _refund_entries(charge, refunds, delivery))
        elif not event.api_version_before(REFUND_EVENTS_FOR_CARDS_SINCE):
            return (
                NoEffect(
                    delivery,
                    "charge.refunded names no refund on this API version; "
                    "refund.created/updated/failed name each one",
                ),
            )
        elif self._refunds is not None:
            refunds = list(_listed_refunds(self._refunds, charge.id))
            readings = _refund_entries(charge, refunds, delivery)
            return _with_recheck(charge, refunds, readings)
        else:
            raise StripeApiNotConfiguredError(
                f"charge.refunded {event.id} (API {event.api_version}) names no refund and no "
                "Stripe API key is configured to read them; set the stripe/api-key secret"
            )
        return _refund_entries(charge, refunds, delivery)


# -- disputes ------------------------------------------------------------------------------


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
        amount=_money(
            dispute.amount if amount is None else amount, dispute.currency, "amount", "dispute"
        ),
        order_id=_order_of(dispute.metadata),
        order_lookup=_payment_refs(dispute.payment_intent, dispute.charge),
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


def _from_dispute_opened(event: StripeEvent, delivery: Delivery) -> Readings:
    """created / funds_withdrawn: funds withdrawn, or an inquiry (no funds moved)."""
    dispute = _read(Dispute, event)
    if dispute.status == "prevented":
        return _prevented(dispute, delivery)
    if dispute.status in CLOSED_STATUSES:
        return _from_dispute_closed(event, delivery)
    return _openings(dispute, delivery)


def _from_dispute_updated(event: StripeEvent, delivery: Delivery) -> Readings:
    """Only an inquiry escalating into a dispute moves money: the inquiry closes, funds go."""
    dispute = _read(Dispute, event)
    before = (event.data.previous_attributes or {}).get("status")
    escalated = not _is_inquiry(dispute) and dispute.status not in CLOSED_STATUSES | {"prevented"}
    if isinstance(before, str) and before in INQUIRY_STATUSES and escalated:
        inquiry = dispute.model_copy(update={"status": before})
        return (
            _dispute_entry(inquiry, delivery, Transition.INQUIRY_OPENED, opened=True),
            *_openings(dispute, delivery),
        )
    return (NoEffect(delivery, f"dispute {dispute.id} updated to {dispute.status!r}: no money"),)


def _from_dispute_closed(event: StripeEvent, delivery: Delivery) -> Readings:
    """closed / funds_reinstated: the verdict, after the opening it settles.

    The verdict is the dispute's status, never the event's name: Stripe sends
    `funds_reinstated` for a dispute it decided against the merchant on a partially refunded
    charge (status `lost`), giving back the refunded part. What was withdrawn and given back
    is what the dispute's balance transactions say."""
    dispute = _read(Dispute, event)
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
    "payment_intent.succeeded": EventRule(_from_payment_intent),
    "charge.succeeded": EventRule(_from_charge),
    "charge.captured": EventRule(_from_charge),
    "charge.updated": EventRule(_from_capture_so_far),
    "payment_intent.amount_capturable_updated": EventRule(_from_capture_so_far),
    "invoice_payment.paid": EventRule(_from_invoice_payment),
    "invoice.paid": EventRule(_from_invoice),
    "invoice.payment_succeeded": EventRule(_from_invoice),
    "checkout.session.completed": EventRule(_from_checkout_session),
    "checkout.session.async_payment_succeeded": EventRule(_from_checkout_session),
    "checkout.session.async_payment_failed": EventRule(_from_checkout_session),
    "checkout.session.expired": EventRule(_from_checkout_session),
    "refund.created": EventRule(_from_refund),
    "refund.updated": EventRule(_from_refund),
    "refund.failed": EventRule(_from_refund),
    "charge.refund.updated": EventRule(_from_refund),
    "charge.dispute.created": EventRule(_from_dispute_opened),
    "charge.dispute.funds_withdrawn": EventRule(_from_dispute_opened),
    "charge.dispute.updated": EventRule(_from_dispute_updated),
    "charge.dispute.funds_reinstated": EventRule(_from_dispute_closed),
    "charge.dispute.closed": EventRule(_from_dispute_closed),
}

# The updates whose meaning is what `data.previous_attributes` says changed.
READS_PREVIOUS_ATTRIBUTES: Final = frozenset({"charge.updated", "charge.dispute.updated"})

NAMED_NO_EFFECT: Final[Mapping[str, str]] = {
    "payment_intent.created": "a PaymentIntent was created; no money moved",
    "charge.pending": "a charge is pending; it counts once it succeeds",
}


# -- the balance: Stripe's own books ---------------------------------------------------------

# A balance transaction's `reporting_category` -> the event whose map reads its source (the
# object it moved, expanded with `expand[]=data.source`) as that movement: the statement books
# the same effects, under the same keys, as the deliveries announcing it. Each source is read
# as it is now (a dispute already decided books its opening and its verdict; a refund that has
# failed since books nothing). Other categories (fees, payouts, transfers) move no order's money.
STATEMENT_MOVEMENTS: Final[Mapping[str, str]] = {
    "charge": "charge.captured",
    "refund": "refund.updated",
    "refund_failure": "refund.failed",
    "dispute": "charge.dispute.funds_withdrawn",
    "dispute_reversal": "charge.dispute.closed",
}
STATEMENT_LINE: Final = "balance_transaction"  # the event type prefix of a statement line


class StatementSourceMissingError(MalformedEventError):
    """A statement line whose moved object was not expanded: what it moved cannot be read."""


class ListedBalanceTransaction(_StripeModel):
    """One line of the balance (`GET /v1/balance_transactions`): amount, fee and net in the
    account's settlement currency; `source` the object that moved, expanded or its id."""

    id: str = Field(pattern=r"^txn_\w+$")
    amount: int = Field(strict=True)
    fee: int = Field(strict=True)
    net: int = Field(strict=True)
    currency: Currency
    created: EpochSeconds
    reporting_category: str
    type: str
    exchange_rate: float | None = None
    source: dict[str, Any] | str | None = None

    @property
    def source_object(self) -> Mapping[str, Any] | None:
        return self.source if isinstance(self.source, dict) else None

    @property
    def source_id(self) -> str | None:
        if isinstance(self.source, dict):
            return str(self.source.get("id") or "") or None
        return self.source


def statement_readings(line: ListedBalanceTransaction) -> Readings:
    """What a balance transaction moved, read from its source exactly as the event that
    announces it is read; nothing for a line that moves no order's money."""
    delivery = Delivery(
        PROVIDER,
        line.id,
        f"{STATEMENT_LINE}.{line.reporting_category}",
        line.created,
        via=VIA_STATEMENT,
    )
    event_type = STATEMENT_MOVEMENTS.get(line.reporting_category)
    if event_type is None:
        return (NoEffect(delivery, f"{line.reporting_category!r} moves no order's money"),)
    source = line.source_object
    if source is None:
        raise StatementSourceMissingError(
            f"balance transaction {line.id} ({line.reporting_category}) came without its "
            "source expanded (list it with expand[]=data.source)"
        )
    # The map reads the event's object only: the line stands in for the event.
    event = StripeEvent.model_construct(
        id=line.id,
        object="event",
        type=event_type,
        created=line.created,
        api_version=None,
        data=StripeEventData(object=dict(source)),
    )
    try:
        return STRIPE_EVENTS[event_type].read(event, delivery)
    except ValidationError as exc:
        raise refused(exc, "source") from exc


def interpret(raw_body: str) -> Readings:
    """Stripe's map without the refunds API (tests and tools that need no network)."""
    return Interpreter()(raw_body)
