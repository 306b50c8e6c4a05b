"""The domain: transitions as signed ledger entries, deliveries, effects and the effect key.

Every money movement a provider reports is an entry with its own key: counted once, with a sign,
into one or more of the order's totals. The status a reader sees is `financial_status`, a pure
function of those totals; the lifecycle status kept on the order (the last transition in provider
time, guarded by the ordering token) only protects the lifecycle from regressing.
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from functions.shared import tables
from functions.shared.money import (
    CURRENCY_EXPONENTS,
    InvalidFieldError,
    InvalidMoneyError,
    checked_minor,
)


class Transition(StrEnum):
    PAID = "order.paid"
    PAYMENT_REVERSED = "order.payment_reversed"
    REFUNDED = "order.refunded"
    REFUND_REVERSED = "order.refund_reversed"
    INQUIRY_OPENED = "order.inquiry_opened"
    INQUIRY_CLOSED = "order.inquiry_closed"
    DISPUTED = "order.disputed"
    DISPUTE_WON = "order.dispute_won"
    DISPUTE_LOST = "order.dispute_lost"
    # A dispute closed by refunding the buyer (a Mercado Pago mediation the buyer wins): the
    # hold is released and the refund's own entry carries the money; neither won nor lost.
    DISPUTE_REFUNDED = "order.dispute_refunded"
    # Part of a lost dispute given back (Stripe reinstates what was refunded before the
    # cardholder disputed the whole charge): after the verdict, from the dispute's own
    # balance transactions.
    FUNDS_REINSTATED = "order.funds_reinstated"


class Total(StrEnum):
    """The order's running totals, in minor units of the order's currency."""

    PAID = "paid_total"
    REFUNDED = "refunded_total"
    DISPUTED = "disputed_total"  # withdrawn by disputes still open
    # Given back after a dispute: all of a won one, the part of a lost one the provider
    # reinstated.
    DISPUTE_WON = "dispute_won_total"
    DISPUTE_LOST = "dispute_lost_total"  # charged back for good
    INQUIRY = "inquiry_total"  # questioned by open inquiries: visible, not moved


@dataclass(frozen=True)
class TransitionRule:
    lifecycle_status: str
    postings: tuple[tuple[Total, int], ...]  # (total, sign): the entry's effect on the totals
    same_second_rank: int
    # Settles or reverses that entry of the same object: counts only if that entry counted.
    reverses: Transition | None = None


# Same-second tie rule: Stripe's `created` is whole seconds, so two events of one payment can
# carry the same timestamp. Within one second the transition later in a payment's life wins: a
# refund cannot precede its payment, nor a reversal its refund, nor a verdict its dispute.
TRANSITION_RULES: Final[dict[Transition, TransitionRule]] = {
    Transition.PAID: TransitionRule("paid", ((Total.PAID, 1),), 1),
    Transition.PAYMENT_REVERSED: TransitionRule(
        "payment_reversed", ((Total.PAID, -1),), 2, reverses=Transition.PAID
    ),
    Transition.REFUNDED: TransitionRule("refunded", ((Total.REFUNDED, 1),), 3),
    Transition.REFUND_REVERSED: TransitionRule(
        "refund_reversed", ((Total.REFUNDED, -1),), 4, reverses=Transition.REFUNDED
    ),
    Transition.INQUIRY_OPENED: TransitionRule("inquiry", ((Total.INQUIRY, 1),), 5),
    Transition.INQUIRY_CLOSED: TransitionRule(
        "inquiry_closed", ((Total.INQUIRY, -1),), 6, reverses=Transition.INQUIRY_OPENED
    ),
    # An inquiry escalating closes, then its dispute opens, in one second: the dispute last.
    Transition.DISPUTED: TransitionRule("disputed", ((Total.DISPUTED, 1),), 7),
    Transition.DISPUTE_WON: TransitionRule(
        "dispute_won",
        ((Total.DISPUTED, -1), (Total.DISPUTE_WON, 1)),
        8,
        reverses=Transition.DISPUTED,
    ),
    Transition.DISPUTE_LOST: TransitionRule(
        "dispute_lost",
        ((Total.DISPUTED, -1), (Total.DISPUTE_LOST, 1)),
        8,
        reverses=Transition.DISPUTED,
    ),
    Transition.DISPUTE_REFUNDED: TransitionRule(
        "dispute_refunded", ((Total.DISPUTED, -1),), 8, reverses=Transition.DISPUTED
    ),
    # Moves money the lost verdict booked as lost to what was given back; the verdict comes
    # first in every event that carries it (the same dispute object), and counts once.
    Transition.FUNDS_REINSTATED: TransitionRule(
        "dispute_lost", ((Total.DISPUTE_LOST, -1), (Total.DISPUTE_WON, 1)), 9
    ),
}
TIE_SLOTS: Final = 10
# A dispute has one verdict: won and lost share one key slot, so whichever counts first is the
# verdict and the other is a duplicate (a verdict announced again, by any event, never adds;
# what a lost one gives back is its own entry, order.funds_reinstated).
VERDICT_KEY: Final = "order.dispute_verdict"
KEY_SLOT: Final[dict[Transition, str]] = {
    Transition.DISPUTE_WON: VERDICT_KEY,
    Transition.DISPUTE_LOST: VERDICT_KEY,
    Transition.DISPUTE_REFUNDED: VERDICT_KEY,
}


class FinancialStatus(StrEnum):
    """What the totals say, first matching rule wins (see `financial_status`)."""

    UNPAID = "unpaid"
    DISPUTED = "disputed"
    DISPUTE_LOST = "dispute_lost"
    REFUNDED = "refunded"
    PARTIALLY_REFUNDED = "partially_refunded"
    DISPUTE_WON = "dispute_won"
    INQUIRY = "inquiry"
    PAID = "paid"


def financial_status(totals: Mapping[Total, int]) -> FinancialStatus:
    """The one reading of an order's totals that every reader (CLI, e-mail, EventBridge) shows.

    Money held by an open dispute dominates; then money lost to one; then refunds against what
    was paid (a partial refund is not "refunded"); then a won dispute or an open inquiry.
    """
    paid, refunded = totals[Total.PAID], totals[Total.REFUNDED]
    if totals[Total.DISPUTED] > 0:
        return FinancialStatus.DISPUTED
    if totals[Total.DISPUTE_LOST] > 0:
        return FinancialStatus.DISPUTE_LOST
    if refunded > 0:
        return FinancialStatus.REFUNDED if refunded >= paid else FinancialStatus.PARTIALLY_REFUNDED
    if paid <= 0:
        return FinancialStatus.UNPAID
    if totals[Total.DISPUTE_WON] > 0:
        return FinancialStatus.DISPUTE_WON
    if totals[Total.INQUIRY] > 0:
        return FinancialStatus.INQUIRY
    return FinancialStatus.PAID


class Outcome(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    STALE = "stale"
    # A reversal of an entry that never counted (a refund that failed before it succeeded, or
    # whose success arrives later): both keys are reserved so that neither ever counts.
    VOIDED = "voided"
    # A delivery that moved no money but told which order provider objects belong to (a
    # Checkout Session paid later by boleto, a subscription invoice).
    BOUND = "bound"
    # An event naming a payment for another order than the one it is bound to: not applied.
    CONFLICT = "conflict"
    # No order bound to the entry's objects yet: parked until its binding is written.
    WAITING = "waiting"
    IGNORED = "ignored"
    UNROUTABLE = "unroutable"
    RETRIED = "retried"
    FAILED = "failed"


COUNTED_OUTCOMES: Final = frozenset({Outcome.APPLIED.value, Outcome.STALE.value})


@dataclass(frozen=True)
class Money:
    """Integer minor units (5000 = BRL 50.00, 1234 = JPY 1234) with a lower-case ISO code.

    Only a movement is Money: a positive amount within the bound, in a currency of the table.
    The adapters check each field first, naming it; this is the last word, so no entry with
    money that is not money can be built, whichever path made it.
    """

    minor: int
    currency: str

    def __post_init__(self) -> None:
        if self.currency not in CURRENCY_EXPONENTS:
            raise InvalidMoneyError("currency", f"{self.currency!r} is not a canonical ISO code")
        if checked_minor(self.minor, self.currency, "amount") == 0:
            raise InvalidMoneyError("amount", "zero is not a movement")


def movement(minor: int, currency: str, field: str, what: str) -> Money:
    """An entry's money, refusing (naming `field`) an amount past the bound or of zero: zero is
    not a payment, a refund or a dispute. Events where zero is a legitimate non-event (an
    invoice with nothing to pay) are told apart by their adapter before this."""
    if checked_minor(minor, currency, field) == 0:
        raise InvalidMoneyError(field, f"zero is not a {what}")
    return Money(minor, currency)


class InvalidOrderIdError(InvalidFieldError):
    """An order id no order can have: it would be booked as a new order of its own."""


# The longest order id: what Stripe lets a metadata value hold (500 characters; Checkout's
# client_reference_id takes 200, Mercado Pago's external_reference 256). Even at 4 bytes a
# character, `ORDER#` and 500 characters stay under DynamoDB's 2,048-byte partition key.
MAX_ORDER_ID_CHARS: Final = 500
# An order id that begins like a key of the ledger is that key echoed back (copied from the
# table by an integration): booked, it would be a second order `ORDER#ORDER#x` beside `x`.
# A `#` elsewhere is an order number's (`PO#1042`): keys are prefixes, never split on it.
LEDGER_KEY_PREFIXES: Final = (
    tables.order_pk(""),
    tables.EFFECT_SORT_PREFIX,
    tables.ref_pk("", "").rstrip("#") + "#",
    tables.delivery_pk("", "").rstrip("#") + "#",
)
# Control characters (NUL, the unit separator the effect key joins its parts with, C1) and
# lone surrogates (which no store can encode): never part of an id someone typed.
_NOT_IN_IDS: Final = frozenset({"Cc", "Cs"})


def checked_order_id(value: object, field: str) -> str | None:
    """The order id a payload names, as sent, or None when it names none (absent or empty:
    providers send "" for a reference never set). Anything else that cannot be an order's id
    is refused, naming `field`, rather than booked as an order of its own."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidOrderIdError(field, f"{type(value).__name__} is not an order id")
    shown = repr(value) if len(value) <= 40 else f"{value[:37]!r}..."
    if not value.strip():
        raise InvalidOrderIdError(field, "is blank")
    if value != value.strip():
        raise InvalidOrderIdError(field, f"{shown} has leading or trailing spaces")
    if len(value) > MAX_ORDER_ID_CHARS:
        raise InvalidOrderIdError(
            field, f"is {len(value)} characters long; at most {MAX_ORDER_ID_CHARS}"
        )
    if any(unicodedata.category(ch) in _NOT_IN_IDS for ch in value):
        raise InvalidOrderIdError(field, f"{shown} holds a control character")
    if value.startswith(LEDGER_KEY_PREFIXES):
        raise InvalidOrderIdError(field, f"{shown} is a ledger key, not an order id")
    return value


