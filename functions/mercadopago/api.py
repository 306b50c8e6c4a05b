"""Mercado Pago's payments and orders APIs: a notification names a payment (topic `payment`) or
an order of the Orders API (topic `order`); its state lives here."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from functions.shared.errors import MalformedEventError
from functions.shared.provider_api import (
    ProviderApiRefusedError,
    ProviderApiUnavailableError,
    get_json,
)

BASE_URL: Final = "https://api.mercadopago.com"
__all__ = ["BASE_URL", "MercadoPagoApi", "ProviderApiRefusedError", "ProviderApiUnavailableError"]


class MercadoPagoApi:
    def __init__(
        self,
        access_token: Callable[[], str],
        base_url: str = BASE_URL,
        timeout_seconds: float = 5.0,
    ) -> None:
        self._access_token = access_token
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds

    def payment(self, payment_id: str) -> Mapping[str, Any]:
        if not payment_id.isascii() or not payment_id.isalnum():
            raise MalformedEventError(f"payment id {payment_id!r} is not alphanumeric")
        return get_json(
            f"{self._base_url}/v1/payments/{payment_id}",
            self._access_token(),
            self._timeout,
            "Mercado Pago payments API",
        )

    def order(self, order_id: str) -> Mapping[str, Any]:
        """`GET /v1/orders/{id}`: the order with its transactions (payments, refunds)."""
        if not order_id.isascii() or not order_id.isalnum():
            raise MalformedEventError(f"order id {order_id!r} is not alphanumeric")
        return get_json(
            f"{self._base_url}/v1/orders/{order_id}",
            self._access_token(),
            self._timeout,
            "Mercado Pago orders API",
        )
