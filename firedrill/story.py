"""A fire drill story: the deliveries a provider makes for one order, and what the order must
look like once everything has arrived, whatever the order and number of arrivals."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fixtures.simulators.books import ledger_totals


@dataclass
class Post:
    """One delivery as a provider makes it. Signed at send time, as providers do."""

    provider: str
    body: str
    query: dict[str, str] = field(default_factory=dict)
    copies: int = 1  # sent this many times at the same instant
    slow: bool = False  # ingest answers after the provider's timeout: the provider retries
    forgery: str | None = None  # "bad-signature" or "stale-timestamp": must be refused
    after_seconds: float = 0  # the provider sends it this long after the phase before
    # Authentic but of the other payment mode (a live event on this test stack): answered 200,
    # never enqueued, never applied.
    other_mode: bool = False
    # Stripe's event through its EventBridge destination (put on the partner bus) instead of
    # its webhook: no HTTP, no signature.
    via_eventbridge: bool = False
    # A Stripe thin event's: the snapshot event of the same change (what the drill's truth
    # reads; umavez reads the object from the fake Stripe API).
    announces: str | None = None

    @property
    def announced(self) -> str:
        """The change the post announces, shown: the body itself, or a thin event's snapshot."""
        return self.announces or self.body


@dataclass
class Expected:
    """What the order must say once everything arrived: its financial status (written by hand
    per story, not computed), every total, and the entries that count."""

    status: str
    paid: int = 0
    refunded: int = 0
    disputed: int = 0
    dispute_won: int = 0
    dispute_lost: int = 0
    inquiry: int = 0
    effects: set[tuple[str, str]] = field(default_factory=set)
    # Entries that count or not depending on the processing order (a refund's failure
    # processed before its success voids both); the totals are the same either way.
    either_way: set[tuple[str, str]] = field(default_factory=set)
    # Which deliveries end up stale depends on the processing order; the outcome does not.
    stale: tuple[int, int] = (0, 0)
    currency: str = "brl"

    @property
    def totals(self) -> dict[str, int]:
        return ledger_totals(self)


@dataclass
class Story:
    kind: str
    order_id: str
    phases: list[list[Post]]
    expected: Expected
    mercadopago_payment: dict[str, Any] | None = None
    # An order of Mercado Pago's Orders API as `GET /v1/orders/{id}` answers it.
    mercadopago_order: dict[str, Any] | None = None
    # Asaas's payments as its API answers them, by id (none given: as the story's last
    # webhook of each carries it).
    asaas_payments: dict[str, dict[str, Any]] = field(default_factory=dict)
    # A charge's refunds as Stripe's refunds API lists them (for a legacy charge.refunded).
    stripe_refunds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # Another order that an event names for this story's payment: it must never be credited.
    conflicting_order: str | None = None
    # A payment no event binds to any order: it must end unmatched, listed, and be attached.
    unmatched_object: str | None = None
    # A charge whose refund is still pending, seen by a legacy endpoint: it must be watched
    # (read again on a schedule, as its success may come as no event).
    watched_charge: str | None = None
    # Lines of Stripe's balance for movements no webhook of the story announces (lost for good:
    # never delivered, past the Events API's 30 days): only the statement can book them.
    stripe_balance: list[dict[str, Any]] = field(default_factory=list)
    # Its movements reach umavez through the provider's statement only (no webhook of them
    # arrives): the drill stages them from outside, over the fakes' HTTP.
    statement_only: bool = False
    # What Stripe's API answers for the objects the story's thin events name, by id.
    stripe_objects: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def asaas_answers(self) -> dict[str, dict[str, Any]]:
        """What Asaas's API answers for the story's payments: the story's own, else each payment
        as its last webhook carries it (process books what the API answers, never the body)."""
        if self.asaas_payments:
            return self.asaas_payments
        latest: dict[str, dict[str, Any]] = {}
        for post in self.posts:
            payment = json.loads(post.body).get("payment") if post.provider == "asaas" else None
            if isinstance(payment, dict) and isinstance(payment.get("id"), str):
                latest[payment["id"]] = payment
        return latest

    @property
    def posts(self) -> list[Post]:
        return [post for phase in self.phases for post in phase]

    @property
    def deliveries(self) -> int:
        """HTTP deliveries the story makes (each post's copies), before any provider retry."""
        return sum(post.copies for post in self.posts)
