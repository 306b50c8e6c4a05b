"""Asaas's payments API: the webhook names a payment; its state lives here.

`GET /v3/payments/{id}` with the account's API key in the `access_token` header (Asaas's own
scheme, not a bearer token). The payment it answers carries its `refunds[]` and its
`chargeback`, so one read books whatever the event announced. The key is kept in Secrets
Manager (`asaas/api-key`).

A payment Asaas does not know (404) is answered as None: the map records the delivery as
ignored with that reason (a forged or mistaken webhook is not retried into the DLQ). Asaas
creates the payment before it sends any webhook of it, so a 404 is not a lag to wait out.
A throttled (429), failing (5xx) or unreachable API is retried, as Mercado Pago's is.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any, Final

from functions.shared.errors import MalformedEventError, UmavezError
from functions.shared.provider_api import ProviderApiRefusedError, ProviderApiUnavailableError

BASE_URL: Final = "https://api.asaas.com"
PLACEHOLDER: Final = "set-me"
# Asaas refuses requests without a User-Agent (accounts created since mid-2024).
USER_AGENT: Final = "umavez"
_PAYMENT_ID: Final = re.compile(r"^pay_\w+$")
__all__ = [
    "BASE_URL",
    "AsaasApi",
    "AsaasApiNotConfiguredError",
    "ProviderApiRefusedError",
    "ProviderApiUnavailableError",
]


class AsaasApiNotConfiguredError(UmavezError):
    """An Asaas event, and no API key to read its payment with: the record goes to the DLQ
    (alarmed) rather than booking what the body claims."""


class AsaasApi:
    def __init__(
        self,
        api_key: Callable[[], str],
        base_url: str = BASE_URL,
        timeout_seconds: float = 5.0,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds

    def payment(self, payment_id: str) -> Mapping[str, Any] | None:
        """The payment as Asaas answers it; None when Asaas does not know it."""
        if not _PAYMENT_ID.match(payment_id):
            raise MalformedEventError(f"payment id {payment_id!r} is not an Asaas payment id")
        return self.get(f"/v3/payments/{payment_id}", f"reading payment {payment_id}")

    def get(self, path: str, doing: str) -> Mapping[str, Any] | None:
        """What `GET {path}` answers (a JSON object); None on a 404."""
        key = self._api_key()
        if not key or key == PLACEHOLDER:
            raise AsaasApiNotConfiguredError(
                f"{doing} needs an Asaas API key in the asaas/api-key secret"
            )
        request = urllib.request.Request(  # noqa: S310 - https base URL from configuration
            f"{self._base_url}{path}",
            headers={"access_token": key, "Accept": "application/json", "User-Agent": USER_AGENT},
        )
        what = "Asaas's API"
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                body = json.load(response)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise ProviderApiRefusedError(f"{what} refused us: {exc.code}") from exc
            if exc.code == 404:
                return None
            raise ProviderApiUnavailableError(f"{what} answered {exc.code}", exc.code) from exc
        except (urllib.error.URLError, TimeoutError, ValueError) as exc:
            raise ProviderApiUnavailableError(f"{what} unreachable: {exc}") from exc
        if not isinstance(body, Mapping):
            raise ProviderApiUnavailableError(f"{what} answered no object for {path}")
        return body
