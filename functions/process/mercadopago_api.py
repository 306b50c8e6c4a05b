"""Mercado Pago's payments API: the notification names a payment; its state lives here."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final

from functions.shared.errors import MalformedEventError, RetryableError, UmavezError

BASE_URL: Final = "https://api.mercadopago.com"


class ProviderApiUnavailableError(RetryableError):
    """Their API did not answer usefully now; the record is retried later."""


class ProviderApiRefusedError(UmavezError):
    """Their API refused our credentials: a configuration problem, sent to the DLQ."""


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
        request = urllib.request.Request(  # noqa: S310 - https base URL from configuration
            f"{self._base_url}/v1/payments/{payment_id}",
            headers={
                "Authorization": f"Bearer {self._access_token()}",
                "Accept": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                payment: Mapping[str, Any] = json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise ProviderApiRefusedError(f"payments API refused us: {exc.code}") from exc
            # 404 included: a notification can precede the payment's visibility. Never drop it.
            raise ProviderApiUnavailableError(f"payments API answered {exc.code}") from exc
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise ProviderApiUnavailableError(f"payments API unreachable: {exc}") from exc
        return payment
