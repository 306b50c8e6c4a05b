"""`umavez send`: what one delivery is, before it is signed and posted as its provider would.

A Stripe event carries its own state. A Mercado Pago notification names a payment and
nothing else: process reads the payment from the payments API. So `send --provider mercadopago`
takes the payment itself, as `GET /v1/payments/{id}` answers it, checks it the way process reads
it, registers it with the fake API, and sends the notification Mercado Pago sends for it. An
order of the Orders API likewise (a file holding `GET /v1/orders/{id}`'s answer: an order with
its `transactions`), notified on topic `order`. A notification file is sent as it is (its
payment or order must be known to the fake already).

A Stripe thin event names its object and nothing else: `send --thin` takes a snapshot event,
registers its object with the fake Stripe API, and sends the thin event Stripe's destination
sends for that change (an id of its own), which process books from the object.

An Asaas event carries its payment, but process books the payment as Asaas's API answers it
(`GET /v3/payments/{id}`): `send --provider asaas` registers the event's payment with the fake
Asaas API, then sends the event as it is.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import ValidationError

from functions.asaas.models import AsaasPayment
from functions.mercadopago import orders as mercadopago_orders
from functions.mercadopago.events import Interpreter as MercadoPagoInterpreter
from functions.mercadopago.models import Notification, Payment
from functions.process.messages import Message
from functions.shared.errors import UmavezError

# Where each provider's event names itself (the fields ingest's envelope reads).
EVENT_FIELDS: Final = {
    "stripe": ("id", "type"),
    "asaas": ("id", "event"),
    "mercadopago": ("id", "action"),
}
PAYMENT_CREATED: Final = "payment.created"
PAYMENT_UPDATED: Final = "payment.updated"


class EventFileError(ValueError):
    """The file is not something its provider sends: nothing was sent."""


def read_event(provider: str, text: str) -> dict[str, Any]:
    """The file's JSON object, which must name itself as the provider's events do (an order's
    notification by its order's version)."""
    document = _json_object(text)
    id_field, type_field = EVENT_FIELDS[provider]
    if not _event_id(provider, document) or not (
        document.get(type_field) or document.get("type")  # a Mercado Pago topic without action
    ):
        raise EventFileError(f"not a {provider} event: it needs {id_field!r} and {type_field!r}")
    return document


def read_stripe_thin(text: str) -> tuple[str, tuple[str, dict[str, Any]]]:
    """The thin event of the snapshot event in `text`, and the object (with its collection)
    Stripe's API must answer for it."""
    from fixtures.stripe import OBJECT_COLLECTIONS, object_of, thin_of

    document = read_event("stripe", text)
    carried = (document.get("data") or {}).get("object")
    if document.get("object") != "event" or not isinstance(carried, dict):
        raise EventFileError("--thin takes a snapshot event (its object in data.object)")
    if carried.get("object") not in OBJECT_COLLECTIONS or not carried.get("id"):
        raise EventFileError(
            f"no thin event is read for a {carried.get('object')!r}: umavez books "
            f"{', '.join(sorted(OBJECT_COLLECTIONS))}"
        )
    return thin_of(text, event_id=f"evt_{secrets.token_hex(12)}"), object_of(text)


def message(provider: str, body: str) -> Message:
    """The queue message ingest makes of a delivery: what `umavez send` then waits for."""
    document = json.loads(body)
    _, type_field = EVENT_FIELDS[provider]
    event_type = document.get(type_field) or document.get("type")
    return Message(provider, body, _event_id(provider, document), str(event_type))


def _event_id(provider: str, document: dict[str, Any]) -> str:
    """The id ingest's envelope reads; "" if the event names none."""
    if provider == "mercadopago" and isinstance(document.get("data"), dict):
        try:
            return Notification.model_validate(document).event_id
        except ValidationError:
            return ""
    return str(document.get(EVENT_FIELDS[provider][0]) or "")


def new_notification_id() -> int:
    """Numeric, as Mercado Pago's notification ids are; a new one per notification."""
    return 10**11 + secrets.randbelow(9 * 10**11)


@dataclass(frozen=True)
class PaymentToSend:
    """A payment (or an order of the Orders API) and the one notification `send` makes of it:
    its id is fixed before the fake says whether the payment is new (`payment.created`) or
    known (`payment.updated`); an order's names its status (`order.processed`)."""

    resource: dict[str, Any]
    notification_id: int = field(default_factory=new_notification_id)
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    is_order: bool = False

    def notification(self, action: str) -> str:
        if self.is_order:
            return order_notification(self.resource, self.at, self.notification_id)
        return mercadopago_notification(self.resource, action, self.at, self.notification_id)


def read_mercadopago(text: str) -> PaymentToSend | None:
    """The payment the file holds, checked; None if the file is a notification instead."""
    document = _json_object(text)
    data = document.get("data")
    if isinstance(data, dict) and "id" in data and document.get("type"):
        read_event("mercadopago", text)
        return None
    if "transactions" in document:
        return PaymentToSend(_order(document), is_order=True)
    return PaymentToSend(_payment(document))


def _order(document: dict[str, Any]) -> dict[str, Any]:
    """The order as process will read it from the Orders API, checked the same way."""
    order_id = str(document.get("id", ""))
    if not order_id.isascii() or not order_id.isalnum():
        raise EventFileError(f"order id {order_id!r} is not alphanumeric")
    check = order_notification(document, datetime.now(UTC), 0)
    try:
        MercadoPagoInterpreter(lambda _: {}, orders=lambda _: document)(check)
    except UmavezError as exc:
        raise EventFileError(f"process could not read this order: {exc}") from exc
    return document


def order_notification(order: Mapping[str, Any], at: datetime, version: int) -> str:
    """The notification Mercado Pago sends when an order changes: no id of its own, the order's
    id, status and `version` in `data` (the transactions it carries are not read: process reads
    the order from the Orders API)."""
    return json.dumps(
        {
            "action": f"{mercadopago_orders.TOPIC}.{order.get('status')}",
            "api_version": "v1",
            "data": {
                "external_reference": order.get("external_reference"),
                "id": str(order["id"]),
                "status": order.get("status"),
                "status_detail": order.get("status_detail"),
                "version": version,
            },
            "date_created": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "live_mode": bool(order.get("live_mode", False)),
            "type": mercadopago_orders.TOPIC,
            "user_id": str(order.get("user_id", "")),
        }
    )


def _payment(document: dict[str, Any]) -> dict[str, Any]:
    """The payment as process will read it from the API: its fields, its id (the API client
    takes alphanumeric ids only), its dates and amounts."""
    try:
        payment = Payment.model_validate(document)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'payment'}: {e['msg']}" for e in exc.errors()
        )
        raise EventFileError(f"not a Mercado Pago payment ({problems})") from exc
    payment_id = str(payment.id)
    if not payment_id.isascii() or not payment_id.isalnum():
        raise EventFileError(f"payment id {payment_id!r} is not alphanumeric")
    check = mercadopago_notification(document, PAYMENT_UPDATED, datetime.now(UTC), 0)
    try:
        MercadoPagoInterpreter(lambda _: document)(check)
    except UmavezError as exc:
        raise EventFileError(f"process could not read this payment: {exc}") from exc
    return document


