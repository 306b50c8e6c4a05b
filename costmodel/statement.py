"""The scheduled statement passes, modeled (the scenarios keep no provider's books): their
DynamoDB as statement.toml counts it, their API calls from the readers' page sizes and how often
a line is read again, their time at `[latency_ms]` plus process's own work on the same path."""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from costmodel.measurement import (
    DAY,
    HOUR,
    Measurement,
    Prices,
    ProviderLimit,
    Quotas,
    Sample,
    of_kind,
)
from devstack.capacity import Units
from functions.shared.tables import CHANGES_SHARDS
from functions.statement import asaas, mercadopago, stripe
from functions.statement.schedule import BOOKING_WORKERS
from functions.statement.service import EDGE_SECONDS
from functions.statement.sources import CADENCES, SCHEDULED, SETTLE_SECONDS
from functions.statement.sources import EDGE_SECONDS as PROVIDER_EDGE_SECONDS
from infra import settings

TIMEOUT_SECONDS = settings.STATEMENT_TIMEOUT_SECONDS
WORKERS = BOOKING_WORKERS  # lines booked side by side by one invocation
GB = settings.LAMBDA_MEMORY_MB["statement"] / 1024
PRICED_AS = "stripe"  # whose reads price the line in the cost per event (the scenarios')
ALREADY_BOOKED, BOOKED_NOW = "already booked", "booked now"
COUNTED = tomllib.loads(Path(__file__).with_name("statement.toml").read_text())
LINE_REQUESTS: dict[str, dict[str, int]] = COUNTED["line_requests"]
LINE_UNITS: dict[str, dict[str, float]] = COUNTED["line_units"]
ORDER_MATCH_REQUESTS: dict[str, int] = COUNTED["order_match"]["requests"]
ORDER_MATCH_UNITS: dict[str, float] = COUNTED["order_match"]["units"]
PASS_REQUESTS: dict[str, int] = COUNTED["pass"]["requests"]

Latency = Callable[[str, str], float]  # milliseconds of one call: (service, operation)


def period_seconds(provider: str) -> float:
    """How often the provider's books are read: the hourly rule's interval, or a day."""
    hourly, cadence = settings.SCHEDULE_MINUTES["statement"] * 60.0, CADENCES[provider]
    return float(cadence.window_seconds) if cadence.by_day else hourly


def run_after_window_seconds(provider: str) -> float:
    """How long after its window's end a pass runs: the settle lag, or the daily rule's time
    after the zone's midnight."""
    cadence = CADENCES[provider]
    if not cadence.by_day:
        return float(SETTLE_SECONDS[provider])
    hour, minute = cadence.settled_at_utc(SETTLE_SECONDS[provider])
    midnight, past = cadence.settled_at_utc(0)
    return float(((hour - midnight) * 60 + minute - past) % (24 * 60) * 60)


def hours_read_of_each_hour() -> float:
    """An hourly pass reads its hour, `EDGE_SECONDS` before it and the settle lag after."""
    return (HOUR + EDGE_SECONDS + stripe.SETTLE_SECONDS) / HOUR


def days_read_of_each_day(provider: str = "asaas") -> float:
    """A daily pass reads each day once, and its edges."""
    return (DAY + 2 * PROVIDER_EDGE_SECONDS[provider]) / DAY


def hours_read_of_each_day_hour() -> float:
    """Why Asaas's pass is daily: hourly, each pass (at the half hour) would read the day so far
    (the first of a day, the day before too): the mean hours read per hour."""
    edges = (HOUR + stripe.SETTLE_SECONDS + EDGE_SECONDS) / HOUR
    return sum(h + 0.5 + (24 if h + 0.5 - edges < 0 else 0) for h in range(24)) / 24


@dataclass(frozen=True)
class ProviderRead:
    """One provider's pass per payment: its rows in pages, the objects read one by one, how
    often each is read again, how often it runs; process's calls against the same limit."""

    rows_per_payment: float  # its own, its refunds', its fee's
    page_size: int
    gets_per_row_read: float  # objects read one by one each time its rows are read
    gets_per_payment_once: float  # objects read once (the match's own lookups)
    reads_of_each_row: float  # passes reading each row (edges, whole days)
    period_seconds: float = HOUR
    process_calls_per_payment: float = 0.0  # Asaas's quota is the account's, any endpoint
    gets_at_once: int = 1  # the payments a read names (its readers, its workers)

    def calls_per_payment(self) -> float:
        return self.pages_per_payment() + self.gets_per_payment()

    def pages_per_payment(self) -> float:
        return self.reads_of_each_row * self.rows_per_payment / self.page_size

    def gets_per_payment(self) -> float:
        return self.reads_of_each_row * self.gets_per_row_read + self.gets_per_payment_once


