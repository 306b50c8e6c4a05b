"""Asaas's statement on its daily schedule (functions/statement/cadence.py, schedule.py): each
whole Brazil day read once after it ended and settled, from Asaas's checkpoint, through the
reader the function uses against the fake Asaas API, on the injected clock. Held to the
ledger, the checkpoint and the requests Asaas answered."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta
from typing import Any

import pytest

from devstack.provider_apis import FakeProviderApis
from fixtures.shapes import shape, unique
from functions.asaas.models import BRAZIL
from functions.process.mercadopago_disputes import LedgerDisputes
from functions.shared.domain import Outcome
from functions.statement import handler
from functions.statement.schedule import StatementSchedule
from functions.statement.service import StatementPass
from functions.statement.sources import SETTLE_SECONDS, StatementSource
from infra.constructs.monitoring import STATEMENT_BEHIND_SECONDS
from tests.support.clock import FakeClock
from tests.support.world import World

KEY = "asaas_test_daily_statement_key_fake"
DAY = date(2026, 11, 29)
PLENTY_OF_TIME_MS = 900_000


def start_of(day: date) -> int:
    """Brazil's midnight opening `day`, in epoch seconds."""
    return int(datetime.combine(day, time(), BRAZIL).timestamp())


def the_morning_after(day: date) -> float:
    """When the daily rule fires after `day`: 00:15 in Brazil (03:15 UTC) the next day."""
    return start_of(day + timedelta(days=1)) + 15 * 60


@pytest.fixture
def asaas() -> Iterator[FakeProviderApis]:
    served = FakeProviderApis(asaas_key=KEY).start()
    yield served
    served.stop()


def schedule(world: World, clock: FakeClock) -> StatementSchedule:
    passing = StatementPass(world.dynamodb, world.tables, world.processor(), clock)
    return StatementSchedule(world.dynamodb, world.tables, passing, clock)


def reader(world: World, asaas: FakeProviderApis) -> StatementSource:
    return StatementSource(
        "asaas",
        lambda: KEY,
        asaas.url,
        lambda _: None,
        LedgerDisputes(world.dynamodb, world.tables.ledger),
    )


def daily_run(world: World, clock: FakeClock, asaas: FakeProviderApis) -> Any:
    return schedule(world, clock).run(reader(world, asaas), lambda: PLENTY_OF_TIME_MS)


def lost_payment(asaas: FakeProviderApis, day: date) -> tuple[str, dict[str, Any]]:
    """A Pix payment of R$ 50.00 received on `day` (R$ 0.99 kept by Asaas) whose webhooks never
    arrived: Asaas's API knows it, and its statement holds its receipt and fee that day."""
    order = unique("ord")
    payment: dict[str, Any] = shape("asaas/PAYMENT_RECEIVED.json")["payment"]
    payment.update(
        {"id": unique("pay"), "externalReference": order, "paymentDate": day.isoformat()}
    )
    asaas.asaas_payments[payment["id"]] = payment
    fee = round(float(payment["value"]) - float(payment["netValue"]), 2)
    for kind, value in (("PAYMENT_RECEIVED", float(payment["value"])), ("PAYMENT_FEE", -fee)):
        line = {
            "object": "financialTransaction",
            "id": unique("ftn"),
            "value": value,
            "type": kind,
            "date": day.isoformat(),
            "description": kind,
            "paymentId": payment["id"],
        }
        asaas.asaas_transactions[line["id"]] = line
    return order, payment


def days_listed(asaas: FakeProviderApis) -> list[tuple[str, str]]:
    """The (startDate, finishDate) of each statement page Asaas was asked for."""
    listed = []
    for path in asaas.requests:
        url = urllib.parse.urlsplit(path)
        if url.path == "/v3/financialTransactions":
            query = urllib.parse.parse_qs(url.query)
            listed.append((query["startDate"][0], query["finishDate"][0]))
    return listed


def payment_reads(asaas: FakeProviderApis, payment_id: str) -> int:
    return sum(
        urllib.parse.urlsplit(p).path == f"/v3/payments/{payment_id}" for p in asaas.requests
    )


