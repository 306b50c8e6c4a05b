"""The statement pass on its schedule (functions/statement/schedule.py): each provider's windows
read from its checkpoint, the checkpoint moved only past a window read whole, a stopped read
read again, two runs never both moving it. Held to the ledger afterwards."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from fixtures import stripe
from functions.shared.errors import MalformedEventError
from functions.statement import handler
from functions.statement.reading import StatementInterruptedError, StatementNotConfiguredError
from functions.statement.schedule import WINDOW_SECONDS, StatementSchedule
from functions.statement.service import EDGE_SECONDS, StatementPass
from functions.statement.sources import SETTLE_SECONDS, StatementRead
from functions.statement.stripe import line_of
from functions.stripe.balance import ListedBalanceTransaction
from tests.support.clock import FakeClock
from tests.support.world import World

PLENTY_OF_TIME_MS = 900_000


@dataclass
class StripeBooks:
    """Stripe's balance as its API lists it: the lines created in [first, last)."""

    provider: str = "stripe"
    lines: list[dict[str, Any]] = field(default_factory=list)
    windows: list[tuple[int, int]] = field(default_factory=list)
    failing: Exception | None = None

    def read(self, first: int, last: int, now: int) -> StatementRead:
        self.windows.append((first, last))
        if self.failing is not None:
            raise self.failing
        listed = [t for t in self.lines if first <= t["created"] < min(last, now)]
        return StatementRead(
            [
                line_of(ListedBalanceTransaction.model_validate(json.loads(json.dumps(t))))
                for t in listed
            ]
        )


def schedule(world: World, clock: FakeClock) -> StatementSchedule:
    passing = StatementPass(world.dynamodb, world.tables, world.processor(), clock)
    return StatementSchedule(world.dynamodb, world.tables, passing, clock)


def behind_by(world: World, clock: FakeClock, seconds: int) -> tuple[StatementSchedule, int]:
    """A schedule whose first run read the settled hour, then `seconds` passed: it, and the
    checkpoint that run left."""
    scheduled = schedule(world, clock)
    scheduled.run(StripeBooks(), lambda: PLENTY_OF_TIME_MS)
    start = scheduled.checkpoint("stripe")
    assert start is not None
    clock.advance(seconds)
    return scheduled, start


def lost_payment(at: int, amount: int = 5000) -> tuple[str, dict[str, Any]]:
    """A payment Stripe moved at `at` whose webhooks never arrived: its order, its line."""
    order = stripe.unique("ord")
    paid = stripe.charge_succeeded(order, stripe.unique("pi"), stripe.unique("ch"), amount, at)
    return order, stripe.balance_transaction(paid, "charge", amount, fee=245)


def test_the_first_run_reads_the_settled_hour_and_books_what_no_webhook_brought_once(
    world: World, clock: FakeClock
) -> None:
    # Given a payment Stripe moved half an hour ago whose webhooks never arrived
    settled = int(clock()) - SETTLE_SECONDS["stripe"]
    order, line = lost_payment(settled - 1800)
    books = StripeBooks(lines=[line])

    # When the hourly run runs, then again an hour later
    first = schedule(world, clock).run(books, lambda: PLENTY_OF_TIME_MS)
    clock.advance(3600)
    second = schedule(world, clock).run(books, lambda: PLENTY_OF_TIME_MS)

    # Then the first read the settled hour, booked the payment once and moved the checkpoint
    # to that hour's end; the second read the hour after it, and found nothing new
    assert (first.booked, first.mismatches, first.caught_up) == (1, 0, True)
    assert first.passes[0].since == settled - WINDOW_SECONDS
    assert second.passes[0].since == settled
    assert (second.booked, second.mismatches, second.checked_until) == (0, 0, settled + 3600)
    assert world.order(order).paid_total == 5000
    assert len(world.outbox(order)) == 1


def test_a_run_behind_reads_window_after_window_while_its_time_lasts(
    world: World, clock: FakeClock
) -> None:
    # Given a checkpoint five hours behind, a payment lost in each hour since
    scheduled, start = behind_by(world, clock, 5 * 3600)
    lost = [lost_payment(start + hour * 3600 + 60) for hour in range(5)]
    books = StripeBooks(lines=[line for _, line in lost])

    # When a run has time for one window only, then another has all the time it needs
    short = scheduled.run(books, lambda: 0)
    rest = scheduled.run(books, lambda: PLENTY_OF_TIME_MS)

    # Then the first read one hour and stopped with the checkpoint past it; the second read
    # the four others in turn; each payment booked once
    assert (len(short.passes), short.checked_until, short.caught_up) == (1, start + 3600, False)
    assert short.stopped is not None
    assert "time" in short.stopped
    assert [p.since for p in rest.passes] == [start + hour * 3600 for hour in range(1, 5)]
    assert rest.caught_up
    assert rest.checked_until == start + 5 * 3600
    assert short.booked + rest.booked == 5
    assert all(world.order(order).paid_total == 5000 for order, _ in lost)


@dataclass
class SlowBooks(StripeBooks):
    """Books whose every read takes `seconds` on the clock (a busy hour's pass)."""

    clock: FakeClock = field(default_factory=FakeClock)
    seconds: int = 40

    def read(self, first: int, last: int, now: int) -> StatementRead:
        self.clock.advance(self.seconds)
        return super().read(first, last, now)


