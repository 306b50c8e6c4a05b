"""Stripe's API, read with a restricted, read-only key kept in Secrets Manager:

- the refunds of a charge, for charge.refunded on API versions that name no refund: from
  2022-11-15 until 2024-10-28.acacia a card refund reaches a webhook endpoint only as
  `charge.refunded`, carrying the cumulative `amount_refunded`; the refunds themselves (each
  with its `re_…` id, the key of its entry) are listed by `GET /v1/refunds?charge=…`;
- the object a thin event names (`GET /v1/payment_intents/{id}`, `/v1/charges/{id}`, …), in
  the API version asked for (`Stripe-Version`) and, for a connected account's event, in its
  context (`Stripe-Context`).
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from functions.shared.errors import MalformedEventError
from functions.shared.provider_api import get_json
from functions.stripe.models import StripeApiNotConfiguredError

BASE_URL: Final = "https://api.stripe.com"
PAGE_SIZE: Final = 100
MAX_PAGES: Final = 20  # 2,000 refunds of one charge: far beyond any real charge
PLACEHOLDER: Final = "set-me"
_CHARGE_ID: Final = re.compile(r"^(ch|py)_\w+$")


class StripeApi:
    def __init__(
        self,
        api_key: Callable[[], str],
        base_url: str = BASE_URL,
        timeout_seconds: float = 5.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._api_key = api_key
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._page_size = page_size

    def _key(self, reading: str) -> str:
        key = self._api_key()
        if not key or key == PLACEHOLDER:
            raise StripeApiNotConfiguredError(
                f"reading {reading} needs a Stripe API key (restricted, read-only) in the "
                "stripe/api-key secret"
            )
        return key

    def related_object(self, path: str, context: str | None, api_version: str) -> Mapping[str, Any]:
        """The object at `path` (built by the thin-event reader, never taken from a body)."""
        headers = {"Stripe-Version": api_version}
        if context:
            headers["Stripe-Context"] = context
        return get_json(
            f"{self._base_url}{path}",
            self._key(path),
            self._timeout,
            "Stripe API",
            headers=headers,
        )

    def refunds_of_charge(self, charge_id: str) -> Sequence[Mapping[str, Any]]:
        """Every refund of the charge, page after page (`starting_after`)."""
        if not _CHARGE_ID.match(charge_id):
            raise MalformedEventError(f"charge id {charge_id!r} is not a Stripe charge id")
        key = self._key(f"the refunds of {charge_id}")
        refunds: list[Mapping[str, Any]] = []
        query: dict[str, str | int] = {"charge": charge_id, "limit": self._page_size}
        for _ in range(MAX_PAGES):
            url = f"{self._base_url}/v1/refunds?{urllib.parse.urlencode(query)}"
            page = get_json(url, key, self._timeout, "Stripe refunds API")
            data = page.get("data")
            if not isinstance(data, list):
                raise MalformedEventError(f"Stripe refunds API answered no list for {charge_id}")
            refunds += data
            if not page.get("has_more") or not data:
                return refunds
            query["starting_after"] = str(data[-1]["id"])
        raise MalformedEventError(f"charge {charge_id} lists more than {len(refunds)} refunds")