# The longest provider id (an event's, or an object's: a payment, a refund, a dispute) the
# ledger keys: `DELIVERY#provider#id`, `REF#provider#id` and the parked records' sort key
# `provider#id` must stay under DynamoDB's key limits (2,048 bytes a partition key, 1,024 a
# sort key). Stripe tells integrations to allow ids of up to 255 characters; an entry's ref
# adds a prefix or suffix of its own (`refund:`, `:dispute`): 512 bytes leaves room for both. A
# longer one is refused by name, not sent to DynamoDB to fail as an error nobody can read.
MAX_PROVIDER_ID_BYTES: Final = 512


def check_provider_id(value: str, field: str) -> None:
    size = len(value.encode("utf-8"))
    if size > MAX_PROVIDER_ID_BYTES:
        raise InvalidFieldError(
            field, f"is {size} bytes long ({value[:24]!r}...); at most {MAX_PROVIDER_ID_BYTES}"
        )


# How a movement reached the ledger: a delivery of the provider's (a webhook, a resend, a
# replay of its events), or the provider's own books read back (its statement), which book
# what the deliveries never brought under the same keys.
VIA_DELIVERY: Final = "delivery"
VIA_STATEMENT: Final = "statement"


@dataclass(frozen=True)
class Delivery:
    """What a delivery is, whatever it announces; the event id is audit, never the key. A
    movement read from the provider's statement is one too: its event id is the statement
    line's (a Stripe balance transaction's `txn_…`)."""

    provider: str
    event_id: str
    event_type: str
    created: int
    via: str = VIA_DELIVERY

    def __post_init__(self) -> None:
        check_provider_id(self.event_id, "event id")