def test_the_first_daily_run_reads_yesterday_whole_and_books_a_lost_payment_once(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a payment received on DAY whose webhooks never arrived, and one the day after
    order, payment = lost_payment(asaas, DAY)
    later, _ = lost_payment(asaas, DAY + timedelta(days=1))

    # When the daily rule fires the morning after DAY, then the morning after that
    clock.now = the_morning_after(DAY)
    first = daily_run(world, clock, asaas)
    listed_first, reads_first = days_listed(asaas), payment_reads(asaas, payment["id"])
    clock.now = the_morning_after(DAY + timedelta(days=1))
    second = daily_run(world, clock, asaas)

    # Then the first read DAY alone, whole (Brazil's midnight to midnight), asked Asaas once
    # for the payment its two lines name, booked it once and moved the checkpoint to DAY's end
    assert [(p.since, p.until) for p in first.passes] == [(start_of(DAY), start_of(DAY) + 86_400)]
    assert listed_first == [(DAY.isoformat(), DAY.isoformat())]
    assert reads_first == 1
    assert (first.booked, first.mismatches, first.caught_up) == (1, 0, True)
    assert first.checked_until == start_of(DAY + timedelta(days=1))
    # And the second read the next day only, booking its payment; DAY's is not booked again
    assert [p.since for p in second.passes] == [start_of(DAY + timedelta(days=1))]
    assert (second.booked, second.mismatches) == (1, 0)
    assert payment_reads(asaas, payment["id"]) == 1
    assert [world.order(o).paid_total for o in (order, later)] == [5000, 5000]
    [announced] = world.outbox(order)
    assert announced["found_by_statement"] is True


def test_a_webhook_arriving_after_the_daily_pass_booked_its_payment_is_a_duplicate(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a payment whose webhook came only after the daily pass had booked it
    order, payment = lost_payment(asaas, DAY)
    clock.now = the_morning_after(DAY)
    daily_run(world, clock, asaas)

    # When the webhook arrives at last
    body = shape("asaas/PAYMENT_RECEIVED.json")
    body.update({"id": unique("evt"), "payment": payment})
    late = world.deliver_all(json.dumps(body), "asaas")

    # Then it changes nothing: the payment counted once, announced once
    assert [p.outcome for p in late] == [Outcome.DUPLICATE]
    assert world.order(order).paid_total == 5000
    assert len(world.outbox(order)) == 1


def test_a_schedule_down_for_days_catches_up_a_whole_day_at_a_time(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a checkpoint at DAY's start (the run the morning before read the day before), and a
    # payment lost on each of the three days since; the rule did not fire for three mornings
    clock.now = the_morning_after(DAY - timedelta(days=1))
    daily_run(world, clock, asaas)
    days = [DAY + timedelta(days=n) for n in range(3)]
    lost = [lost_payment(asaas, day) for day in days]
    clock.now = the_morning_after(days[-1])

    # When a run has time for one window only, then another has all the time it needs
    short = schedule(world, clock).run(reader(world, asaas), lambda: 0)
    rest = daily_run(world, clock, asaas)

    # Then the first read DAY and stopped, its checkpoint past DAY; the second read the two
    # other days, one window each; each payment booked once
    assert [p.since for p in short.passes] == [start_of(DAY)]
    assert (short.checked_until, short.caught_up) == (start_of(days[1]), False)
    assert [(p.since, p.until) for p in rest.passes] == [
        (start_of(day), start_of(day + timedelta(days=1))) for day in days[1:]
    ]
    assert (rest.caught_up, rest.checked_until) == (True, start_of(days[-1] + timedelta(days=1)))
    assert short.booked + rest.booked == 3
    assert all(world.order(order).paid_total == 5000 for order, _ in lost)


@pytest.mark.parametrize(
    "after_day_start",
    [
        86_400 + SETTLE_SECONDS["asaas"] - 1,  # DAY ended, not settled yet
        12 * 3600,  # DAY at noon: it has not ended
    ],
)
def test_a_day_not_yet_settled_is_not_read(
    world: World, clock: FakeClock, asaas: FakeProviderApis, after_day_start: int
) -> None:
    # Given a checkpoint at DAY's start, and a payment lost on DAY
    clock.now = the_morning_after(DAY - timedelta(days=1))
    daily_run(world, clock, asaas)
    order, _ = lost_payment(asaas, DAY)
    asaas.requests.clear()

    # When a run runs before DAY has ended and settled
    clock.now = start_of(DAY) + after_day_start
    run = daily_run(world, clock, asaas)

    # Then nothing of DAY is read or booked, the checkpoint stays at its start, and it is not
    # behind: it is where a caught-up one is until DAY has settled
    assert (run.passes, days_listed(asaas), asaas.requests) == ([], [], [])
    assert (run.caught_up, run.checked_until, run.behind_seconds) == (True, start_of(DAY), 0)
    assert world.order(order).paid_total == 0


def test_a_failing_daily_read_moves_nothing_and_stands_out_as_behind(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a checkpoint at DAY's start, a payment lost on DAY, Asaas failing past the backoff
    clock.now = the_morning_after(DAY - timedelta(days=1))
    daily_run(world, clock, asaas)
    order, _ = lost_payment(asaas, DAY)
    asaas.status_override = 503

    # When the daily rule fires the morning after DAY, then the next morning once Asaas answers
    clock.now = the_morning_after(DAY)
    stopped = daily_run(world, clock, asaas)
    paid_meanwhile = world.order(order).paid_total
    asaas.status_override = None
    clock.now = the_morning_after(DAY + timedelta(days=1))
    again = daily_run(world, clock, asaas)

    # Then the failing run booked nothing, left the checkpoint at DAY's start and published a
    # lag of a whole day (StatementBehind pages); the next read DAY again, then the day after
    assert (stopped.interrupted, stopped.passes, stopped.checked_until) == (True, [], start_of(DAY))
    assert stopped.behind_seconds == 86_400
    assert stopped.behind_seconds > STATEMENT_BEHIND_SECONDS
    assert paid_meanwhile == 0
    assert [p.since for p in again.passes] == [start_of(DAY), start_of(DAY + timedelta(days=1))]
    assert (again.booked, again.caught_up, again.behind_seconds) == (1, True, 0)
    assert world.order(order).paid_total == 5000


def test_a_caught_up_daily_checkpoint_a_day_behind_the_clock_is_not_behind(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given the daily run caught up the morning after DAY
    clock.now = the_morning_after(DAY)
    first = daily_run(world, clock, asaas)

    # When it runs again just before the next morning's run is due (the hourly rule's lag
    # would say 24 hours)
    clock.now = the_morning_after(DAY + timedelta(days=1)) - 16 * 60
    late_in_the_day = daily_run(world, clock, asaas)

    # Then neither publishes a lag: a daily checkpoint is due at the last settled day's end
    assert first.checked_until == start_of(DAY + timedelta(days=1))
    assert clock.now - late_in_the_day.checked_until > 23 * 3600
    assert (first.behind_seconds, late_in_the_day.behind_seconds) == (0, 0)
    assert late_in_the_day.passes == []


def test_a_payment_asaas_keeps_failing_to_answer_stops_the_read_and_moves_nothing(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a checkpoint at DAY's start, a payment lost on DAY, and Asaas answering 429 (its
    # quota spent) to every try of that payment's read in the morning's run
    clock.now = the_morning_after(DAY - timedelta(days=1))
    daily_run(world, clock, asaas)
    order, payment = lost_payment(asaas, DAY)
    for attempt in range(1, 6):
        asaas.fail(f"/v3/payments/{payment['id']}", attempt, 429)

    # When the daily rule fires the morning after DAY, then the next morning
    clock.now = the_morning_after(DAY)
    stopped = daily_run(world, clock, asaas)
    paid_meanwhile = world.order(order).paid_total
    clock.now = the_morning_after(DAY + timedelta(days=1))
    again = daily_run(world, clock, asaas)

    # Then the first read stopped after its backoff, booking nothing and leaving the checkpoint
    # a day behind; the next read DAY again and booked the payment once
    assert (stopped.interrupted, stopped.passes, stopped.checked_until) == (True, [], start_of(DAY))
    assert stopped.behind_seconds == 86_400
    assert paid_meanwhile == 0
    assert (again.booked, again.caught_up) == (1, True)
    assert world.order(order).paid_total == 5000


def test_a_payment_read_refused_once_is_read_again_within_the_same_run(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a payment lost on DAY whose first read Asaas answers 503
    order, payment = lost_payment(asaas, DAY)
    asaas.fail(f"/v3/payments/{payment['id']}", 1, 503)

    # When the daily rule fires the morning after DAY
    clock.now = the_morning_after(DAY)
    run = daily_run(world, clock, asaas)

    # Then the read went on after the pause, and the payment is booked once
    assert (run.interrupted, run.booked, run.caught_up) == (False, 1, True)
    assert payment_reads(asaas, payment["id"]) == 2
    assert world.order(order).paid_total == 5000


def test_the_function_publishes_a_caught_up_daily_checkpoint_s_lag_as_zero(
    world: World, clock: FakeClock, asaas: FakeProviderApis, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the daily run caught up the morning after DAY, and run again late the next day (an
    # operator's invocation, a retried event): its checkpoint is a day behind the clock
    clock.now = the_morning_after(DAY)
    daily_run(world, clock, asaas)
    clock.now = the_morning_after(DAY + timedelta(days=1)) - 16 * 60
    run = daily_run(world, clock, asaas)
    capsys.readouterr()

    # When the function publishes the run's metrics
    handler.publish(run)
    handler.metrics.flush_metrics()

    # Then the lag StatementBehind reads is 0, not the day the checkpoint is behind the clock
    [emf] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert emf["statement_lag_seconds"] == [0.0]
    assert run.checked_until is not None
    assert clock.now - run.checked_until > 23 * 3600
