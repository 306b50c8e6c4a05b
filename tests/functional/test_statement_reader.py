"""Reading Stripe's balance (functions/statement/stripe.py) from the fake Stripe API on
loopback: every line of a window once, page after page, through rate limits and outages, and
a stop that says where to resume."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.provider_apis import FakeProviderApis
from fixtures import stripe
from functions.shared.provider_api import ProviderApiRefusedError
from functions.statement.reading import (
    ATTEMPTS,
    StatementInterruptedError,
    StatementNotConfiguredError,
)
from functions.statement.stripe import StripeBalance

KEY = "rk_test_statement_reader_fake"
T0 = 1_764_460_800


@pytest.fixture
def apis() -> Iterator[FakeProviderApis]:
    served = FakeProviderApis(stripe_key=KEY).start()
    yield served
    served.stop()


def lines_of(apis: FakeProviderApis, count: int, start: int = T0) -> list[str]:
    """`count` charge lines a minute apart, registered as Stripe lists them (source by id,
    the charge registered under it)."""
    ids = []
    for n in range(count):
        order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
        line = stripe.balance_transaction(
            stripe.charge_succeeded(order, intent, charge, 1000 + n, start + 60 * n),
            "charge",
            1000 + n,
        )
        apis.stripe_objects[charge] = line["source"]
        apis.balance_transactions[line["id"]] = {**line, "source": charge}
        ids.append(line["id"])
    return ids


def no_pause(seconds: float) -> None:
    raise AssertionError(f"paused {seconds} s where nothing is retried")


def reader(apis: FakeProviderApis, pauses: list[float], page_size: int = 3) -> StripeBalance:
    return StripeBalance(lambda: KEY, pauses.append, apis.url, page_size=page_size)


def test_every_line_of_the_window_is_read_once_with_its_source_expanded(
    apis: FakeProviderApis,
) -> None:
    # Given seven lines in the window and one after it
    inside = lines_of(apis, 7)
    lines_of(apis, 1, start=T0 + 7200)

    # When the window is read three lines a page
    pages = list(reader(apis, []).pages(T0, T0 + 3600))

    # Then each line inside was read once, newest first, each with its charge expanded
    read = [line for page in pages for line in page.lines]
    assert [line.id for line in read] == list(reversed(inside))
    assert all(line.source_object and line.source_object["object"] == "charge" for line in read)
    assert len(pages) == 3
    asked = [r for r in apis.requests if r.startswith("/v1/balance_transactions")]
    assert all("expand%5B%5D=data.source" in r for r in asked)


def test_a_rate_limit_is_waited_out_with_doubling_pauses(apis: FakeProviderApis) -> None:
    # Given Stripe limiting the rate of the second page's first two reads
    inside = lines_of(apis, 5)
    apis.fail("/v1/balance_transactions", 2, status=429)
    apis.fail("/v1/balance_transactions", 3, status=429)
    pauses: list[float] = []

    # When the window is read
    read = [line.id for page in reader(apis, pauses).pages(T0, T0 + 3600) for line in page.lines]

    # Then every line was read once, after pauses that doubled
    assert sorted(read) == sorted(inside)
    assert pauses == [1.0, 2.0]


def test_an_outage_stops_the_read_with_the_cursor_that_resumes_it(apis: FakeProviderApis) -> None:
    # Given Stripe failing every read of the second page
    inside = lines_of(apis, 5)
    for nth in range(2, 2 + ATTEMPTS):
        apis.fail("/v1/balance_transactions", nth, status=503)
    pages = reader(apis, []).pages(T0, T0 + 3600)
    first = next(pages)

    # When the read goes on, it stops; resumed from its cursor it reads the rest
    with pytest.raises(StatementInterruptedError) as stopped:
        next(pages)
    assert stopped.value.resume == first.resume
    rest = [
        line.id
        for page in reader(apis, []).pages(T0, T0 + 3600, stopped.value.resume)
        for line in page.lines
    ]

    # Then together they read every line once
    assert sorted([line.id for line in first.lines] + rest) == sorted(inside)


def test_a_missing_key_reads_nothing_and_a_refused_one_stops_at_once(
    apis: FakeProviderApis,
) -> None:
    # Given a line Stripe holds
    lines_of(apis, 1)

    # When the statement is read without a key, then with a key Stripe refuses
    with pytest.raises(StatementNotConfiguredError):
        StripeBalance(lambda: "set-me", no_pause, apis.url).pages(T0, T0 + 3600)
    with pytest.raises(ProviderApiRefusedError):
        list(StripeBalance(lambda: "rk_test_wrong", no_pause, apis.url).pages(T0, T0 + 3600))

    # Then the first asked nothing, and the refusal was not tried again
    assert len(apis.requests) == 1
