"""A window of one provider's statement, read whole: its lines, and how to ask the provider
about an entry none of them moved. The operator's command and the scheduled function read
through here, so both read the same books the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
from functions.asaas.api import AsaasApi
from functions.asaas.models import BRAZIL
from functions.mercadopago.api import BASE_URL as MERCADOPAGO_BASE_URL
from functions.mercadopago.models import DisputeBooks
from functions.statement import asaas, mercadopago, service, stripe
from functions.statement.cadence import HOURLY, Cadence, daily
from functions.statement.lines import Line
from functions.stripe.api import BASE_URL as STRIPE_BASE_URL

PROVIDERS: Final = ("stripe", "mercadopago", "asaas")
# How often the stack's schedule reads each provider's statement. Asaas's is listed by whole
# Brazil days: an hourly pass would read the day so far and every payment it names again, and
# spend the account's API quota (25,000 requests every 12 hours, shared with process's payment
# reads) from a few payments a minute; read once a day, after the day ended, each line and
# each payment it names is read once.
CADENCES: Final[Mapping[str, Cadence]] = {
    "stripe": HOURLY,
    "mercadopago": HOURLY,
    "asaas": daily(BRAZIL),
}
SCHEDULED: Final = tuple(CADENCES)
HOURLY_SCHEDULED: Final = tuple(p for p, c in CADENCES.items() if not c.by_day)
DAILY_SCHEDULED: Final = tuple(p for p, c in CADENCES.items() if c.by_day)
DEFAULT_API_URLS: Final = {
    "stripe": STRIPE_BASE_URL,
    "mercadopago": MERCADOPAGO_BASE_URL,
    "asaas": ASAAS_BASE_URL,
}
# How long after a movement its line is surely on the statement: a window is read once its end
# is this far in the past.
SETTLE_SECONDS: Final = {
    "stripe": stripe.SETTLE_SECONDS,
    "mercadopago": mercadopago.SETTLE_SECONDS,
    "asaas": asaas.SETTLE_SECONDS,
}
# How far beyond a window's edges its lines are read, so that an entry whose delivery came
# seconds after its movement finds its line. Asaas's lines carry their day only: a window of
# whole days reads those days, and an entry whose line is on another day is asked of Asaas's
# payments API (`known`), as one whose card payment is credited a month later is.
EDGE_SECONDS: Final = {
    "stripe": service.EDGE_SECONDS,
    "mercadopago": service.EDGE_SECONDS,
    "asaas": 0,
}


@dataclass(frozen=True)
class StatementRead:
    lines: list[Line]
    # The provider asked of an entry no line moved (None: a line-less entry is unknown to it).
    known: Callable[[Mapping[str, Any]], bool] | None = None


class StatementReader(Protocol):
    """What the scheduled pass reads a provider's statement through."""

    @property
    def provider(self) -> str: ...

    def read(self, first: int, last: int, now: int) -> StatementRead: ...


@dataclass(frozen=True)
class StatementSource:
    """One provider's statement API, with the credential that reads it."""

    provider: str
    credential: Callable[[], str]
    base_url: str
    sleep: Callable[[float], None]
    disputes: DisputeBooks

    def read(
        self, first: int, last: int, now: int, starting_after: str | None = None
    ) -> StatementRead:
        """Every line of [first, last): Stripe's by their creation; Mercado Pago's payments
        updated since `first` up to now (a payment booked in the window and changed after it
        is listed by its last update only); Asaas's days, Brazil's, from `first`'s to the last
        one [first, min(last, now)) touches, each payment they name read once (whichever line
        or entry asks for it). Raises StatementInterruptedError when the API kept failing
        (nothing is booked then)."""
        if self.provider == "stripe":
            balance = stripe.StripeBalance(self.credential, self.sleep, self.base_url)
            listed = balance.pages(first, min(last, now), starting_after)
            return StatementRead([stripe.line_of(line) for page in listed for line in page.lines])
        if self.provider == "mercadopago":
            search = mercadopago.MercadoPagoPaymentsSearch(
                self.credential, self.sleep, self.base_url
            )
            searched = search.pages(_instant(first), _instant(now))
            found = [payment for page in searched for payment in page.payments]
            return StatementRead(
                mercadopago.payment_lines(found, self.disputes),
                mercadopago.outside_payments_search,
            )
        if self.provider == "asaas":
            api = AsaasApi(self.credential, self.base_url)
            days = asaas.AsaasStatement(api, self.sleep).pages(
                _instant(first).astimezone(BRAZIL).date(),
                _instant(max(min(last, now) - 1, first)).astimezone(BRAZIL).date(),
            )
            transactions = [t for page in days for t in page.transactions]
            # Once a read, side by side: a payment named by several lines, or by a line and an
            # entry, is one request of the account's quota.
            payment = asaas.payments_read(api.payment, self.sleep, transactions)
            return StatementRead(
                asaas.statement_lines(transactions, payment), asaas.known_to_asaas(payment)
            )
        raise ValueError(f"no statement is read for provider {self.provider!r}")


def _instant(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
