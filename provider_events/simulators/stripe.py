"""Stripe, as one order's card payment lives there: the PaymentIntent and its charge, refunds
(pending, succeeded, failed, canceled), and one dispute (an inquiry that closes or escalates, a
chargeback won or lost, one prevented before it was filed). Each move is one Stripe allows in
that state, and returns the webhooks Stripe sends for it to an endpoint of the chosen API
version, shaped as the captured payloads in tests/events are; the refunds a legacy endpoint's
`charge.refunded` makes umavez read are what `refunds_listed` serves. The merchant's true
books move with the objects.

Sources for the moves and their events (README, "The ledger", lists them per event):
- refunds: `refund.created/updated/failed` for card refunds only from 2024-10-28.acacia on;
  before it, `charge.refunded` (refunds not embedded since 2022-11-15) and
  `charge.refund.updated` for a refund's later changes, if the endpoint subscribed it (without
  it, a pending refund's success or failure comes as no event at all);
- disputes: statuses `warning_needs_response`, `warning_closed`, `needs_response`, `won`,
  `lost`, `prevented` (2025-08-27.basil: stopped before it was filed, no funds withdrawn); an
  inquiry escalates in place (same dispute id: `charge.dispute.updated`, then
  `charge.dispute.funds_withdrawn`); the dispute's `balance_transactions` say what was withdrawn
  (`dispute`) and reinstated (`dispute_reversal`); a dispute lost on a partially refunded charge
  reinstates the refunded part (`charge.dispute.funds_reinstated` with status `lost`).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Any

from provider_events.shapes import shape, unique
from provider_events.simulators.books import TrueBooks
from provider_events.simulators.webhooks import Webhook

EMAIL = "cliente@example.com"


class ApiVersion(StrEnum):
    BASIL = "2025-03-31.basil"
    ACACIA = "2024-10-28.acacia"
    LEGACY = "2023-10-16"

    @property
    def sends_card_refund_events(self) -> bool:
        return self is not ApiVersion.LEGACY


@dataclass
class _Refund:
    id: str
    amount: int
    status: str
    created: int
    counted: bool = False  # succeeded at some point (the merchant's books took it)


@dataclass
class _Dispute:
    id: str
    amount: int
    status: str
    created: int
    withdrawn: int = 0
    reinstated: int = 0


@dataclass
class StripeSimulator:
    """One order paid by card, seen from one webhook endpoint."""

    order_id: str
    amount: int
    api_version: ApiVersion
    start: int
    currency: str = "brl"
    # Whether the endpoint subscribed `charge.refund.updated`: before acacia the only event
    # for a refund's later change. Without it a pending refund's success comes as no event.
    refund_updates: bool = True
    provider: str = "stripe"
    intent: str = field(default_factory=lambda: unique("pi"))
    charge: str = field(default_factory=lambda: unique("ch"))
    refunds: list[_Refund] = field(default_factory=list)
    dispute: _Dispute | None = None
    paid: bool = False
    books: TrueBooks = field(init=False)
    _clock: int = field(init=False)

    def __post_init__(self) -> None:
        self.books = TrueBooks(self.currency)
        self._clock = self.start

    # -- what can happen now ----------------------------------------------------------------

    def moves(self, rng: random.Random) -> list[tuple[str, Callable[[], list[Webhook]]]]:
        """Every move Stripe allows in this state, with its arguments drawn from `rng`."""
        if not self.paid:
            return [("pay", self.pay)]
        moves: list[tuple[str, Callable[[], list[Webhook]]]] = []
        refundable = self.amount - sum(
            r.amount for r in self.refunds if r.status in {"pending", "succeeded"}
        )
        open_chargeback = self.dispute is not None and self.dispute.status in {
            "needs_response",
            "under_review",
            "lost",
        }
        if refundable > 0 and not open_chargeback:
            amount = rng.choice([refundable, max(1, refundable // 2), max(1, refundable // 3)])
            pending = rng.random() < 0.3
            moves.append((f"refund {amount}", lambda: self.refund(amount, pending=pending)))
        for refund in self.refunds:
            if refund.status == "pending":
                moves.append((f"settle {refund.id}", partial(self.settle_refund, refund)))
                moves.append((f"cancel {refund.id}", partial(self.end_refund, refund, "canceled")))
            # A refund failing after it succeeded is known only from an event: not drawn where
            # the endpoint gets none (legacy, charge.refund.updated not subscribed).
            if refund.status == "pending" or (
                refund.status == "succeeded" and self._refund_changes_announced
            ):
                moves.append((f"fail {refund.id}", partial(self.end_refund, refund, "failed")))
        dispute = self.dispute
        if dispute is None:
            moves.append(("open inquiry", lambda: self.open_dispute(inquiry=True)))
            moves.append(("open chargeback", lambda: self.open_dispute(inquiry=False)))
            moves.append(("prevented dispute", self.prevent_dispute))
        elif dispute.status == "warning_needs_response":
            moves.append(("escalate inquiry", self.escalate))
            moves.append(("close inquiry", self.close_inquiry))
        elif dispute.status == "needs_response":
            moves.append(("win dispute", lambda: self.decide(won=True)))
            moves.append(("lose dispute", lambda: self.decide(won=False)))
        return moves

    # -- the moves --------------------------------------------------------------------------

    def pay(self) -> list[Webhook]:
        at = self._tick()
        self.paid = True
        self.books.paid += self.amount
        self.books.movements.append(f"order.paid:{self.intent}")
        self.books.recipient = EMAIL
        # payment_intent.succeeded usually names no e-mail; its charge's billing details do.
        return [
            self._event("payment_intent.succeeded", at, self._intent_object()),
            self._event("charge.succeeded", at, self._charge_object()),
        ]

    def refund(self, amount: int, *, pending: bool) -> list[Webhook]:
        at = self._tick()
        refund = _Refund(unique("re"), amount, "pending" if pending else "succeeded", at)
        self.refunds.append(refund)
        if not pending:
            self._count_refund(refund)
        hooks = [self._event("charge.refunded", at, self._charge_object())]
        if self.api_version.sends_card_refund_events:
            hooks.insert(0, self._event("refund.created", at, self._refund_object(refund)))
        return hooks

    def settle_refund(self, refund: _Refund) -> list[Webhook]:
        at = self._tick()
        refund.status = "succeeded"
        self._count_refund(refund)
        return self._refund_changed(refund, at, previous="pending")

    def end_refund(self, refund: _Refund, status: str) -> list[Webhook]:
        """A refund failing (after it succeeded, or while pending) or canceled while pending:
        its money is the merchant's again."""
        at = self._tick()
        previous, refund.status = refund.status, status
        if refund.counted:
            self.books.refunded -= refund.amount
            self.books.movements.append(f"order.refund_reversed:{refund.id}")
        hooks = self._refund_changed(refund, at, previous=previous)
        if status == "failed" and self.api_version.sends_card_refund_events:
            hooks.insert(0, self._event("refund.failed", at, self._refund_object(refund)))
        return hooks

    def open_dispute(self, *, inquiry: bool) -> list[Webhook]:
        at = self._tick()
        # The cardholder disputes what the charge was, whatever was refunded since.
        status = "warning_needs_response" if inquiry else "needs_response"
        dispute = _Dispute(unique("du"), self.amount, status, at)
        self.dispute = dispute
        if inquiry:
            self.books.inquiry += dispute.amount
            self.books.movements.append(f"order.inquiry_opened:{dispute.id}")
            return [self._event("charge.dispute.created", at, self._dispute_object())]
        self._withdraw(dispute)
        return [
            self._event("charge.dispute.created", at, self._dispute_object()),
            self._event("charge.dispute.funds_withdrawn", at, self._dispute_object()),
        ]

    def prevent_dispute(self) -> list[Webhook]:
        """A dispute stopped before it was filed (Visa RDR, Order Insight): nothing withdrawn."""
        at = self._tick()
        self.dispute = _Dispute(unique("du"), self.amount, "prevented", at)
        return [self._event("charge.dispute.created", at, self._dispute_object())]

    def escalate(self) -> list[Webhook]:
        at = self._tick()
        dispute = self._open_dispute()
        dispute.status = "needs_response"
        self.books.inquiry -= dispute.amount
        self.books.movements.append(f"order.inquiry_closed:{dispute.id}")
        self._withdraw(dispute)
        return [
            self._event(
                "charge.dispute.updated",
                at,
                self._dispute_object(),
                previous={"status": "warning_needs_response"},
            ),
            self._event("charge.dispute.funds_withdrawn", at, self._dispute_object()),
        ]

    def close_inquiry(self) -> list[Webhook]:
        at = self._tick()
        dispute = self._open_dispute()
        dispute.status = "warning_closed"
        self.books.inquiry -= dispute.amount
        self.books.movements.append(f"order.inquiry_closed:{dispute.id}")
        return [
            self._event(
                "charge.dispute.closed",
                at,
                self._dispute_object(),
                previous={"status": "warning_needs_response"},
            )
        ]

    def decide(self, *, won: bool) -> list[Webhook]:
        """The verdict. Won: everything withdrawn comes back. Lost: nothing does, except the
        part of the charge refunded before the dispute, which Stripe reinstates."""
        at = self._tick()
        dispute = self._open_dispute()
        dispute.status = "won" if won else "lost"
        refunded = sum(r.amount for r in self.refunds if r.status == "succeeded")
        dispute.reinstated = dispute.withdrawn if won else min(refunded, dispute.withdrawn)
        self.books.disputed -= dispute.withdrawn
        self.books.dispute_won += dispute.reinstated
        self.books.dispute_lost += dispute.withdrawn - dispute.reinstated
        verdict = "order.dispute_won" if won else "order.dispute_lost"
        self.books.movements.append(f"{verdict}:{dispute.id}")
        if not won and dispute.reinstated:
            self.books.movements.append(f"order.funds_reinstated:{dispute.id}")
        hooks = [self._event("charge.dispute.closed", at, self._dispute_object())]
        if dispute.reinstated:
            hooks.insert(
                0, self._event("charge.dispute.funds_reinstated", at, self._dispute_object())
            )
        return hooks

    # -- what umavez reads from Stripe's API ------------------------------------------------

    def refunds_listed(self) -> dict[str, list[dict[str, Any]]]:
        """GET /v1/refunds?charge=… as it answers now: the charge's refunds, newest first."""
        listed = [self._refund_object(r) for r in sorted(self.refunds, key=lambda r: -r.created)]
        return {self.charge: listed}

    # -- the books --------------------------------------------------------------------------

    def _count_refund(self, refund: _Refund) -> None:
        refund.counted = True
        self.books.refunded += refund.amount
        self.books.movements.append(f"order.refunded:{refund.id}")

    def _withdraw(self, dispute: _Dispute) -> None:
        dispute.withdrawn = dispute.amount
        self.books.disputed += dispute.withdrawn
        self.books.movements.append(f"order.disputed:{dispute.id}")

    def _open_dispute(self) -> _Dispute:
        if self.dispute is None:
            raise ValueError("no dispute is open")
        return self.dispute

    # -- payloads ---------------------------------------------------------------------------

    def _tick(self) -> int:
        self._clock += 60
        return self._clock

    @property
    def _refund_changes_announced(self) -> bool:
        return self.refund_updates or self.api_version.sends_card_refund_events

    def pending_refunds(self) -> list[str]:
        return [r.id for r in self.refunds if r.status == "pending"]

    def _refund_changed(self, refund: _Refund, at: int, *, previous: str) -> list[Webhook]:
        previously = {"status": previous}
        hooks = []
        if self.refund_updates:
            hooks.append(
                self._event("charge.refund.updated", at, self._refund_object(refund), previously)
            )
        if self.api_version.sends_card_refund_events:
            hooks.insert(
                0, self._event("refund.updated", at, self._refund_object(refund), previously)
            )
        return hooks

    def _intent_object(self) -> dict[str, Any]:
        return {
            "id": self.intent,
            "amount": self.amount,
            "amount_received": self.amount,
            "currency": self.currency,
            "metadata": {"order_id": self.order_id},
            "latest_charge": self.charge,
            "receipt_email": None,
            "status": "succeeded",
        }

    def _charge_object(self) -> dict[str, Any]:
        refunded = sum(r.amount for r in self.refunds if r.status in {"pending", "succeeded"})
        return {
            "id": self.charge,
            "amount": self.amount,
            "amount_captured": self.amount,
            "amount_refunded": refunded,
            "refunded": refunded >= self.amount,
            "captured": True,
            "currency": self.currency,
            "metadata": {"order_id": self.order_id},
            "payment_intent": self.intent,
            "receipt_email": None,
            "billing_details": {"email": EMAIL, "name": "Cliente Exemplo"},
            "disputed": self.dispute is not None,
        }

    def _refund_object(self, refund: _Refund) -> dict[str, Any]:
        return {
            "id": refund.id,
            "object": "refund",
            "amount": refund.amount,
            "charge": self.charge,
            "payment_intent": self.intent,
            "created": refund.created,
            "currency": self.currency,
            "metadata": {},
            "status": refund.status,
        }

    def _dispute_object(self) -> dict[str, Any]:
        dispute = self._open_dispute()
        transactions = []
        if dispute.withdrawn:
            transactions.append(self._balance_transaction(dispute, -dispute.withdrawn, "dispute"))
        if dispute.reinstated:
            transactions.append(
                self._balance_transaction(dispute, dispute.reinstated, "dispute_reversal")
            )
        case = "inquiry" if dispute.status.startswith("warning_") else "chargeback"
        if dispute.status == "prevented":
            case = "resolution"
        return {
            "id": dispute.id,
            "object": "dispute",
            "amount": dispute.amount,
            "charge": self.charge,
            "payment_intent": self.intent,
            "created": dispute.created,
            "currency": self.currency,
            "metadata": {},
            "status": dispute.status,
            "balance_transactions": transactions,
            "is_charge_refundable": dispute.status.startswith("warning_"),
            "payment_method_details": {
                "card": {"brand": "visa", "case_type": case},
                "type": "card",
            },
        }

    def _balance_transaction(self, dispute: _Dispute, amount: int, category: str) -> dict[str, Any]:
        return {
            "id": unique("txn"),
            "object": "balance_transaction",
            "amount": amount,
            "currency": self.currency,
            "net": amount,
            "fee": 0,
            "reporting_category": category,
            "source": dispute.id,
            "type": "adjustment",
        }

    def _event(
        self,
        event_type: str,
        at: int,
        obj: dict[str, Any],
        previous: dict[str, Any] | None = None,
    ) -> Webhook:
        event = shape(f"stripe/{_TEMPLATES[event_type]}.json")
        event["id"] = unique("evt")
        event["type"] = event_type
        event["created"] = at
        event["api_version"] = self.api_version.value
        event["livemode"] = False
        event["data"]["object"].update(obj)
        if event_type == "charge.refunded" and self.api_version is not ApiVersion.LEGACY:
            event["data"]["object"].pop("refunds", None)
        if self.api_version is ApiVersion.LEGACY or event_type == "charge.refunded":
            # Refunds stopped being embedded in charges in 2022-11-15.
            event["data"]["object"].pop("refunds", None)
        if previous is not None:
            event["data"]["previous_attributes"] = previous
        else:
            event["data"].pop("previous_attributes", None)
        return Webhook(self.provider, event_type, json.dumps(event), at)


# The captured payload each event type is shaped from (tests/events/stripe).
_TEMPLATES = {
    "payment_intent.succeeded": "payment_intent.succeeded",
    "charge.succeeded": "charge.succeeded",
    "charge.refunded": "charge.refunded",
    "refund.created": "refund.created",
    "refund.updated": "refund.updated.canceled",
    "refund.failed": "refund.failed",
    "charge.refund.updated": "refund.updated.canceled",
    "charge.dispute.created": "charge.dispute.created",
    "charge.dispute.updated": "charge.dispute.created",
    "charge.dispute.funds_withdrawn": "charge.dispute.funds_withdrawn",
    "charge.dispute.funds_reinstated": "charge.dispute.funds_reinstated",
    "charge.dispute.closed": "charge.dispute.closed.won",
}
