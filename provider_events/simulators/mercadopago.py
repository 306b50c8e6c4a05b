"""Mercado Pago, as one order's payment lives there: approved, refunded in parts (`refunds[]`,
`transaction_amount_refunded`), held by a mediation (`in_mediation`) that the seller wins (the
payment is `approved` again) or that escalates to a chargeback (`charged_back`, `in_process`),
settled against the seller (`settled`) or covered by Mercado Pago (`reimbursed`).

The notification is thin (`payment.created` / `payment.updated`, the payment's id): umavez reads
the payment from `GET /v1/payments/{id}`, which answers its state *now*, not when the
notification was sent; `payments_listed` is that answer. One dispute per payment: a mediation
that escalates is the same claim, withdrawn once, for what was left after refunds.
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

SAO_PAULO = timezone(timedelta(hours=-3))
PAYER_EMAIL = "cliente@example.com"


def mp_time(at: int) -> str:
    return (
        datetime.fromtimestamp(at, tz=UTC).astimezone(SAO_PAULO).isoformat(timespec="milliseconds")
    )


@dataclass
class MercadoPagoSimulator:
    order_id: str
    amount_cents: int
    start: int
    provider: str = "mercadopago"
    payment_id: int = field(default_factory=lambda: 1_300_000_000 + int(unique("n")[6:]))
    status: str = "pending"
    status_detail: str = "pending_contingency"
    refunds: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0  # what the open mediation or chargeback holds
    disputed_stage: str | None = None  # "mediation", "chargeback", then "closed"
    dispute_seen: bool = False  # read by umavez while it held the money (see release_mediation)
    books: TrueBooks = field(init=False)
    _clock: int = field(init=False)
    _approved_at: int | None = None
    _updated_at: int = 0

    def __post_init__(self) -> None:
        self.books = TrueBooks("brl")
        self._clock = self.start
        self._updated_at = self.start

    def moves(self, rng: random.Random) -> list[tuple[str, Callable[[], list[Webhook]]]]:
        if self.status == "pending":
            return [("approve", self.approve)]
        moves: list[tuple[str, Callable[[], list[Webhook]]]] = []
        left = self._left()
        if self.status == "approved" and self.disputed_stage is None and left > 0:
            amount = rng.choice([left, max(1, left // 2)])
            moves.append((f"refund {amount}", lambda: self.refund(amount)))
            moves.append(("mediation", self.open_mediation))
            moves.append(("chargeback", self.open_chargeback))
        if self.status == "refunded" and self.disputed_stage is None:
            # A cardholder disputing a payment refunded in full: nothing is left to hold.
            moves.append(("chargeback after a full refund", self.open_chargeback))
        if self.status == "in_mediation":
            moves.append(("mediation won", self.release_mediation))
            moves.append(("mediation escalates", self.open_chargeback))
        if self.status == "charged_back" and self.status_detail == "in_process":
            moves.append(("chargeback settled", lambda: self.decide(won=False)))
            moves.append(("chargeback reimbursed", lambda: self.decide(won=True)))
        return moves

    def approve(self) -> list[Webhook]:
        at = self._tick()
        self.status, self.status_detail, self._approved_at = "approved", "accredited", at
        self.books.paid += self.amount_cents
        self.books.movements.append(f"order.paid:{self.payment_id}")
        self.books.recipient = PAYER_EMAIL
        return [self._notification("payment.created", at)]

    def refund(self, cents: int) -> list[Webhook]:
        at = self._tick()
        refund_id = 2_900_000_000 + int(unique("n")[6:])
        self.refunds.append(
            {
                "id": refund_id,
                "payment_id": self.payment_id,
                "amount": cents / 100,
                "status": "approved",
                "date_created": mp_time(at),
                "refund_mode": "standard",
            }
        )
        self.books.refunded += cents
        self.books.movements.append(f"order.refunded:refund:{refund_id}")
        if self._left() == 0:
            self.status, self.status_detail = "refunded", "refunded"
        else:
            self.status_detail = "partially_refunded"
        return [self._notification("payment.updated", at)]

    def open_mediation(self) -> list[Webhook]:
        at = self._tick()
        self.status, self.status_detail, self.disputed_stage = (
            "in_mediation",
            "in_process",
            "mediation",
        )
        self._hold()
        return [self._notification("payment.updated", at)]

    def open_chargeback(self) -> list[Webhook]:
        """A chargeback filed, or a mediation escalated to one: one dispute, one hold."""
        at = self._tick()
        if self.disputed_stage is None:
            self._hold()
        self.status, self.status_detail, self.disputed_stage = (
            "charged_back",
            "in_process",
            "chargeback",
        )
        return [self._notification("payment.updated", at)]

    def release_mediation(self) -> list[Webhook]:
        """The seller wins the mediation: the hold is released. The payment keeps no trace of
        it: a mediation nobody read while it held the money (`dispute_seen`) is, for the
        merchant's books as for anyone reading the payment afterwards, a hold that never was."""
        at = self._tick()
        self.status, self.status_detail, self.disputed_stage = "approved", "accredited", "closed"
        self.books.disputed -= self.held
        if self.dispute_seen:
            self.books.dispute_won += self.held
            self.books.movements.append(f"order.dispute_won:{self.payment_id}:dispute")
        else:
            self.books.movements.remove(f"order.disputed:{self.payment_id}:dispute")
        return [self._notification("payment.updated", at)]

    def read_now(self) -> None:
        """umavez read the payment in its present state (a notification was processed)."""
        self.dispute_seen = self.dispute_seen or self.status in {"in_mediation", "charged_back"}

    def decide(self, *, won: bool) -> list[Webhook]:
        at = self._tick()
        self.status_detail, self.disputed_stage = ("reimbursed" if won else "settled"), "closed"
        self.books.disputed -= self.held
        if not self.held:
            pass  # nothing was held: nothing to settle
        elif won:
            self.books.dispute_won += self.held
            self.books.movements.append(f"order.dispute_won:{self.payment_id}:dispute")
        else:
            self.books.dispute_lost += self.held
            self.books.movements.append(f"order.dispute_lost:{self.payment_id}:dispute")
        return [self._notification("payment.updated", at)]

    def payments_listed(self) -> dict[str, dict[str, Any]]:
        """GET /v1/payments/{id} as it answers now."""
        payment = shape("mercadopago/payment.json")
        payment.update(
            {
                "id": self.payment_id,
                "status": self.status,
                "status_detail": self.status_detail,
                "currency_id": "BRL",
                "transaction_amount": self.amount_cents / 100,
                # Mercado Pago reports it in the currency's places (a float sum drifts)
                "transaction_amount_refunded": (self.amount_cents - self._left()) / 100,
                "date_created": mp_time(self.start),
                "date_approved": mp_time(self._approved_at) if self._approved_at else None,
                "date_last_updated": mp_time(self._updated_at),
                "external_reference": self.order_id,
                "metadata": {"order_id": self.order_id},
                "refunds": [dict(r) for r in self.refunds],
                "payer": {"id": "1874523698", "email": PAYER_EMAIL, "type": None},
            }
        )
        return {str(self.payment_id): payment}

    def refunds_listed(self) -> dict[str, list[dict[str, Any]]]:
        return {}

    def _hold(self) -> None:
        self.held = self._left()
        self.books.disputed += self.held
        if self.held:
            self.books.movements.append(f"order.disputed:{self.payment_id}:dispute")

    def _left(self) -> int:
        return self.amount_cents - sum(round(float(r["amount"]) * 100) for r in self.refunds)

    def _tick(self) -> int:
        self._clock += 60
        self._updated_at = self._clock
        return self._clock

    def _notification(self, action: str, at: int) -> Webhook:
        notification = shape("mercadopago/payment.updated.json")
        notification.update(
            {
                "action": action,
                "id": 118_000_000_000 + int(unique("n")[6:]),
                "date_created": datetime.fromtimestamp(at, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "data": {"id": str(self.payment_id)},
            }
        )
        return Webhook(self.provider, action, json.dumps(notification), at)
