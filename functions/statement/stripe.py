"""Stripe's balance transactions: every movement on the account's balance, over a window.

`GET /v1/balance_transactions?created[gte]=…&created[lt]=…&expand[]=data.source`, newest first,
paged with `starting_after` while `has_more`. Each line carries `amount`, `fee` and `net` in the
account's settlement currency and, expanded, the object that moved (a charge, a refund, a
dispute). The key is a restricted one with "Balance: read" (and the read of each source type it
expands: Charges, Refunds, Disputes); docs/statement.md names it.

Stripe answers 429 when a key reads faster than its limit, and a 5xx when it cannot answer
now: each is tried again after a pause that doubles, a few times, before the read stops with
the cursor that resumes it (functions/statement/reading.py).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from pydantic import ValidationError

from functions.shared.errors import MalformedEventError
from functions.shared.provider_api import get_json
from functions.shared.provider_fields import refused
from functions.statement.lines import Line
from functions.statement.reading import StatementNotConfiguredError, read_page
from functions.stripe.api import BASE_URL, PLACEHOLDER
from functions.stripe.balance import (
    STATEMENT_MOVEMENTS,
    ListedBalanceTransaction,
    statement_readings,
)
from functions.stripe.models import PROVIDER

PAGE_SIZE: Final = 100  # the most Stripe lists a page
# A movement's line exists once the movement does (a charge's at its capture, a refund's at its
# creation); a window is read once its end is this far in the past, so that no line is still
# being written into it.
SETTLE_SECONDS: Final = 300


@dataclass(frozen=True)
class StatementPage:
    lines: tuple[ListedBalanceTransaction, ...]
    resume: str  # `starting_after` for the page after this one


class StripeBalance:
    def __init__(
        self,
        api_key: Callable[[], str],
        sleep: Callable[[float], None],
        base_url: str = BASE_URL,
        timeout_seconds: float = 10.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._api_key = api_key
        self._sleep = sleep
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._page_size = page_size

    def pages(
        self, since: int, until: int, starting_after: str | None = None
    ) -> Iterator[StatementPage]:
        """The lines created in [since, until), a page at a time, from `starting_after` on.
        Checks the key now: a refusal reads nothing."""
        key = self._api_key()
        if not key or key == PLACEHOLDER:
            raise StatementNotConfiguredError(
                "reading Stripe's balance needs an API key (restricted: Balance, Charges, "
                "Refunds and Disputes read) in the stripe/api-key secret"
            )
        return self._pages(key, since, until, starting_after)

    def _pages(
        self, key: str, since: int, until: int, after: str | None
    ) -> Iterator[StatementPage]:
        while True:
            query: list[tuple[str, str | int]] = [
                ("created[gte]", since),
                ("created[lt]", until),
                ("limit", self._page_size),
                ("expand[]", "data.source"),
            ]
            if after:
                query.append(("starting_after", after))
            listed = self._read(f"{self._base_url}/v1/balance_transactions?", query, key, after)
            data = listed.get("data")
            if not isinstance(data, list):
                raise MalformedEventError("Stripe's balance transactions API answered no list")
            try:
                lines = tuple(ListedBalanceTransaction.model_validate(line) for line in data)
            except ValidationError as exc:
                raise refused(exc, "data", "not a Stripe balance transaction") from exc
            if lines:
                after = lines[-1].id
                yield StatementPage(lines, after)
            if not listed.get("has_more") or not lines:
                return

    def _read(
        self, url: str, query: list[tuple[str, str | int]], key: str, after: str | None
    ) -> Mapping[str, Any]:
        return read_page(
            lambda: get_json(url + urllib.parse.urlencode(query), key, self._timeout, "Stripe"),
            self._sleep,
            "Stripe's balance transactions API",
            after,
        )


def line_of(listed: ListedBalanceTransaction) -> Line:
    """A balance transaction as the pass reads it."""
    source = listed.source_object or {}
    # A charge moved its payment (the PaymentIntent, when it has one); anything else itself.
    named = (source.get("payment_intent"), listed.source_id)
    if listed.reporting_category != "charge":
        named = (listed.source_id, None)
    moves = tuple(str(ref) for ref in dict.fromkeys(named) if ref)
    line = Line(
        PROVIDER,
        listed.id,
        listed.reporting_category,
        listed.created,
        listed.fee,
        listed.net,
        listed.currency,
        moves,
        moves_money=listed.reporting_category in STATEMENT_MOVEMENTS,
        # The line's own amount is the capture's while it settled in the payment's currency.
        capture=listed.amount if listed.exchange_rate is None else None,
    )
    try:
        return replace(line, readings=tuple(statement_readings(listed)))
    except MalformedEventError as exc:
        return replace(line, unreadable=str(exc))
