"""What each provider's pass reads of its books, and how often: the schedule's cadence per
provider (functions/statement/sources.py `CADENCES`), how many passes read each line (an hourly
pass its edges again; Asaas's daily pass each day once), the pages and the objects read one by
one, and process's own reads against the same limit."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from costmodel.limits import DAY, HOUR
from functions.statement import asaas as asaas_statement
from functions.statement import mercadopago as mercadopago_statement
from functions.statement import stripe as stripe_statement
from functions.statement.schedule import BOOKING_WORKERS
from functions.statement.service import EDGE_SECONDS
from functions.statement.sources import CADENCES
from functions.statement.sources import EDGE_SECONDS as PROVIDER_EDGE_SECONDS
from functions.statement.sources import SETTLE_SECONDS as PROVIDER_SETTLE_SECONDS
from infra import settings

DAY_HOURS: Final = 24
# Lines booked side by side by one invocation.
WORKERS: Final = BOOKING_WORKERS
EVERY_MINUTES: Final = settings.SCHEDULE_MINUTES["statement"]
# The window a pass reads ends this long ago: a movement's line lags it by seconds.
SETTLE_SECONDS: Final = stripe_statement.SETTLE_SECONDS


def period_seconds(provider: str) -> float:
    """How often the schedule reads the provider's books, and how long a window it reads then:
    the hourly rule's interval, or a day."""
    cadence = CADENCES[provider]
    return float(cadence.window_seconds) if cadence.by_day else EVERY_MINUTES * 60.0


def run_after_window_seconds(provider: str) -> float:
    """How long after its window's end a pass runs: the settle lag (hourly, the rule fires at a
    minute nobody chose: `statement_hour_fraction` counts it), or the daily rule's time after
    the zone's midnight (its settle lag, to the next quarter hour)."""
    cadence = CADENCES[provider]
    if not cadence.by_day:
        return float(PROVIDER_SETTLE_SECONDS[provider])
    hour, minute = cadence.settled_at_utc(PROVIDER_SETTLE_SECONDS[provider])
    midnight_hour, midnight_minute = cadence.settled_at_utc(0)
    minutes = (hour - midnight_hour) * 60 + minute - midnight_minute
    return float(minutes % (24 * 60) * 60)


def hours_read_of_each_hour() -> float:
    """How many hourly passes read each hour of a provider's books listed by time (Stripe,
    Mercado Pago): each pass reads its hour, `EDGE_SECONDS` before it and up to now (its
    window ends `SETTLE_SECONDS` ago)."""
    return (HOUR + EDGE_SECONDS + SETTLE_SECONDS) / HOUR


def days_read_of_each_day(provider: str = "asaas") -> float:
    """How many daily passes read each day of a provider's books listed by day (Asaas): the
    day's own, once it ended, with no edges (a line carries its day only)."""
    return (DAY + 2 * PROVIDER_EDGE_SECONDS[provider]) / DAY


def hours_read_of_each_day_hour() -> float:
    """Why Asaas's pass is daily: were it hourly, each pass would read every line of its
    window's first day up to now, so the pass at 23:30 reads the whole day again. The mean,
    over the 24 passes of a day (each at the half hour), of the hours of lines one reads, per
    hour of lines: 12.5 and more (the first passes of a day read the day before too)."""
    read = 0.0
    for hour in range(DAY_HOURS):
        now = hour + 0.5
        first = now - (HOUR + SETTLE_SECONDS + EDGE_SECONDS) / HOUR
        read += now + (DAY_HOURS if first < 0 else 0)
    return read / DAY_HOURS


@dataclass(frozen=True)
class ProviderRead:
    """What one provider's pass reads per payment: its statement's rows, in pages, and the
    objects it asks for one by one; how often each is read again; how often the pass runs; and
    the calls process makes against the same limit."""

    provider: str
    rows_per_payment: float  # statement rows a payment brings (its own, its refunds', its fee's)
    page_size: int
    gets_per_row_read: float  # objects read one by one per payment each time its rows are read
    gets_per_payment_once: float  # objects read once per payment (the match's own lookups)
    reads_of_each_row: float  # passes reading each row (edges, whole days)
    period_seconds: float = HOUR  # how often a pass runs, and the window it reads
    # Calls process makes per payment against the same limit (Asaas's quota is the account's,
    # whatever the endpoint; Stripe's limit that applies is the balance endpoint's own).
    process_calls_per_payment: float = 0.0
    # Objects read at once: the payments a read names (its readers), and those the match asks
    # for (its workers).
    gets_at_once: int = 1

    def calls_per_payment(self) -> float:
        pages = self.rows_per_payment / self.page_size
        return self.reads_of_each_row * (pages + self.gets_per_row_read) + (
            self.gets_per_payment_once
        )

    def pages_per_payment(self) -> float:
        return self.reads_of_each_row * self.rows_per_payment / self.page_size

    def gets_per_payment(self) -> float:
        return self.reads_of_each_row * self.gets_per_row_read + self.gets_per_payment_once


def provider_reads(assumptions: Mapping[str, float]) -> dict[str, ProviderRead]:
    """Each provider's reads, from the readers' page sizes and the stated assumptions: refunds
    per payment (`statement_refunds_per_payment`); Asaas's payments whose line comes after
    their window (card payments, credited about 30 days later: the match asks the API for each,
    `statement_asaas_lagging_share`). Process reads an Asaas payment for each event it books:
    its receipt, a card payment's confirmation before it, each refund."""
    refunds = assumptions["statement_refunds_per_payment"]
    lagging = assumptions["statement_asaas_lagging_share"]
    edges = hours_read_of_each_hour()
    return {
        # A balance transaction per charge and per refund, its source expanded.
        "stripe": ProviderRead("stripe", 1 + refunds, stripe_statement.PAGE_SIZE, 0, 0, edges),
        # A payment per search result, its refunds inside it.
        "mercadopago": ProviderRead("mercadopago", 1, mercadopago_statement.PAGE_SIZE, 0, 0, edges),
        # Its receipt and Asaas's fee, a row per refund; each payment named is read once a pass,
        # each day once.
        "asaas": ProviderRead(
            "asaas",
            2 + refunds,
            asaas_statement.PAGE_SIZE,
            1,
            lagging,
            days_read_of_each_day(),
            period_seconds("asaas"),
            1 + lagging + refunds,
            min(asaas_statement.PAYMENT_READERS, WORKERS),
        ),
    }
