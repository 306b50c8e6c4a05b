"""The domain: transitions, deliveries, effects and the key that makes an effect happen once."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum
from typing import Final


class Transition(StrEnum):
    PAID = "order.paid"
    REFUNDED = "order.refunded"
    DISPUTED = "order.disputed"


@dataclass(frozen=True)
class TransitionRule:
    status: str
    total_attribute: str
    same_second_rank: int


# Same-second tie rule: Stripe's `created` is whole seconds, so two events of one order can
# carry the same timestamp. Within one second the transition later in an order's life wins:
# a refund cannot precede its payment, and a dispute outranks both because it needs a human.
# Equal tokens mean the same transition, hence the same status, so they may both apply.
TRANSITION_RULES: Final[dict[Transition, TransitionRule]] = {
    Transition.PAID: TransitionRule("paid", "paid_total", 1),
    Transition.REFUNDED: TransitionRule("refunded", "refunded_total", 2),
    Transition.DISPUTED: TransitionRule("disputed", "disputed_total", 3),
}
TIE_SLOTS: Final = 10


class Outcome(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    STALE = "stale"
    IGNORED = "ignored"
    UNROUTABLE = "unroutable"
    RETRIED = "retried"
    FAILED = "failed"


@dataclass(frozen=True)
class Money:
    """Integer minor units (5000 = BRL 50.00) with a lower-case ISO currency code."""

    minor: int
    currency: str


@dataclass(frozen=True)
class Delivery:
    """What a delivery is, whatever it announces; the event id is audit, never the key."""

    provider: str
    event_id: str
    event_type: str
    created: int


@dataclass(frozen=True)
class Effect:
    """A real-world change announced by a delivery.

    `external_ref` names the provider object that *is* the change (the payment, the refund,
    the dispute), identified the same way whichever event type announces it.
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


@dataclass(frozen=True)
class NoEffect:
    """A well-formed delivery that must not change any order, and why."""

    delivery: Delivery
    reason: str


Interpretation = Effect | NoEffect


@dataclass(frozen=True)
class RoutedEffect:
    """An effect whose order is known, with its key: everything needed to write it."""

    effect: Effect
    order_id: str
    key: str


def effect_key(effect: Effect, order_id: str) -> str:
    """Hash of (transition, order, external reference): the same effect, whoever announces it."""
    parts = (
        effect.transition.value,
        order_id,
        f"{effect.delivery.provider}:{effect.external_ref}",
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


def ordering_token(effect: Effect) -> int:
    """Monotonic per order: provider time in seconds, then the same-second rank."""
    rank = TRANSITION_RULES[effect.transition].same_second_rank
    return effect.delivery.created * TIE_SLOTS + rank
