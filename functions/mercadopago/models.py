"""Mercado Pago's notification and payment as its map reads them (functions/mercadopago/events.py),
what the ledger holds of a payment's dispute, and the moments the payloads carry."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from functions.shared.domain import Transition
from functions.shared.money import InvalidFieldError
from functions.shared.provider_fields import MAX_EPOCH_SECONDS, Currency, DecimalAmount

PROVIDER: Final = "mercadopago"
MONEY_RECEIVED: Final = frozenset({"approved", "refunded", "charged_back", "in_mediation"})
DISPUTED: Final = frozenset({"charged_back", "in_mediation"})
HOLD_RELEASED: Final = frozenset({"approved", "refunded"})
REFUND_MOVED_MONEY: Final = "approved"
BUYER_PROTECTION: Final = "bpp"  # refunds[].source.type of a claim resolved for the buyer
# The note on a mediation's release (`order.dispute_won` from a payment approved again): what
# tells it, in the ledger, from a chargeback Mercado Pago reimbursed.
RELEASED: Final = "the mediation's hold released: the payment is approved again"
CLOSED_BY_REFUND: Final = "the mediation closed by the seller's refund"
CHARGEBACK_VERDICTS: Final[Mapping[str, Transition]] = {
    "settled": Transition.DISPUTE_LOST,
    "reimbursed": Transition.DISPUTE_WON,
}

PaymentSource = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True)
class BookedDispute:
    """A dispute opening of the payment that the ledger counted: what it withdrew, in minor
    units, and whether its verdict counted too."""

    minor: int
    settled: bool
    # Settled by a mediation's release (the payment approved again), not by a chargeback's
    # verdict: a chargeback filed afterwards is another claim.
    released: bool = False


# What the ledger holds of a payment's disputes: given the order the payment names (None: the
# ledger finds it through the payment's binding), the payment id and the dispute refs to look
# at, the refs whose opening counted. A dependency, so the map stays a function of what it reads.
DisputeBooks = Callable[[str | None, str, tuple[str, ...]], Mapping[str, BookedDispute]]


def nothing_booked(
    order_id: str | None, payment_id: str, refs: tuple[str, ...]
) -> Mapping[str, BookedDispute]:
    return {}


def dispute_refs(payment_id: str) -> tuple[str, str, str]:
    """The payment's dispute, then the keys a mediation and a chargeback had before (see
    events.py's doc)."""
    return f"{payment_id}:dispute", f"{payment_id}:mediation", f"{payment_id}:chargeback"


class _MercadoPagoModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class NotificationData(_MercadoPagoModel):
    id: str | int
    version: int | str | None = None


class Notification(_MercadoPagoModel):
    # Docs and captured payloads disagree on the types of id/user_id: accept both. An order's
    # notification may carry no id of its own (see `event_id`).
    id: str | int | None = None
    type: str | None = None
    action: str | None = None
    date_created: str | None = None
    data: NotificationData

    @property
    def event_id(self) -> str:
        """Its own id, else the resource and the update it announces: an order's
        notification names its order's `data.version`, which each change increments."""
        if self.id is not None and self.id != "":
            return str(self.id)
        return f"{self.data.id}:{self.data.version or self.action or self.type}"


class RefundSource(_MercadoPagoModel):
    type: str | None = None


class Refund(_MercadoPagoModel):
    id: str | int
    amount: DecimalAmount
    date_created: str
    status: str | None = None
    source: RefundSource | None = None

    @property
    def by_buyer_protection(self) -> bool:
        """Given back by Mercado Pago's buyer protection resolving a claim for the buyer, from
        the seller's money: the claim's loss, not a refund the seller gave."""
        return self.source is not None and self.source.type == BUYER_PROTECTION


class Payer(_MercadoPagoModel):
    email: str | None = None


class Payment(_MercadoPagoModel):
    id: str | int
    status: str
    status_detail: str | None = None
    currency_id: Currency
    transaction_amount: DecimalAmount
    transaction_amount_refunded: DecimalAmount | None = None
    # Read as sent: an unusable one is not a malformed payment (see events.py's doc)
    date_approved: Any = None
    date_created: str | None = None
    date_last_updated: str
    external_reference: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    refunds: list[Refund] = Field(default_factory=list)
    payer: Payer | None = None


def moment_or_none(stamp: object) -> int | None:
    """Epoch seconds of an ISO 8601 moment with its offset, or None. A stamp without an offset
    is no moment: it would be read in whatever zone the machine runs in."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    seconds = int(moment.timestamp())
    return seconds if 0 < seconds < MAX_EPOCH_SECONDS else None


def epoch(stamp: object, field: str) -> int:
    seconds = moment_or_none(stamp)
    if seconds is None:
        shown = repr(stamp) if len(repr(stamp)) <= 40 else f"{repr(stamp)[:37]}..."
        raise InvalidFieldError(field, f"{shown} is not an ISO 8601 moment with its offset")
    return seconds