def test_a_run_reads_up_to_where_it_began_however_long_its_passes_take(
    world: World, clock: FakeClock
) -> None:
    # Given a checkpoint an hour behind, and books whose every read takes 40 s
    scheduled, start = behind_by(world, clock, 3600)
    books = SlowBooks(clock=clock)
    asked = iter(range(10))

    # When the run has time for ten windows
    run = scheduled.run(books, lambda: PLENTY_OF_TIME_MS if next(asked, None) is not None else 0)

    # Then it read the hour that had settled when it began, once, and was caught up: the 40 s
    # its pass took settled no sliver of a window for it to read again
    assert books.windows == [(start - EDGE_SECONDS, start + 3600 + EDGE_SECONDS)]
    assert (len(run.passes), run.checked_until, run.caught_up) == (1, start + 3600, True)
    assert run.stopped is None


def test_a_read_that_stopped_moves_nothing_and_the_next_run_reads_the_same_window(
    world: World, clock: FakeClock
) -> None:
    # Given a payment lost in the settled hour, and Stripe failing past the backoff
    order, line = lost_payment(int(clock()) - 1800)
    failing = StripeBooks(lines=[line], failing=StatementInterruptedError("Stripe 503", None))

    # When the run runs, then again once Stripe answers
    stopped = schedule(world, clock).run(failing, lambda: PLENTY_OF_TIME_MS)
    answering = StripeBooks(lines=[line])
    again = schedule(world, clock).run(answering, lambda: PLENTY_OF_TIME_MS)

    # Then the first booked nothing and fixed the checkpoint at its window's start; the
    # second read the same window
    assert (stopped.interrupted, stopped.passes) == (True, [])
    assert stopped.checked_until == failing.windows[0][0] + EDGE_SECONDS
    assert answering.windows == failing.windows
    assert (again.booked, again.caught_up) == (1, True)
    assert world.order(order).paid_total == 5000


def test_a_provider_without_a_credential_is_not_read_and_keeps_no_checkpoint(
    world: World, clock: FakeClock
) -> None:
    # Given a stack that names no Mercado Pago token
    unconfigured = StripeBooks(
        provider="mercadopago", failing=StatementNotConfiguredError("no access token")
    )

    # When its hourly run runs
    run = schedule(world, clock).run(unconfigured, lambda: PLENTY_OF_TIME_MS)

    # Then nothing was read or booked, and no checkpoint was written
    assert run.not_configured == "no access token"
    assert (run.passes, schedule(world, clock).checkpoint("mercadopago")) == ([], None)


def test_two_runs_from_one_checkpoint_never_both_move_it(world: World, clock: FakeClock) -> None:
    # Given two runs of one provider started from the same checkpoint (an overlap)
    first, second = schedule(world, clock), schedule(world, clock)
    before = first.checkpoint("stripe")
    window = first.next_window("stripe", before)
    assert window is not None

    # When both try to move it past the same window
    moved = [
        first._advance("stripe", before, window[1]),
        second._advance("stripe", before, window[1]),
    ]

    # Then only one moved it
    assert moved == [True, False]
    assert first.checkpoint("stripe") == window[1]


def test_an_operator_window_is_read_again_and_leaves_the_checkpoint(
    world: World, clock: FakeClock
) -> None:
    # Given a caught-up checkpoint, and a payment lost a day ago (before it)
    scheduled = schedule(world, clock)
    scheduled.run(StripeBooks(), lambda: PLENTY_OF_TIME_MS)
    checkpoint = scheduled.checkpoint("stripe")
    day_ago = int(clock()) - 86_400
    order, line = lost_payment(day_ago)

    # When the operator reads the day-old hour again
    run = scheduled.run_window(StripeBooks(lines=[line]), day_ago - 60, day_ago + 3540)

    # Then the payment is booked, and the checkpoint stays where the schedule left it
    assert (run.booked, run.mismatches) == (1, 0)
    assert scheduled.checkpoint("stripe") == checkpoint
    assert world.order(order).paid_total == 5000


@pytest.mark.parametrize(
    "event",
    [
        {},
        {"provider": "paypal"},
        {"provider": "stripe", "since": 10},
        {"provider": "stripe", "since": 20, "until": 10},
    ],
)
def test_the_function_refuses_an_event_naming_no_provider_or_no_window(
    event: dict[str, Any],
) -> None:
    # When the function is invoked with what no schedule or operator sends, then it is refused
    # before anything is read
    with pytest.raises(MalformedEventError):
        handler.requested(event)


def test_the_function_reads_the_schedule_s_window_or_the_one_an_operator_names() -> None:
    assert handler.requested({"provider": "asaas"}) == ("asaas", None)
    assert handler.requested({"provider": "stripe", "since": 10, "until": 20}) == (
        "stripe",
        (10, 20),
    )


def test_a_first_read_failing_hour_after_hour_falls_behind_from_where_it_began(
    world: World, clock: FakeClock
) -> None:
    # Given a provider never read before, whose API fails past the backoff
    failing = StripeBooks(failing=StatementInterruptedError("Stripe 503", None))
    began = int(clock()) - SETTLE_SECONDS["stripe"] - WINDOW_SECONDS

    # When the hourly run runs four times
    runs = []
    for _ in range(4):
        runs.append(schedule(world, clock).run(failing, lambda: PLENTY_OF_TIME_MS))
        clock.advance(3600)

    # Then every run read the first window again, and the checkpoint stayed where reading
    # began: three hours later the run is more than three hours behind (StatementBehind)
    assert set(failing.windows) == {failing.windows[0]}
    assert [run.checked_until for run in runs] == [began] * 4
    assert runs[-1].behind_seconds is not None
    assert runs[-1].behind_seconds > 3 * 3600  # what the last run published as its lag
