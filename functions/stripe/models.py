"""Stripe's objects as its event table reads them (functions/stripe/events.py), and the API
versions they were checked against.

Each webhook endpoint keeps its own API version, so legacy and current (basil and later)
payload shapes arrive side by side; the models accept both, follow Stripe's nullability, and
read only what they need.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Final

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from functions.shared.domain import checked_order_id
from functions.shared.errors import UmavezError
from functions.shared.money import InvalidFieldError
from functions.shared.provider_fields import Currency, EpochSeconds, MinorUnits

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


class StripeModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    # Fields Stripe leaves out of an object of a known version (the rest it sends, null or
    # not): on a newer, unknown version every other field must be there to be read.
    MAY_BE_ABSENT: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def needed(cls, payload: Mapping[str, Any]) -> tuple[str, ...]:
        return tuple(name for name in cls.model_fields if name not in cls.MAY_BE_ABSENT)


class StripeEventData(StripeModel):
    object: dict[str, Any]
    previous_attributes: dict[str, Any] | None = None


class StripeEvent(StripeModel):
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


class PaymentIntent(StripeModel):
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


class BillingDetails(StripeModel):
    email: str | None = None


class Refund(StripeModel):
    id: str = Field(pattern=r"^(re|pyr)_\w+$")
    amount: MinorUnits
    currency: Currency
    status: str | None = None
    created: EpochSeconds | None = None
    metadata: Metadata = Field(default_factory=dict)
    charge: str | None = None
    payment_intent: str | None = None


class RefundList(StripeModel):
    data: list[Refund] = Field(default_factory=list)
    has_more: bool = False


class Charge(StripeModel):
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


class BalanceTransaction(StripeModel):
    """A dispute's money as Stripe moved it: negative withdrawn (`dispute`), positive given
    back (`dispute_reversal`)."""

    amount: int = Field(strict=True)
    currency: str | None = None
    reporting_category: str | None = None


class Dispute(StripeModel):
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


class SubscriptionDetails(StripeModel):
    metadata: Metadata = Field(default_factory=dict)
    subscription: str | None = None


class InvoiceParent(StripeModel):
    subscription_details: SubscriptionDetails | None = None


class LegacyInvoice(StripeModel):
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
        return order_of(self.metadata) or (
            order_of(details.metadata, "subscription_details.metadata") if details else None
        )


class BasilInvoice(StripeModel):
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
        return order_of(self.metadata) or (
            order_of(details.metadata, "parent.subscription_details.metadata") if details else None
        )


class CustomerDetails(StripeModel):
    email: str | None = None


class CheckoutSession(StripeModel):
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
        return order_of(self.metadata) or checked_order_id(
            self.client_reference_id, f"{OBJECT}.client_reference_id"
        )


class InvoicePaymentTarget(StripeModel):
    type: str
    payment_intent: str | None = None
    charge: str | None = None

    @classmethod
    def needed(cls, payload: Mapping[str, Any]) -> tuple[str, ...]:
        # Stripe sends only the field its `type` names; a type of no known meaning needs a
        # PaymentIntent all the same, so it is refused rather than read as no payment.
        kind = payload.get("type")
        return ("type", kind if kind in ("payment_intent", "charge") else "payment_intent")


class InvoicePayment(StripeModel):
    """Basil's link between an invoice and the payment that paid it."""

    id: str = Field(pattern=r"^inpay_\w+$")
    amount_paid: MinorUnits | None = None
    currency: Currency
    invoice: str
    status: str | None = None
    payment: InvoicePaymentTarget


def order_of(metadata: Mapping[str, str], where: str = "metadata") -> str | None:
    """The order a metadata names, checked; `where` is the metadata's path in the object."""
    return checked_order_id(metadata.get(ORDER_METADATA_KEY), f"{OBJECT}.{where}.order_id")
