"""Asaas's payments API for tests that are not about reading it: it answers each payment as
the last webhook delivered of it carried it (`AsaasAsDelivered`). Tests of the read itself use
the HTTP fake (devstack/provider_apis.py), and the histories the simulator's payments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from functions.process.asaas_cash import LedgerCash
from functions.process.interpreters import Interpreters
from functions.process.service import EffectProcessor
from functions.shared import tables

if TYPE_CHECKING:
    from collections.abc import Callable

    from mypy_boto3_dynamodb import DynamoDBClient


class AsaasAsDelivered:
    """A `PaymentSource` that knows what the webhooks delivered so far said of each payment."""

    def __init__(self) -> None:
        self.payments: dict[str, dict[str, Any]] = {}

    def __call__(self, payment_id: str) -> Mapping[str, Any] | None:
        return self.payments.get(payment_id)

    def carried_by(self, body: str) -> str:
        """Asaas knows the payment as `body` carries it from now on; the body, unchanged."""
        try:
            payment = json.loads(body).get("payment")
        except (ValueError, AttributeError):
            return body
        if isinstance(payment, dict) and isinstance(payment.get("id"), str):
            self.payments[payment["id"]] = payment
        return body


def processor_factory(
    clock: Callable[[], float], asaas: AsaasAsDelivered
) -> Callable[[DynamoDBClient, tables.TableNames], EffectProcessor]:
    """EffectProcessor as the tests' world makes it: Asaas's payments from `asaas`, its cash
    receipts from the ledger."""

    def make(dynamodb: DynamoDBClient, names: tables.TableNames) -> EffectProcessor:
        interpreters = Interpreters.build(
            asaas_payments=asaas, asaas_cash=LedgerCash(dynamodb, names.ledger)
        )
        return EffectProcessor(dynamodb, names, clock, interpreters)

    return make


def asaas_webhook(webhook_id: str, url: str, **state: bool) -> dict[str, Any]:
    """One of the account's webhooks as Asaas's webhooks API answers it (`GET /v3/webhooks`):
    umavez's when its URL ends in /webhooks/asaas."""
    return {
        "id": webhook_id,
        "name": "umavez" if url.endswith("/webhooks/asaas") else "erp",
        "url": url,
        "email": "oncall@example.com",
        "enabled": True,
        "interrupted": False,
        "apiVersion": 3,
        "hasAuthToken": True,
        "sendType": "SEQUENTIALLY",
        "penalizedRequestsCount": 0,
        "events": ["PAYMENT_CONFIRMED", "PAYMENT_RECEIVED", "PAYMENT_REFUNDED"],
        **state,
    }
