"""Registering what the fake provider APIs serve, from another process (`umavez send`, the
drill, tests): one PUT to the fake's own paths (`/__fake__/...`, see `devstack/provider_apis.py`),
with the provider's credential.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

FAKE_PAYMENTS_PATH = "/__fake__/v1/payments/"
FAKE_ORDERS_PATH = "/__fake__/v1/orders/"
FAKE_STRIPE_PATH = "/__fake__/v1/"
FAKE_ASAAS_PAYMENTS_PATH = "/__fake__/v3/payments/"
FAKE_ASAAS_STATEMENT_PATH = "/__fake__/v3/financialTransactions/"
FAKE_ASAAS_WEBHOOKS_PATH = "/__fake__/v3/webhooks/"


class FakeApiError(Exception):
    """The fake provider API could not be reached, or refused what it was given."""


def register_mercadopago_payment(
    api_url: str, token: str, payment: dict[str, Any], timeout_seconds: float = 5.0
) -> bool:
    """Registers (or replaces) a payment with the fake Mercado Pago API; True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_PAYMENTS_PATH}{payment['id']}"
    headers = {"Authorization": f"Bearer {token}"}
    return _put_fake(url, headers, payment, "Mercado Pago", timeout_seconds)


def register_mercadopago_order(
    api_url: str, token: str, order: dict[str, Any], timeout_seconds: float = 5.0
) -> bool:
    """Registers (or replaces) an order with the fake Mercado Pago Orders API; True if new."""
    url = f"{api_url.rstrip('/')}{FAKE_ORDERS_PATH}{order['id']}"
    return _put_fake(
        url, {"Authorization": f"Bearer {token}"}, order, "Mercado Pago", timeout_seconds
    )


def register_asaas_payment(
    api_url: str, api_key: str, payment: dict[str, Any], timeout_seconds: float = 5.0
) -> bool:
    """Registers (or replaces) a payment with the fake Asaas API; True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_ASAAS_PAYMENTS_PATH}{payment['id']}"
    return _put_fake(url, {"access_token": api_key}, payment, "Asaas", timeout_seconds)


def register_asaas_webhook(api_url: str, api_key: str, webhook: dict[str, Any]) -> bool:
    """Registers (or replaces) one of the account's webhooks with the fake Asaas API (a queue
    paused: `"interrupted": true`); True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_ASAAS_WEBHOOKS_PATH}{webhook['id']}"
    return _put_fake(url, {"access_token": api_key}, webhook, "Asaas", 5.0)


def register_asaas_transaction(api_url: str, api_key: str, line: dict[str, Any]) -> bool:
    """Registers (or replaces) a line of Asaas's statement with the fake; True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_ASAAS_STATEMENT_PATH}{line['id']}"
    return _put_fake(url, {"access_token": api_key}, line, "Asaas", 5.0)


def register_stripe_object(
    api_url: str, api_key: str, collection: str, stripe_object: dict[str, Any]
) -> bool:
    """Registers (or replaces) what Stripe's books hold with the fake Stripe API: a balance
    transaction (`balance_transactions`) or an object by id (`STRIPE_OBJECTS`: the sources a
    line names, the objects a thin event names). True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_STRIPE_PATH}{collection}/{stripe_object['id']}"
    return _put_fake(url, {"Authorization": f"Bearer {api_key}"}, stripe_object, "Stripe", 5.0)


def _put_fake(
    url: str, headers: dict[str, str], body: dict[str, Any], provider: str, timeout: float
) -> bool:
    api_url = url.split("/__fake__/", 1)[0]
    request = urllib.request.Request(  # noqa: S310 - the local fake, http on loopback
        url,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={**headers, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return int(response.status) == 201
    except urllib.error.HTTPError as exc:
        reason = exc.read().decode(errors="replace")
        raise FakeApiError(
            f"the fake {provider} API at {api_url} answered {exc.code}: {reason}"
        ) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise FakeApiError(
            f"no fake {provider} API at {api_url} (is `umavez serve` running?): {exc}"
        ) from exc