@dataclass(frozen=True)
class Effect:
    """A money movement announced by a delivery.

    `external_ref` names the provider object that *is* the movement (the payment, the refund,
    the dispute), identified the same way whichever event type announces it. `payment` names the
    payment it belongs to (the ordering guard orders the events of one payment).
    `order_id` comes from the object's own metadata; when absent, `order_lookup` lists the
    provider objects (e.g. the refunded payment) whose known order this effect belongs to.
    `registers` lists the provider objects that later effects may look their order up by.
    """

    delivery: Delivery
    transition: Transition
    external_ref: str
    amount: Money
    order_id: str | None = None
    order_lookup: tuple[str, ...] = ()
    registers: tuple[str, ...] = ()
    recipient: str | None = None
    payment: str | None = None
    # The order was read from metadata that can disagree with the payment's binding (Stripe
    # copies metadata between objects: a charge keeps what its PaymentIntent said at
    # confirmation): a movement of a payment bound to another order goes to that order.
    order_from_metadata: bool = False
    # For a settling entry read from a provider's *current* state (Mercado Pago re-reads the
    # payment): when the entry it settles never counted there is nothing to settle, so it is
    # ignored rather than voided.
    only_if_open: bool = False
    # What the adapter had to decide about this entry, kept on its key and logged (an approved
    # Mercado Pago payment without its approval date is stamped at its creation).
    note: str | None = None
    # False for an entry that only accompanies its delivery's movement (a Stripe dispute
    # closing the inquiry it may have been): voided, it writes no audit of the delivery, whose
    # audit and trace say what the movement did.
    audited: bool = True
    # The amount is what the payment has captured so far (a PaymentIntent's
    # `amount_received`, a charge's `amount_captured`), which grows with each capture of a
    # multicaptured or over-captured payment: a larger amount than the payment's entries
    # counted tops the payment up by the difference (`EffectProcessor`), a smaller one is an
    # earlier capture's.
    captured_so_far: bool = False
    # Captured less than authorized (a capture of several, or a partial one): an earlier
    # capture announced after a later one names less than the payment counted, and is no
    # mis-map.
    partly_captured: bool = False

    def __post_init__(self) -> None:
        for ref in (self.external_ref, *self.order_lookup, *self.registers):
            check_provider_id(ref, f"{self.transition.value} object id")


