"""The statement pass as a scheduled function: what its runs and its lines use, and whether it
keeps up (`make cost` prices it, `make capacity` holds it to its budget and the providers' limits).

The pass is not part of the measured scenarios (it reads the providers' books, which the
embedded stack's scenarios do not keep): it is modeled from counts measured elsewhere.

- **DynamoDB per line, per changed order and per pass**: measured on moto and held by
  tests/functional/test_statement_stripe.py (requests) and
  tests/functional/test_capacity_of_the_statement.py (request units);
- **provider API calls**: the readers' own page sizes (`functions/statement/`), and how much of
  the provider's books each pass reads again (an hourly pass its edges; Asaas's daily pass
  none: each day once), against the provider's limit over its own window (Asaas's 12 hours,
  shared with process's reads of each Asaas event);
- **durations**: each call at the latencies of `[latency_ms]` in costmodel/prices.toml, plus
  the own work of process on the same path (measured by `make cost`: reading a movement that
  is booked already is a duplicate's work, booking one a new payment's);
- **the providers' limits**: `[provider_limits]` in costmodel/quotas.toml, each with its page.

Nothing here imports the bill or the stage table: they price and render what it counts.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from costmodel.limits import DAY, HOUR, ProviderLimit
from costmodel.statement_reads import (
    WORKERS,
    ProviderRead,
    period_seconds,
    run_after_window_seconds,
)
from functions.shared.tables import CHANGES_SHARDS
from functions.statement.sources import CADENCES, PROVIDERS, SCHEDULED
from infra import settings

# The scheduled function (infra/settings.py `LAMBDA_PACKAGES["statement"]`).
FUNCTION: Final = "statement"
MEMORY_MB: Final = settings.LAMBDA_MEMORY_MB[FUNCTION]
TIMEOUT_SECONDS: Final = settings.STATEMENT_TIMEOUT_SECONDS
# Each provider's pass on its cadence (functions/statement/sources.py `CADENCES`): Stripe's and
# Mercado Pago's hourly (one rule, a target each), Asaas's daily (a rule of its own).
PROVIDERS_A_RUN: Final = PROVIDERS
SCHEDULED_RUNS: Final = SCHEDULED
ALREADY_BOOKED: Final = "already booked"
BOOKED_NOW: Final = "booked now"
# DynamoDB requests a line costs, by whether a webhook booked its movement first: its binding
# and the processor's read (2 BatchGetItem), its payment's entries (Query), its fee and net
# (TransactWriteItems); a movement booked now, its effect's own transaction too.
LINE_REQUESTS: Final[dict[str, dict[str, int]]] = {
    ALREADY_BOOKED: {"BatchGetItem": 2, "Query": 1, "TransactWriteItems": 1},
    BOOKED_NOW: {"BatchGetItem": 2, "Query": 1, "TransactWriteItems": 2},
}
# Their request units: two bindings read consistently (1 RRU each), the key, the order and
# the two objects eventually (0.5 each), the payment's entries (one 4 KB page), the fee item and
# the order in a transaction (2 WRU each); booked now, the effect's five items (four in the
# ledger, the outbox item: 2 WRU each) and the new order's entry in the `changed` index.
LINE_UNITS: Final[dict[str, dict[str, float]]] = {
    ALREADY_BOOKED: {"rru_strong": 3, "rru_eventual": 2, "wru_transaction": 4},
    BOOKED_NOW: {"rru_strong": 3, "rru_eventual": 2, "wru_transaction": 14, "wru_index": 1},
}
# The match, per order changed since the window began (whichever provider's): its entries.
ORDER_MATCH_REQUESTS: Final[dict[str, int]] = {"Query": 1}
ORDER_MATCH_UNITS: Final[dict[str, float]] = {"rru_strong": 1}
# Once a pass: the checkpoint read and moved on, the run's record put.
PASS_REQUESTS: Final[dict[str, int]] = {"GetItem": 1, "PutItem": 1, "UpdateItem": 1}
PASS_UNITS: Final[dict[str, float]] = {"rru_strong": 1, "wru_standard": 2}
# The `changed` index's partitions a pass reads: every shard of each clock hour from its
# window's start to now (keys only, eventually consistent: the minimum 0.5 RRU each at these
# sizes): two hours for an hourly pass, 25 for a day's read a quarter hour after it.
CHANGED_INDEX_RRU: Final = 0.5


def changed_index_queries(provider: str) -> int:
    return (math.floor(period_seconds(provider) / HOUR) + 1) * CHANGES_SHARDS


# -- time and request units ---------------------------------------------------------------------

Latency = Callable[[str, str], float]  # milliseconds of one call: (service, operation)


@dataclass(frozen=True)
class OwnWork:
    """Milliseconds of the function's own work, measured on process's same path."""

    already_booked_ms: float  # a duplicate's
    booked_now_ms: float  # a new payment's


def of_kind(units: Mapping[str, float], kind: str) -> float:
    """Request units of one kind (`rru`, `wru`), whatever their consistency or index."""
    return sum(v for k, v in units.items() if k.startswith(kind))


def _dynamodb_ms(requests: Mapping[str, float], latency: Latency) -> float:
    return sum(n * latency("dynamodb", operation) for operation, n in requests.items())


def line_ms(kind: str, latency: Latency, own: OwnWork) -> float:
    """One line booked or found booked: its DynamoDB calls and the processor's own work."""
    work = own.booked_now_ms if kind == BOOKED_NOW else own.already_booked_ms
    return _dynamodb_ms(LINE_REQUESTS[kind], latency) + work