def mercadopago_notification(
    payment: Mapping[str, Any], action: str, at: datetime, notification_id: int
) -> str:
    """The notification Mercado Pago sends when a payment is created or updated: `data.id` a
    string (the resource's `id` is a number), no status."""
    return json.dumps(
        {
            "action": action,
            "api_version": "v1",
            "data": {"id": str(payment["id"])},
            "date_created": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "id": notification_id,
            "live_mode": bool(payment.get("live_mode", False)),
            "type": "payment",
            "user_id": str(payment.get("collector_id", "")),
        }
    )


def read_asaas(text: str) -> dict[str, Any]:
    """The payment the Asaas event carries, checked as process reads it from the API: what
    `send` registers with the fake Asaas API before posting the event."""
    event = read_event("asaas", text)
    payment = event.get("payment")
    if not isinstance(payment, dict):
        raise EventFileError("an Asaas payment event carries its payment: `payment` is missing")
    try:
        AsaasPayment.model_validate(payment)
    except ValidationError as exc:
        problems = "; ".join(
            f"payment.{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
        )
        raise EventFileError(f"not an Asaas payment ({problems})") from exc
    return payment


def _json_object(text: str) -> dict[str, Any]:
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise EventFileError(f"not JSON: {exc}") from exc
    if not isinstance(document, dict):
        raise EventFileError("not a JSON object")
    return document
