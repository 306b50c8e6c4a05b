"""Asaas: the webhook carries the whole payment; the payment id names the effect.

Map (one place; anything else is ignored):
- PAYMENT_CONFIRMED (card approved) and PAYMENT_RECEIVED (money in) are one payment: one
  effect keyed by the payment id, whichever arrives first.
- PAYMENT_REFUNDED is the full refund of that payment. PAYMENT_PARTIALLY_REFUNDED names no
  refund (its `refunds` entries carry no id), so two partials could not be told apart: ignored.
- PAYMENT_CHARGEBACK_REQUESTED opens the payment's dispute.
`dateCreated` has no zone: it is Brazil's official time, UTC-3 (no daylight time since 2019).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.domain import Delivery, Effect, Interpretation, Money, NoEffect, Transition
from functions.shared.errors import MalformedEventError
from functions.shared.providers._amounts import minor_units

PROVIDER: Final = "asaas"
BRAZIL: Final = timezone(timedelta(hours=-3))


class _AsaasModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AsaasPayment(_AsaasModel):
    id: str = Field(pattern=r"^pay_\w+$")
    value: float | int | str
    externalReference: str | None = None


class AsaasEvent(_AsaasModel):
    id: str = Field(min_length=1)
    event: str = Field(min_length=1)
    dateCreated: str
    payment: AsaasPayment | None = None


@dataclass(frozen=True)
class AsaasRule:
    transition: Transition
    suffix: str


ASAAS_EVENTS: Final[Mapping[str, AsaasRule]] = {
    "PAYMENT_CONFIRMED": AsaasRule(Transition.PAID, ""),
    "PAYMENT_RECEIVED": AsaasRule(Transition.PAID, ""),
    "PAYMENT_REFUNDED": AsaasRule(Transition.REFUNDED, ":refund"),
    "PAYMENT_CHARGEBACK_REQUESTED": AsaasRule(Transition.DISPUTED, ":chargeback"),
}
NAMED_NO_EFFECT: Final[Mapping[str, str]] = {
    "PAYMENT_PARTIALLY_REFUNDED": "names no refund; two partial refunds could not be told apart",
}


def interpret(raw_body: str) -> tuple[Interpretation]:
    try:
        event = AsaasEvent.model_validate_json(raw_body)
        created = datetime.strptime(event.dateCreated, "%Y-%m-%d %H:%M:%S").replace(tzinfo=BRAZIL)
    except (ValidationError, ValueError) as exc:
        raise MalformedEventError(f"not an Asaas event: {exc}") from exc
    delivery = Delivery(PROVIDER, event.id, event.event, int(created.timestamp()))
    rule = ASAAS_EVENTS.get(event.event)
    if rule is None:
        return (NoEffect(delivery, NAMED_NO_EFFECT.get(event.event, "event has no mapped effect")),)
    if event.payment is None:
        raise MalformedEventError(f"{event.event} {event.id} carries no payment")
    payment = event.payment
    return (
        Effect(
            delivery=delivery,
            transition=rule.transition,
            external_ref=payment.id + rule.suffix,
            amount=Money(minor_units(payment.value), "brl"),
            order_id=payment.externalReference or None,
        ),
    )