def mean_line(values: Mapping[str, float], booked_now_share: float) -> float:
    return (1 - booked_now_share) * values[ALREADY_BOOKED] + booked_now_share * values[BOOKED_NOW]


def order_match_ms(latency: Latency) -> float:
    return _dynamodb_ms(ORDER_MATCH_REQUESTS, latency)


def run_fixed_ms(latency: Latency, assumptions: Mapping[str, float], provider: str) -> float:
    """A pass with nothing to book: a cold start (an hourly function finds no warm container),
    its secret, its checkpoint, the `changed` index, its record, its checkpoint moved, and one
    page of the provider's books."""
    return (
        assumptions["statement_cold_start_ms"]
        + latency("secretsmanager", "GetSecretValue")
        + _dynamodb_ms(PASS_REQUESTS, latency)
        + changed_index_queries(provider) * latency("dynamodb", "Query")
        + latency("provider-api", "page")
    )


def units_per_line(booked_now_share: float) -> dict[str, float]:
    kinds = sorted({*LINE_UNITS[ALREADY_BOOKED], *LINE_UNITS[BOOKED_NOW]})
    of = {kind: {k: units.get(kind, 0.0) for k, units in LINE_UNITS.items()} for kind in kinds}
    return {kind: mean_line(by_line, booked_now_share) for kind, by_line in of.items()}


def requests_per_line(booked_now_share: float) -> float:
    return mean_line(
        {k: float(sum(v.values())) for k, v in LINE_REQUESTS.items()}, booked_now_share
    )


def run_fixed_units(provider: str) -> dict[str, float]:
    index = changed_index_queries(provider) * CHANGED_INDEX_RRU
    return {**PASS_UNITS, "rru_eventual": PASS_UNITS.get("rru_eventual", 0.0) + index}


# -- keeping up ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PassLoad:
    """One provider's pass (hourly, or daily) at a rate of payments a second, all of them this
    provider's; the match reads every order changed, whichever provider's, in each provider's
    pass."""

    provider: str
    payments_per_second: float
    lines_per_payment: float  # lines booked (or found booked) per payment, each time read
    # The pass's calls (and process's against the same limit) a second, averaged over the
    # limit's window (the hour at least; a daily pass's calls all fall in one 12-hour window)
    api_calls_per_second: float
    seconds_per_payment: float  # one invocation's time, per payment of its window
    fixed_seconds: float  # one run's, whatever the lines
    dynamodb_requests_per_second: float  # the scheduled passes', averaged over their periods
    rru_per_second: float
    wru_per_second: float
    limit: ProviderLimit
    period_seconds: float = HOUR  # how often the pass runs, and the window it reads

    @property
    def work_seconds_a_run(self) -> float:
        return (
            self.fixed_seconds
            + self.payments_per_second * self.period_seconds * self.seconds_per_payment
        )

    @property
    def keeps_up(self) -> bool:
        return self.work_seconds_a_run <= TIMEOUT_SECONDS

    @property
    def payments_per_second_one_invocation_keeps_up_with(self) -> float:
        return max(TIMEOUT_SECONDS - self.fixed_seconds, 0.0) / (
            self.period_seconds * self.seconds_per_payment
        )

    @property
    def invocations_a_run_needed(self) -> int:
        """Invocations of its 900 s a run's work takes, were it split among them."""
        return max(1, math.ceil(self.work_seconds_a_run / TIMEOUT_SECONDS))

    @property
    def payments_a_day_within_limit(self) -> float | None:
        """The most payments a day the provider's limit carries (None: no published limit)."""
        if self.limit.per_second is None or not self.payments_per_second:
            return None
        return self.limit.per_second / (self.api_calls_per_second / self.payments_per_second) * DAY

    @property
    def lines_per_second_booked(self) -> float:
        """Lines one invocation books a second, its workers together (the match aside)."""
        return 1 / self.seconds_per_line if self.seconds_per_line else math.inf

    @property
    def seconds_per_line(self) -> float:
        return self.seconds_per_payment / max(self.lines_per_payment, 1e-9)

    @property
    def within_rate_limit(self) -> bool:
        return self.limit.per_second is None or self.api_calls_per_second <= self.limit.per_second