def provider_reads(assumptions: Mapping[str, float]) -> dict[str, ProviderRead]:
    """Stripe: a row per charge and refund. Mercado Pago: a payment per row, its refunds inside.
    Asaas: its receipt, its fee and a row per refund, each payment named read once a pass, the
    lagging (card payments) asked for by the match; process reads a payment per event."""
    refunds = assumptions["statement_refunds_per_payment"]
    lag = assumptions["statement_asaas_lagging_share"]
    edges, workers = hours_read_of_each_hour(), min(asaas.PAYMENT_READERS, WORKERS)
    daily = (days_read_of_each_day(), period_seconds("asaas"), 1 + lag + refunds, workers)
    return {
        "stripe": ProviderRead(1 + refunds, stripe.PAGE_SIZE, 0, 0, edges),
        "mercadopago": ProviderRead(1, mercadopago.PAGE_SIZE, 0, 0, edges),
        "asaas": ProviderRead(2 + refunds, asaas.PAGE_SIZE, 1, lag, *daily),
    }


def _dynamodb_ms(requests: Mapping[str, float], latency: Latency) -> float:
    return sum(n * latency("dynamodb", operation) for operation, n in requests.items())


def run_fixed(latency: Latency, cold_ms: float, provider: str) -> tuple[float, dict[str, float]]:
    """A pass with nothing to book, its seconds and units: a cold start, its secret, its
    checkpoint and record, a page, every shard of each hour of `changed` since its window."""
    queries = (math.floor(period_seconds(provider) / HOUR) + 1) * CHANGES_SHARDS
    ms = (
        cold_ms
        + latency("secretsmanager", "GetSecretValue")
        + _dynamodb_ms(PASS_REQUESTS, latency)
        + queries * latency("dynamodb", "Query")
        + latency("provider-api", "page")
    )
    units = COUNTED["pass"]["units"]
    index = units.get("rru_eventual", 0.0) + queries * COUNTED["pass"]["changed_index_rru"]
    return ms / 1000, {**units, "rru_eventual": index}


@dataclass(frozen=True)
class PassLoad:
    """One provider's pass at a rate of payments a second, all of them its own."""

    provider: str
    payments_per_second: float
    lines_per_payment: float  # each time read
    api_calls_per_second: float  # its and process's, averaged over the limit's window
    rru_per_second: float
    wru_per_second: float
    limit: ProviderLimit
    period_seconds: float
    work_seconds_a_run: float  # one invocation's
    payments_per_second_one_invocation_keeps_up_with: float
    seconds_per_line: float  # one invocation's, its workers together (the match aside)

    @property
    def keeps_up(self) -> bool:
        return self.work_seconds_a_run <= TIMEOUT_SECONDS

    @property
    def invocations_a_run_needed(self) -> int:
        return max(1, math.ceil(self.work_seconds_a_run / TIMEOUT_SECONDS))

    @property
    def lines_per_second_booked(self) -> float:
        return 1 / self.seconds_per_line if self.seconds_per_line else math.inf

    @property
    def within_rate_limit(self) -> bool:
        return self.limit.per_second is None or self.api_calls_per_second <= self.limit.per_second

    @property
    def payments_a_day_within_limit(self) -> float | None:
        if self.limit.per_second is None or not self.payments_per_second:
            return None
        return self.limit.per_second / (self.api_calls_per_second / self.payments_per_second) * DAY


