"""The statement pass in the cost and capacity models (costmodel/statement.py): its figures are
the measured ones, its cost grows with the movements, and its verdicts turn where its budget
and the providers' limits say."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from costmodel.headroom_report import STATEMENT_BEGIN, STATEMENT_END, render_statement_block
from costmodel.markdown import block_between
from costmodel.measurement import Prices, Sample, load_measurement
from costmodel.model import bill
from costmodel.statement import (
    ALREADY_BOOKED,
    BOOKED_NOW,
    LINE_REQUESTS,
    ORDER_MATCH_REQUESTS,
    PASS_REQUESTS,
    TIMEOUT_SECONDS,
    StatementModel,
    days_read_of_each_day,
    hours_read_of_each_day_hour,
    hours_read_of_each_hour,
    period_seconds,
    statement_model,
)
from devstack.capacity import Units
from functions.statement.sources import PROVIDERS
from tests.functional.test_statement_stripe import STATEMENT_REQUESTS

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "umavez-webhooks"
STATEMENT = "Statement pass (hourly)"


@pytest.fixture(scope="module")
def prices() -> Prices:
    return Prices.load()


@pytest.fixture(scope="module")
def statement(prices: Prices) -> StatementModel:
    return statement_model(load_measurement(), prices)


def test_a_lines_requests_are_those_the_functional_test_measures() -> None:
    # A pass over one line, its order matched: the line's, the match's, the run's record
    for kind in (ALREADY_BOOKED, BOOKED_NOW):
        counted = dict(LINE_REQUESTS[kind])
        for operation, n in ORDER_MATCH_REQUESTS.items():
            counted[operation] = counted.get(operation, 0) + n
        counted["PutItem"] = PASS_REQUESTS["PutItem"]
        assert counted == STATEMENT_REQUESTS[kind]


def _payments(n: int, *, orders: int | None = None) -> Sample:
    """n payments processed: n committed transactions (one cancelled more), each order new."""
    return Sample(
        n,
        {
            ("process", "dynamodb", "TransactWriteItems", "ledger"): Units(
                {
                    "requests": n + 1,
                    "cancelled_transactions:ledger": 1,
                    "wru_index:ledger/changed": n if orders is None else orders,
                }
            )
        },
        {"process": Units({"invocations": 1, "compute_ms": 5})},
    )


def test_the_statements_cost_grows_with_the_movements_and_is_nothing_without_them(
    prices: Prices, statement: StatementModel
) -> None:
    # Given the same events booking one movement each, or none (duplicates)
    one = bill(_payments(10), prices, QUEUE, statement)
    none = bill(_events(10), prices, QUEUE, statement)
    twice = bill(_twice(_payments(10)), prices, QUEUE, statement)

    # Then each movement's line is read 1.25 times (the window's edges), priced in the totals;
    # twice the movements cost twice as much, and no movement costs nothing
    assert one.quantities[STATEMENT] == pytest.approx(hours_read_of_each_hour())
    assert one.per_million[STATEMENT] > 0
    assert twice.per_million[STATEMENT] > 1.9 * one.per_million[STATEMENT]
    assert none.per_million[STATEMENT] == 0
    assert one.http_total - bill(_payments(10), prices, QUEUE).http_total == pytest.approx(
        one.per_million[STATEMENT]
    )


def _events(n: int) -> Sample:
    return Sample(n, {}, {})


def _twice(sample: Sample) -> Sample:
    doubled = sample.scaled(2)
    doubled.events = sample.events
    return doubled


def test_each_hour_of_a_providers_books_is_read_again_by_the_edges_or_each_day_once() -> None:
    # Stripe and Mercado Pago, hourly: the hour, ten minutes before it, five after (the settle
    # lag)
    assert (period_seconds("stripe"), period_seconds("mercadopago")) == (3600, 3600)
    assert hours_read_of_each_hour() == pytest.approx(1.25)
    # Asaas, daily: each day once, without edges; hourly, each pass would read the day so far
    # (and the first of a day, the day before too)
    assert period_seconds("asaas") == 86_400
    assert days_read_of_each_day() == 1
    assert 12.5 < hours_read_of_each_day_hour() < 14


def test_asaas_s_daily_pass_asks_for_each_payment_once_and_spends_its_quota_in_one_window(
    statement: StatementModel,
) -> None:
    # Given Asaas's read: 2.1 lines a payment, 100 a page, each payment named read once, half
    # of them (card payments, credited a month later) asked for once more by the match
    read = statement.reads["asaas"]
    assert read.reads_of_each_row == 1
    assert read.calls_per_payment() == pytest.approx(2.1 / 100 + 1 + 0.5)
    # And process's reads of each payment (its receipt, a card's confirmation, each refund)
    assert read.process_calls_per_payment == pytest.approx(1.6)

    # Then the quota's 12 hours hold a whole day's pass: twice the day's average, with
    # process's own reads
    load = statement.load("asaas", 0.1)
    assert load.api_calls_per_second == pytest.approx(0.1 * (2 * read.calls_per_payment() + 1.6))
    # and the quota carries the payments a day that make exactly 25,000 calls in 12 hours
    most = load.payments_a_day_within_limit
    assert most is not None
    at_limit = most / 86_400
    assert statement.load("asaas", 0.99 * at_limit).within_rate_limit
    assert not statement.load("asaas", 1.01 * at_limit).within_rate_limit
    assert 43_200 * (at_limit * (2 * read.calls_per_payment() + 1.6)) == pytest.approx(25_000)


def test_the_api_verdict_turns_at_the_providers_rate_limit(statement: StatementModel) -> None:
    # Given Stripe's endpoint limit and the calls a payment takes
    limit = statement.limits["stripe"].per_second
    assert limit == 25
    per_payment = statement.reads["stripe"].calls_per_payment()
    at_limit = limit / per_payment

    # Then just under that rate the pass is within it, just over it is not
    assert statement.load("stripe", 0.99 * at_limit).within_rate_limit
    assert not statement.load("stripe", 1.01 * at_limit).within_rate_limit
    # and Asaas's 12-hour quota, read daily, is exceeded from a few payments a minute
    assert statement.load("asaas", 0.1).within_rate_limit
    assert not statement.load("asaas", 0.2).within_rate_limit
    assert statement.load("mercadopago", 1000).within_rate_limit  # no published limit


def test_one_invocation_keeps_up_until_a_runs_work_exceeds_its_budget(
    statement: StatementModel,
) -> None:
    for provider in PROVIDERS:
        most = statement.load(provider, 1).payments_per_second_one_invocation_keeps_up_with
        under, over = statement.load(provider, 0.99 * most), statement.load(provider, 1.01 * most)
        assert under.keeps_up
        assert under.work_seconds_a_run <= TIMEOUT_SECONDS
        assert not over.keeps_up
        assert over.invocations_a_run_needed == 2
    # Slower DynamoDB calls: fewer payments a second one invocation keeps up with
    slow = replace(
        statement, latency=lambda service, operation: 2 * statement.latency(service, operation)
    )
    assert (
        slow.load("stripe", 1).payments_per_second_one_invocation_keeps_up_with
        < statement.load("stripe", 1).payments_per_second_one_invocation_keeps_up_with
    )


def test_the_performance_page_holds_the_statements_block(statement: StatementModel) -> None:
    page = (ROOT / "docs" / "performance.md").read_text()
    assert block_between(page, STATEMENT_BEGIN, STATEMENT_END) == render_statement_block(statement)