@dataclass(frozen=True)
class StatementModel:
    """What the model counts with: latencies, own work, the assumptions, the providers."""

    latency: Latency
    own: OwnWork
    assumptions: Mapping[str, float]
    reads: Mapping[str, ProviderRead]
    limits: Mapping[str, ProviderLimit]

    @property
    def booked_now_share(self) -> float:
        return self.assumptions["statement_booked_now_share"]

    def orders_read_per_order_changed(self, provider: str) -> float:
        """Passes of one provider reading an order changed: the pass of its window and, as the
        `changed` index knows the hour only, the next pass reads again the part of the hour
        before its window: for an hourly pass, `statement_hour_fraction` of it (the rule fires
        at a minute of the hour nobody chose, like the reconciliation's); for a daily one, the
        orders changed between the day's end and its run, once more."""
        if not CADENCES[provider].by_day:
            return 1 + self.assumptions["statement_hour_fraction"]
        return 1 + run_after_window_seconds(provider) / period_seconds(provider)

    def lines_per_payment(self, provider: str) -> float:
        """Lines booked per payment, each time its rows are read: its own, one per refund."""
        refunds = self.assumptions["statement_refunds_per_payment"]
        return self.reads[provider].reads_of_each_row * (1 + refunds)

    @property
    def movements_per_payment(self) -> float:
        return 1 + self.assumptions["statement_refunds_per_payment"]

    def seconds_per_payment(self, provider: str, *, with_match: bool = True) -> float:
        """One invocation's time per payment of the hour: its lines (as often as they are read),
        its pages and one-by-one reads, and (`with_match`) its share of the match."""
        read = self.reads[provider]
        lines = self.lines_per_payment(provider)
        line = mean_line(
            {k: line_ms(k, self.latency, self.own) for k in LINE_REQUESTS}, self.booked_now_share
        )
        waited = lines * line
        if with_match:
            waited += self.orders_read_per_order_changed(provider) * order_match_ms(self.latency)
        # BOOKING_WORKERS lines (and orders matched) at once; their own work (CPU, as measured
        # on process) one after another, whatever the workers.
        own = lines * mean_line(
            {ALREADY_BOOKED: self.own.already_booked_ms, BOOKED_NOW: self.own.booked_now_ms},
            self.booked_now_share,
        )
        milliseconds = (
            max(waited / WORKERS, own)
            + read.pages_per_payment() * self.latency("provider-api", "page")
            + read.gets_per_payment() * self.latency("provider-api", "GET") / read.gets_at_once
        )
        return milliseconds / 1000

    def seconds_per_movement(self, provider: str) -> float:
        """Lambda time per movement the provider's books list (a payment, a refund)."""
        return self.seconds_per_payment(provider, with_match=False) / self.movements_per_payment

    def units_per_movement(self, provider: str) -> dict[str, float]:
        """DynamoDB request units per movement: its line, as often as the passes read it."""
        reads = self.reads[provider].reads_of_each_row
        return {k: reads * v for k, v in units_per_line(self.booked_now_share).items()}

    @property
    def matches_per_order_changed(self) -> float:
        """Each provider's pass reads every order changed: each order read by
        `orders_read_per_order_changed` of each scheduled provider's passes."""
        return sum(self.orders_read_per_order_changed(p) for p in SCHEDULED_RUNS)

    def seconds_per_order_changed(self) -> float:
        return self.matches_per_order_changed * order_match_ms(self.latency) / 1000

    def units_per_order_changed(self) -> dict[str, float]:
        return {k: self.matches_per_order_changed * v for k, v in ORDER_MATCH_UNITS.items()}

    def fixed_seconds(self, provider: str) -> float:
        return run_fixed_ms(self.latency, self.assumptions, provider) / 1000

    def api_calls_per_second(self, provider: str, payments_per_second: float) -> float:
        """The pass's calls and process's against the same limit, a second, averaged over the
        limit's window (the hour at least, a run's period at most): an hourly pass's over the
        hour; a daily pass's, all in one 12-hour quota window of Asaas's, twice its day's
        average."""
        read = self.reads[provider]
        window = self.limits[provider].window_seconds
        averaged_over = min(read.period_seconds, max(HOUR, window))
        pass_calls = read.calls_per_payment() * read.period_seconds / averaged_over
        return payments_per_second * (pass_calls + read.process_calls_per_payment)

    def load(self, provider: str, payments_per_second: float) -> PassLoad:
        lines = self.lines_per_payment(provider)
        matched = self.matches_per_order_changed
        per_line = units_per_line(self.booked_now_share)
        # Every scheduled provider's runs, a second (averaged), and their fixed requests and units
        runs = {p: 1 / period_seconds(p) for p in SCHEDULED_RUNS}
        requests = payments_per_second * (
            lines * requests_per_line(self.booked_now_share)
            + matched * sum(ORDER_MATCH_REQUESTS.values())
        ) + sum(
            n * (sum(PASS_REQUESTS.values()) + changed_index_queries(p)) for p, n in runs.items()
        )

        def units(kind: str) -> float:
            per_payment = lines * of_kind(per_line, kind) + matched * of_kind(
                ORDER_MATCH_UNITS, kind
            )
            fixed = sum(n * of_kind(run_fixed_units(p), kind) for p, n in runs.items())
            return payments_per_second * per_payment + fixed

        return PassLoad(
            provider,
            payments_per_second,
            lines,
            self.api_calls_per_second(provider, payments_per_second),
            self.seconds_per_payment(provider),
            self.fixed_seconds(provider),
            requests,
            units("rru"),
            units("wru"),
            self.limits[provider],
            self.reads[provider].period_seconds,
        )