@dataclass(frozen=True)
class StatementModel:
    latency: Latency
    own_ms: Mapping[str, float]  # process's own work per line, already booked or booked now
    assumptions: Mapping[str, float]
    reads: Mapping[str, ProviderRead]
    limits: Mapping[str, ProviderLimit]

    def mean_line(self, values: Mapping[str, float]) -> float:
        share = self.assumptions["statement_booked_now_share"]
        return (1 - share) * values[ALREADY_BOOKED] + share * values[BOOKED_NOW]

    def orders_read_per_order_changed(self, provider: str) -> float:
        """The `changed` index knows the hour only: the next pass reads again the part of the
        hour before its window, or (daily) the orders changed between the day's end and its run."""
        if not CADENCES[provider].by_day:
            return 1 + self.assumptions["statement_hour_fraction"]
        return 1 + run_after_window_seconds(provider) / period_seconds(provider)

    @property
    def movements_per_payment(self) -> float:
        return 1 + self.assumptions["statement_refunds_per_payment"]

    @property
    def matches_per_order_changed(self) -> float:
        return sum(self.orders_read_per_order_changed(p) for p in SCHEDULED)

    def lines_per_payment(self, provider: str) -> float:
        return self.reads[provider].reads_of_each_row * self.movements_per_payment

    def seconds_per_payment(self, provider: str, *, with_match: bool = True) -> float:
        """One invocation's time per payment: its lines as often as read (`WORKERS` at once,
        their own work one after another), its pages and gets, and its share of the match."""
        read, lines, latency = self.reads[provider], self.lines_per_payment(provider), self.latency
        line_ms = {k: _dynamodb_ms(v, latency) + self.own_ms[k] for k, v in LINE_REQUESTS.items()}
        waited = lines * self.mean_line(line_ms)
        if with_match:
            match = _dynamodb_ms(ORDER_MATCH_REQUESTS, latency)
            waited += self.orders_read_per_order_changed(provider) * match
        milliseconds = (
            max(waited / WORKERS, lines * self.mean_line(self.own_ms))
            + read.pages_per_payment() * latency("provider-api", "page")
            + read.gets_per_payment() * latency("provider-api", "GET") / read.gets_at_once
        )
        return milliseconds / 1000

    def units_per_line(self) -> dict[str, float]:
        kinds = sorted({*LINE_UNITS[ALREADY_BOOKED], *LINE_UNITS[BOOKED_NOW]})
        return {
            kind: self.mean_line({k: u.get(kind, 0.0) for k, u in LINE_UNITS.items()})
            for kind in kinds
        }

    def load(self, provider: str, payments_per_second: float) -> PassLoad:
        read, limit, per_line = self.reads[provider], self.limits[provider], self.units_per_line()
        lines, cold_ms = (
            self.lines_per_payment(provider),
            self.assumptions["statement_cold_start_ms"],
        )
        runs = [(p, 1 / period_seconds(p)) for p in SCHEDULED]  # every provider's, a second

        def units(kind: str) -> float:
            matched = self.matches_per_order_changed * of_kind(ORDER_MATCH_UNITS, kind)
            fixed = sum(n * of_kind(run_fixed(self.latency, cold_ms, p)[1], kind) for p, n in runs)
            return payments_per_second * (lines * of_kind(per_line, kind) + matched) + fixed

        # API calls averaged over the limit's window (the hour at least, a run's period at
        # most): a daily pass's calls all fall in one 12-hour window of Asaas's.
        averaged_over = min(read.period_seconds, max(HOUR, limit.window_seconds))
        pass_calls = read.calls_per_payment() * read.period_seconds / averaged_over
        calls = payments_per_second * (pass_calls + read.process_calls_per_payment)
        seconds = self.seconds_per_payment(provider)
        fixed = run_fixed(self.latency, cold_ms, provider)[0]
        work = fixed + payments_per_second * read.period_seconds * seconds
        one = max(TIMEOUT_SECONDS - fixed, 0.0) / (read.period_seconds * seconds)
        loads = (units("rru"), units("wru"), limit, read.period_seconds, work, one)
        return PassLoad(
            provider, payments_per_second, lines, calls, *loads, seconds / max(lines, 1e-9)
        )

    def usd(
        self, prices: Prices, provider: str, movements: float, orders: float
    ) -> dict[str, float]:
        """`movements` (each line as often as `provider`'s passes read it) and `orders` changed
        (each matched by every provider's pass), by what bills them."""
        reads = self.reads[provider].reads_of_each_row
        matched = orders * self.matches_per_order_changed
        line = self.seconds_per_payment(provider, with_match=False) / self.movements_per_payment
        match = _dynamodb_ms(ORDER_MATCH_REQUESTS, self.latency) / 1000
        seconds = movements * line + matched * match
        lines = {k: movements * reads * v for k, v in self.units_per_line().items()}
        dynamodb = prices.dynamodb(lines) + matched * prices.dynamodb(ORDER_MATCH_UNITS)
        return {"Lambda duration": _lambda_usd(seconds, prices), "DynamoDB": dynamodb}


def _lambda_usd(seconds: float, prices: Prices) -> float:
    return seconds * GB * prices.rate("lambda_arm_gb_second")


def run_usd(prices: Prices, provider: str = PRICED_AS) -> float:
    """A pass with nothing to book: its invocation, time, units, secret, trace (X-Ray's
    reservoir samples every run) and log bytes."""
    a = prices.assumptions
    seconds, units = run_fixed(prices.latency, a["statement_cold_start_ms"], provider)
    return (
        prices.rate("lambda_request")
        + _lambda_usd(seconds, prices)
        + prices.dynamodb(units)
        + prices.rate("secrets_manager_api_call")
        + prices.xray_usd()
        + a["statement_log_bytes_per_run"] * prices.rate("cloudwatch_logs_ingested_gb") / 2**30
    )


def movements_and_orders_changed(sample: Sample) -> tuple[float, float]:
    """What the books list for the sample: a line per effect process committed (the cancelled
    transactions moved nothing), and the orders that entered an hour of the `changed` index."""
    movements = orders = 0.0
    for (caller, service, operation, _), units in sample.aws.items():
        if caller == "process" and service == "dynamodb":
            orders += sum(v for k, v in units.items() if re.match(r"wru_index:.*/changed$", k))
            if operation == "TransactWriteItems":
                movements += units["requests"] - of_kind(units, "cancelled_transactions")
    return movements, orders


def statement_model(measurement: Measurement, prices: Prices) -> StatementModel:
    """Process's own work on a line: a duplicate delivery's (booked already) or a new
    payment's (booked now), measured per event."""
    scenarios = measurement.scenarios()

    def own_ms(kind: str) -> float:
        sample = scenarios[kind]
        return sample.functions.get("process", Units())["compute_ms"] / max(sample.events, 1)

    own = {ALREADY_BOOKED: own_ms("duplicate"), BOOKED_NOW: own_ms("new payment")}
    reads, limits = provider_reads(prices.assumptions), Quotas.load().providers
    return StatementModel(prices.latency, own, prices.assumptions, reads, limits)