@dataclass(frozen=True)
class NoEffect:
    """A well-formed delivery that must not change any order, and why."""

    delivery: Delivery
    reason: str
    # A provider object to read again later, because its next change may come with no event
    # the merchant subscribed (a charge whose refund is still pending, before acacia).
    recheck: str | None = None


@dataclass(frozen=True)
class Binding:
    """A delivery that moves no money but says which order provider objects belong to."""

    delivery: Delivery
    order_id: str | None
    objects: tuple[str, ...]
    reason: str
    order_lookup: tuple[str, ...] = ()  # when it names no order: what it is bound through

    def __post_init__(self) -> None:
        for ref in (*self.objects, *self.order_lookup):
            check_provider_id(ref, "bound object id")


Interpretation = Effect | NoEffect | Binding


# A top-up's external reference is its payment's, this, and the total it brings it to.
TOP_UP_MARK: Final = ":captured:"


def top_up_ref(payment: str, captured: int) -> str:
    return f"{payment}{TOP_UP_MARK}{captured}"


@dataclass(frozen=True)
class RoutedEffect:
    """An effect whose order is known, with its key: everything needed to write it."""

    effect: Effect
    order_id: str
    key: str
    # A top-up of a payment captured again: what its entries counted before this one (the
    # capture mark it moves from; None for every other entry).
    captured_before: int | None = None

    @property
    def reversed_key(self) -> str | None:
        """The key of the entry this one reverses (same object, same order), if any."""
        reverses = TRANSITION_RULES[self.effect.transition].reverses
        if reverses is None:
            return None
        effect = self.effect
        return key_of(reverses, self.order_id, effect.delivery.provider, effect.external_ref)


def key_of(transition: Transition, order_id: str, provider: str, external_ref: str) -> str:
    """Hash of (transition, order, external reference): the same effect, whoever announces it."""
    parts = (KEY_SLOT.get(transition, transition.value), order_id, f"{provider}:{external_ref}")
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def effect_key(effect: Effect, order_id: str) -> str:
    return key_of(effect.transition, order_id, effect.delivery.provider, effect.external_ref)


def ordering_token(effect: Effect) -> int:
    """Monotonic per payment: provider time in seconds, then the same-second rank."""
    rank = TRANSITION_RULES[effect.transition].same_second_rank
    return effect.delivery.created * TIE_SLOTS + rank
