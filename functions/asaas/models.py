"""Asaas's event and payment as its map reads them (functions/asaas/events.py), the keys of a
payment's cash receipts and what the ledger holds of them, and Brazil's time its dates are in."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

from functions.shared.domain import Delivery, Interpretation, Transition
from functions.shared.money import InvalidFieldError
from functions.shared.provider_fields import DecimalAmount

PROVIDER: Final = "asaas"
CURRENCY: Final = "brl"
BRAZIL: Final = timezone(timedelta(hours=-3))
IN_CASH: Final = "RECEIVED_IN_CASH"
# Statuses of a payment whose money came in (card, Pix, boleto), whatever happened to it since.
MONEY_IN: Final = frozenset(
    {
        "CONFIRMED",
        "RECEIVED",
        "REFUNDED",
        "REFUND_REQUESTED",
        "REFUND_IN_PROGRESS",
        "CHARGEBACK_REQUESTED",
        "CHARGEBACK_DISPUTE",
        "AWAITING_CHARGEBACK_REVERSAL",
        "DUNNING_RECEIVED",
    }
)
IN_CHARGEBACK: Final = frozenset(
    {"CHARGEBACK_REQUESTED", "CHARGEBACK_DISPUTE", "AWAITING_CHARGEBACK_REVERSAL"}
)
REFUND_DONE: Final = "DONE"
CHARGEBACK_WON: Final = frozenset({"REVERSED"})
CHARGEBACK_LOST: Final = frozenset({"DISPUTE_LOST", "DONE"})
# Mapped to nothing on purpose, each with what the ledger records as the reason.
NOTHING_TO_BOOK: Final[Mapping[str, str]] = {
    "PAYMENT_DELETED": "a deleted charge was never paid: nothing to book",
    "PAYMENT_RESTORED": "a restored charge is pending again: nothing received to book",
}
PAYMENT_ID: Final = r"^pay_\w+$"

# Asaas's payments API: the payment as `GET /v3/payments/{id}` answers it, None when Asaas
# does not know it (404).
PaymentSource = Callable[[str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class CashItem:
    """One of a payment's cash entries the ledger holds: a receipt (`order.paid`) or an undo's
    reversal, whether it counted, and the provider time of the delivery that wrote it."""

    transition: Transition
    ref: str
    counted: bool
    at: int


# What the ledger holds of a payment's cash receipts: given the order the payment names (None:
# found through the payment's binding) and the payment id. A dependency, as Mercado Pago's
# DisputeBooks is, so the map stays a function of what it reads.
CashBooks = Callable[[str | None, str], Sequence[CashItem]]


def nothing_in_cash(order_id: str | None, payment_id: str) -> Sequence[CashItem]:
    return ()


def cash_ref(payment_id: str, after_undo: int | None) -> str:
    """The key of a cash receipt: the first, or the one received after the undo at `after_undo`."""
    return f"{payment_id}:cash" if after_undo is None else f"{payment_id}:cash:{after_undo}"


def cash_ref_start(payment_id: str, ref: str) -> int | None:
    """The undo a cash receipt's ref follows (None: the first receipt, or not a cash ref)."""
    rest = ref.removeprefix(f"{payment_id}:cash:")
    return int(rest) if rest != ref and rest.isdigit() else None


def is_cash_ref(payment_id: str, ref: str) -> bool:
    return ref == cash_ref(payment_id, None) or cash_ref_start(payment_id, ref) is not None


class _AsaasModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AsaasRefund(_AsaasModel):
    dateCreated: str
    status: str | None = None
    value: DecimalAmount


class AsaasChargeback(_AsaasModel):
    status: str | None = None
    value: DecimalAmount | None = None


class AsaasPayment(_AsaasModel):
    """The payment as Asaas's API answers it."""

    id: str = Field(pattern=PAYMENT_ID)
    value: DecimalAmount
    status: str | None = None
    deleted: bool = False
    externalReference: str | None = None
    installment: str | None = None
    refunds: list[AsaasRefund] | None = None
    chargeback: AsaasChargeback | None = None


class NamedPayment(_AsaasModel):
    """What the webhook says of its payment that is used: which payment (nothing else)."""

    id: str = Field(pattern=PAYMENT_ID)


class AsaasEvent(_AsaasModel):
    id: str = Field(min_length=1)
    event: str = Field(min_length=1)
    dateCreated: str
    payment: NamedPayment | None = None


Reader = Callable[[AsaasPayment, Delivery, "CashBooks"], tuple[Interpretation, ...]]


def brazil_epoch(stamp: str, field: str) -> int:
    try:
        moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=BRAZIL)
    except ValueError as exc:
        shown = repr(stamp) if len(stamp) <= 40 else f"{stamp[:37]!r}..."
        raise InvalidFieldError(field, f"{shown} is not a date as Asaas sends it") from exc
    return int(moment.timestamp())
