"""One line of a provider's statement, as every provider's reader hands it to the pass."""

from __future__ import annotations

from dataclasses import dataclass

from functions.shared.domain import Effect, Interpretation


@dataclass(frozen=True)
class Line:
    """A movement the provider recorded, read as the delivery announcing it is read.

    `moves` names the provider objects it moved, as the ledger's entries name them (a
    payment and its charge, a refund, a dispute). `fee` and `net` are in the account's
    settlement currency. `moves_money` is false for a line moving no order's money (a
    payout, the provider's own fees). `capture` is what one capture of a payment moved, in the
    payment's own currency (None when the line settled in another: then only the source's
    total is compared). `unreadable` says why a line could not be read: it books nothing.
    `net_of` names the payment of a line that moves its money but books no entry of its own
    (Asaas's chargeback withdrawal, and its reversal: the payment's line books the dispute):
    its fee and net are recorded on the order the payment is bound to.
    """

    provider: str
    line_id: str
    category: str
    created: int
    fee: int
    net: int
    settlement_currency: str
    moves: tuple[str, ...]
    moves_money: bool = True
    readings: tuple[Interpretation, ...] = ()
    capture: int | None = None
    unreadable: str | None = None
    net_of: str | None = None

    @classmethod
    def unreadable_payment(cls, provider: str, payment_id: str, reason: str) -> Line:
        """A payment the statement names that cannot be read: it books nothing, and is
        reported."""
        return cls(
            provider,
            f"payment:{payment_id}",
            "payment",
            0,
            0,
            0,
            "",
            (payment_id,),
            unreadable=reason,
        )

    @classmethod
    def of_refund(cls, payment_id: str, refund: Effect) -> Line:
        """A refund of a payment the statement lists, its own line: its entry; no fee, its
        money out."""
        return cls(
            refund.delivery.provider,
            f"payment:{payment_id}:{refund.external_ref}",
            "refund",
            refund.delivery.created,
            0,
            -refund.amount.minor,
            refund.amount.currency,
            (refund.external_ref,),
            readings=(refund,),
        )

    @property
    def effects(self) -> list[Effect]:
        return [r for r in self.readings if isinstance(r, Effect)]
