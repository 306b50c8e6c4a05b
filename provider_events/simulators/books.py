"""The merchant's true books for one order, kept by a provider simulator as its objects move.

Written from what each provider reports (not from umavez's code): what was paid, refunded,
withdrawn by disputes still open, given back after a dispute (won, or the part of a lost one the
provider reinstated), lost to disputes for good, and questioned by open inquiries; and the
status a merchant reads from them, by the README's rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TOTAL_NAMES = (
    "paid_total",
    "refunded_total",
    "disputed_total",
    "dispute_won_total",
    "dispute_lost_total",
    "inquiry_total",
)


@dataclass
class TrueBooks:
    currency: str
    paid: int = 0
    refunded: int = 0
    disputed: int = 0
    dispute_won: int = 0
    dispute_lost: int = 0
    inquiry: int = 0
    # Each money movement the merchant must be told of, by the provider object that is it.
    movements: list[str] = field(default_factory=list)
    recipient: str | None = None

    @property
    def totals(self) -> dict[str, int]:
        """By the names the ledger gives its totals (README, "The ledger")."""
        amounts = (
            self.paid,
            self.refunded,
            self.disputed,
            self.dispute_won,
            self.dispute_lost,
            self.inquiry,
        )
        return dict(zip(TOTAL_NAMES, amounts, strict=True))

    @property
    def status(self) -> str:
        """README, "Financial status": money held by an open dispute first, then
        money lost to one, then refunds against what was paid, then a dispute won or an open
        inquiry."""
        if self.disputed > 0:
            return "disputed"
        if self.dispute_lost > 0:
            return "dispute_lost"
        if self.refunded > 0:
            return "refunded" if self.refunded >= self.paid else "partially_refunded"
        if self.paid <= 0:
            return "unpaid"
        if self.dispute_won > 0:
            return "dispute_won"
        if self.inquiry > 0:
            return "inquiry"
        return "paid"
