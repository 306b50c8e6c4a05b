"""Stripe's balance, its own books: each balance transaction read from its source exactly as
the event announcing it is read (functions/stripe/events.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import Field, ValidationError

from functions.shared.domain import VIA_STATEMENT, Delivery, NoEffect
from functions.shared.errors import MalformedEventError
from functions.shared.provider_fields import Currency, EpochSeconds, refused
from functions.stripe.events import STRIPE_EVENTS
from functions.stripe.models import PROVIDER, StripeEvent, StripeEventData, StripeModel
from functions.stripe.reading import Readings

# A balance transaction's `reporting_category` -> the event whose map reads its source (the
# object it moved, expanded with `expand[]=data.source`) as that movement: the statement books
# the same effects, under the same keys, as the deliveries announcing it. Each source is read
# as it is now (a dispute already decided books its opening and its verdict; a refund that has
# failed since books nothing). Other categories (fees, payouts, transfers) move no order's money.
STATEMENT_MOVEMENTS: Final[Mapping[str, str]] = {
    "charge": "charge.captured",
    "refund": "refund.updated",
    "refund_failure": "refund.failed",
    "dispute": "charge.dispute.funds_withdrawn",
    "dispute_reversal": "charge.dispute.closed",
}
STATEMENT_LINE: Final = "balance_transaction"  # the event type prefix of a statement line


class StatementSourceMissingError(MalformedEventError):
    """A statement line whose moved object was not expanded: what it moved cannot be read."""


class ListedBalanceTransaction(StripeModel):
    """One line of the balance (`GET /v1/balance_transactions`): amount, fee and net in the
    account's settlement currency; `source` the object that moved, expanded or its id."""

    id: str = Field(pattern=r"^txn_\w+$")
    amount: int = Field(strict=True)
    fee: int = Field(strict=True)
    net: int = Field(strict=True)
    currency: Currency
    created: EpochSeconds
    reporting_category: str
    type: str
    exchange_rate: float | None = None
    source: dict[str, Any] | str | None = None

    @property
    def source_object(self) -> Mapping[str, Any] | None:
        return self.source if isinstance(self.source, dict) else None

    @property
    def source_id(self) -> str | None:
        if isinstance(self.source, dict):
            return str(self.source.get("id") or "") or None
        return self.source


def statement_readings(line: ListedBalanceTransaction) -> Readings:
    """What a balance transaction moved, read from its source exactly as the event that
    announces it is read; nothing for a line that moves no order's money."""
    delivery = Delivery(
        PROVIDER,
        line.id,
        f"{STATEMENT_LINE}.{line.reporting_category}",
        line.created,
        via=VIA_STATEMENT,
    )
    event_type = STATEMENT_MOVEMENTS.get(line.reporting_category)
    if event_type is None:
        return (NoEffect(delivery, f"{line.reporting_category!r} moves no order's money"),)
    source = line.source_object
    if source is None:
        raise StatementSourceMissingError(
            f"balance transaction {line.id} ({line.reporting_category}) came without its "
            "source expanded (list it with expand[]=data.source)"
        )
    # The map reads the event's object only: the line stands in for the event.
    event = StripeEvent.model_construct(
        id=line.id,
        object="event",
        type=event_type,
        created=line.created,
        api_version=None,
        data=StripeEventData(object=dict(source)),
    )
    try:
        return STRIPE_EVENTS[event_type].read(event, delivery)
    except ValidationError as exc:
        raise refused(exc, "source") from exc
