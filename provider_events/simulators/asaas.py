"""Asaas, as one order's charge lives there: received (by card, Pix, or marked received in cash
and possibly undone), refunded in parts (`refunds[]`, each DONE), and charged back (requested,
disputed, then reversed for the merchant or lost), for a value of its own: what was left after
refunds. Each webhook carries the whole payment as it is at that moment (`{"event", "payment"}`),
shaped as the captured payloads in tests/events/asaas are.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from provider_events.shapes import shape, unique
from provider_events.simulators.books import TrueBooks
from provider_events.simulators.webhooks import Webhook

BRAZIL = timezone(timedelta(hours=-3))


def brazil_time(at: int) -> str:
    """Asaas's stamps: Brazil's time, no zone."""
    return datetime.fromtimestamp(at, tz=UTC).astimezone(BRAZIL).strftime("%Y-%m-%d %H:%M:%S")


@dataclass
class AsaasSimulator:
    order_id: str
    value_cents: int
    start: int
    provider: str = "asaas"
    payment_id: str = field(default_factory=lambda: unique("pay"))
    status: str = "PENDING"
    billing: str = "CREDIT_CARD"
    refunds: list[dict[str, Any]] = field(default_factory=list)
    chargeback: dict[str, Any] | None = None
    books: TrueBooks = field(init=False)
    _clock: int = field(init=False)
    _received_in_cash: bool = False

    def __post_init__(self) -> None:
        self.books = TrueBooks("brl")
        self._clock = self.start

    def moves(self, rng: random.Random) -> list[tuple[str, Callable[[], list[Webhook]]]]:
        if self.status == "PENDING":
            received: list[tuple[str, Callable[[], list[Webhook]]]] = [
                ("receive by card", self.receive_by_card),
                ("receive by pix", self.receive_by_pix),
            ]
            if not self._received_in_cash:
                # Once: a cash receipt is keyed by the payment, so a second one after an undo
                # is the same entry (not modelled).
                received.append(("receive in cash", self.receive_in_cash))
            return received
        moves: list[tuple[str, Callable[[], list[Webhook]]]] = []
        if self.status == "RECEIVED_IN_CASH":
            moves.append(("undo cash receipt", self.undo_cash))
        left = self._left()
        if self.status in {"RECEIVED", "CONFIRMED"} and self.chargeback is None and left > 0:
            amount = rng.choice([left, max(1, left // 2)])
            moves.append((f"refund {amount}", lambda: self.refund(amount)))
        if self.status in {"RECEIVED", "CONFIRMED"} and self.chargeback is None and left > 0:
            moves.append(("chargeback", self.request_chargeback))
        if self.status == "REFUNDED" and self.chargeback is None:
            # A cardholder disputing a charge refunded in full: nothing is left to withdraw.
            moves.append(("chargeback after a full refund", self.request_chargeback))
        if self.chargeback is not None and self.chargeback["status"] == "REQUESTED":
            moves.append(("contest chargeback", self.contest))
        if self.chargeback is not None and self.chargeback["status"] in {"REQUESTED", "IN_DISPUTE"}:
            moves.append(("chargeback reversed", lambda: self.decide(won=True)))
            moves.append(("chargeback lost", lambda: self.decide(won=False)))
        return moves

    def receive_by_card(self) -> list[Webhook]:
        at = self._tick()
        self.billing, self.status = "CREDIT_CARD", "CONFIRMED"
        confirmed = self._event("PAYMENT_CONFIRMED", at)
        self.status = "RECEIVED"
        self._count_payment(self.payment_id)
        return [confirmed, self._event("PAYMENT_RECEIVED", self._tick())]

    def receive_by_pix(self) -> list[Webhook]:
        at = self._tick()
        self.billing, self.status = "PIX", "RECEIVED"
        self._count_payment(self.payment_id)
        return [self._event("PAYMENT_RECEIVED", at)]

    def receive_in_cash(self) -> list[Webhook]:
        at = self._tick()
        self.billing, self.status = "UNDEFINED", "RECEIVED_IN_CASH"
        self._received_in_cash = True
        self._count_payment(f"{self.payment_id}:cash")
        return [self._event("PAYMENT_RECEIVED", at)]

    def undo_cash(self) -> list[Webhook]:
        """The cash receipt was marked by mistake: the charge is open again, to be paid."""
        at = self._tick()
        self.status = "PENDING"
        self.books.paid -= self.value_cents
        self.books.movements.append(f"order.payment_reversed:{self.payment_id}:cash")
        return [self._event("PAYMENT_RECEIVED_IN_CASH_UNDONE", at)]

    def refund(self, cents: int) -> list[Webhook]:
        at = self._tick()
        refund = {
            "dateCreated": brazil_time(at),
            "status": "DONE",
            "value": cents / 100,
            "description": "Devolução",
        }
        self.refunds.append(refund)
        self.books.refunded += cents
        rank = sum(
            1
            for r in self.refunds
            if (r["dateCreated"], r["value"]) == (refund["dateCreated"], refund["value"])
        )
        self.books.movements.append(
            f"order.refunded:{self.payment_id}:refund:{refund['dateCreated']}:{cents}#{rank}"
        )
        full = self._left() == 0
        if full:
            self.status = "REFUNDED"
        return [self._event("PAYMENT_REFUNDED" if full else "PAYMENT_PARTIALLY_REFUNDED", at)]

    def request_chargeback(self) -> list[Webhook]:
        """The cardholder disputes what is left of the charge after its refunds."""
        at = self._tick()
        value = self._left()
        self.status = "CHARGEBACK_REQUESTED"
        self.chargeback = {
            "id": unique("cbk"),
            "payment": self.payment_id,
            "installment": None,
            "status": "REQUESTED",
            "reason": "ABSENT_CARD_FRAUD",
            "value": value / 100,
            "disputeStatus": None,
        }
        self.books.disputed += value
        if value:
            self.books.movements.append(f"order.disputed:{self.payment_id}:chargeback")
        return [self._event("PAYMENT_CHARGEBACK_REQUESTED", at)]

    def contest(self) -> list[Webhook]:
        at = self._tick()
        assert self.chargeback is not None
        self.status = "CHARGEBACK_DISPUTE"
        self.chargeback["status"] = "IN_DISPUTE"
        return [self._event("PAYMENT_CHARGEBACK_DISPUTE", at)]

    def decide(self, *, won: bool) -> list[Webhook]:
        at = self._tick()
        assert self.chargeback is not None
        value = round(self.chargeback["value"] * 100)
        self.books.disputed -= value
        if won:
            self.status = "AWAITING_CHARGEBACK_REVERSAL"
            self.chargeback["status"] = "REVERSED"
            self.books.dispute_won += value
            if value:
                self.books.movements.append(f"order.dispute_won:{self.payment_id}:chargeback")
            return [self._event("PAYMENT_AWAITING_CHARGEBACK_REVERSAL", at)]
        self.chargeback["status"] = "DISPUTE_LOST"
        self.books.dispute_lost += value
        if value:
            self.books.movements.append(f"order.dispute_lost:{self.payment_id}:chargeback")
        return [self._event("PAYMENT_CHARGEBACK_DISPUTE", at)]

    def refunds_listed(self) -> dict[str, list[dict[str, Any]]]:
        return {}

    def _count_payment(self, ref: str) -> None:
        self.books.paid += self.value_cents
        self.books.movements.append(f"order.paid:{ref}")

    def _left(self) -> int:
        return self.value_cents - sum(round(float(r["value"]) * 100) for r in self.refunds)

    def _tick(self) -> int:
        self._clock += 60
        return self._clock

    def _event(self, name: str, at: int) -> Webhook:
        event = shape("asaas/PAYMENT_RECEIVED.json")
        event["id"] = f"evt_{unique('asaas')}&{at}"
        event["event"] = name
        event["dateCreated"] = brazil_time(at)
        event["payment"].update(
            {
                "id": self.payment_id,
                "value": self.value_cents / 100,
                "status": self.status,
                "billingType": self.billing,
                "externalReference": self.order_id,
                "refunds": [dict(r) for r in self.refunds] or None,
                "chargeback": dict(self.chargeback) if self.chargeback else None,
            }
        )
        return Webhook(self.provider, name, json.dumps(event), at)
