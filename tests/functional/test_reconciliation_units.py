"""The scheduled reconciliation cut into units: every changed order checked once, whatever the
cut, and a run that did not finish moves nothing (functions/reconcile/units.py)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from functions.reconcile.checkpoint import CHECKPOINT_SK, LAST_RUN_SK
from functions.reconcile.report import Report
from functions.reconcile.service import Reconciler
from functions.reconcile.units import RunPlan, Unit, UnitTotals
from functions.shared import tables
from tests.support.clock import FakeClock
from tests.support.reconciliation import (
    T0,
    stored,
    two_ids_in_one_shard,
    unbalanced_orders_over_hours,
)
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def unbalanced(reports: list[Report]) -> Counter[str]:
    """Each order's unbalanced totals reported (their outbox items, never sent, are stuck too
    once past the deadline: the lagged pass's to report)."""
    return Counter(
        m.order_id for r in reports for m in r.mismatches if m.kind == "unbalanced_total"
    )


def check_every_unit(reconciler: Reconciler, plan: RunPlan) -> tuple[list[Report], int]:
    """Each unit to its end, invocation after invocation, as the Map's iterations do; the
    reports of every invocation, and how many there were."""
    reports: list[Report] = []
    invocations = 0
    for unit in plan.units:
        pending: Unit | None = unit
        while pending is not None:
            # (through JSON, as the state machine hands a unit and its cursor on)
            pending = Unit.from_json(json.loads(json.dumps(pending.to_json())))
            report, pending = reconciler.check(pending)
            reports.append(report)
            invocations += 1
    return reports, invocations


def test_a_window_split_across_units_checks_every_changed_order_exactly_once(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given 24 orders changed over three hours (one every 7.5 minutes: each hour's orders in
    # several shards of the changed index, the first two in one), every one of them reported
    # by its check
    clock.now = T0 + 1800
    orders = unbalanced_orders_over_hours(
        world, clock, dynamodb, 24, every=450, ids=two_ids_in_one_shard()
    )
    clock.advance(600)
    reconciler = Reconciler(world.dynamodb, TABLES, clock, orders_per_invocation=1)

    # When the run's window is cut into units and each unit is checked, one order an
    # invocation (a unit goes on from where the last invocation stopped)
    plan = reconciler.plan()
    reports, invocations = check_every_unit(reconciler, plan)

    # Then the units span hours and shards, and those holding several orders went on in
    # further invocations
    first_pass = [unit for unit in plan.units if not unit.lagged]
    assert len({unit.bucket[:13] for unit in first_pass}) == 4  # 00:30 .. 03:30
    assert len({unit.bucket for unit in first_pass}) > 4
    assert invocations > len(plan.units)
    # And every changed order was checked once: none missed, none twice
    assert unbalanced(reports) == Counter(orders)
    assert sum(r.orders_checked for r in reports) == len(orders)
    assert plan.orders_counted == sum(r.orders_read for r in reports)


def test_an_order_changed_at_an_hour_boundary_is_checked_once(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given orders changed on the last millisecond of an hour, at its boundary and right after
    clock.now = T0 + 3600 - 0.001
    orders = unbalanced_orders_over_hours(world, clock, dynamodb, 3, every=0.001)
    clock.advance(600)
    reconciler = Reconciler(world.dynamodb, TABLES, clock)

    # When one run checks its units
    reports, _ = check_every_unit(reconciler, reconciler.plan())

    # Then each is reported once, by the unit of its own hour
    assert unbalanced(reports) == Counter(orders)


def test_the_finish_step_records_the_run_and_moves_the_checkpoint(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a run planned and its units checked, one order found unbalanced by a unit
    clock.now = T0 + 600
    [order] = unbalanced_orders_over_hours(world, clock, dynamodb, 1, every=60)
    clock.advance(600)
    reconciler = Reconciler(world.dynamodb, TABLES, clock)
    plan = reconciler.plan()
    reports, _ = check_every_unit(reconciler, plan)
    totals = [UnitTotals.from_json(json.loads(json.dumps(r.totals().to_json()))) for r in reports]

    # When the finish step adds the units' totals up (twice: a retry after it went through)
    finished = reconciler.finish(plan, totals)
    again = reconciler.finish(plan, totals)

    # Then the run's summary says what its units found, and the checkpoint is the plan's end
    last_run = stored(dynamodb, LAST_RUN_SK)
    assert (last_run["orders_checked"], last_run["mismatches"]) == (1, {"unbalanced_total": 1})
    assert (last_run["checked_from"], last_run["checked_until"]) == (
        plan.checked_from,
        plan.checked_until,
    )
    assert last_run["caught_up"] is True
    assert last_run["ran_at"]
    checkpoint = stored(dynamodb, CHECKPOINT_SK)
    assert (checkpoint["checked_until"], checkpoint["lagged_until"]) == (
        plan.checked_until,
        plan.lagged_until,
    )
    assert finished.checkpoint_saved
    assert again.checkpoint_saved  # the same checkpoint again: not an overlap
    assert finished.by_kind == {"unbalanced_total": 1}
    assert order in {m.order_id for r in reports for m in r.mismatches}


def test_a_finish_step_retried_after_its_save_over_an_earlier_checkpoint_is_no_overlap(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a run that finished (a checkpoint stands), and the next run planned from it with
    # an order found unbalanced in its window
    clock.now = T0 + 600
    reconciler = Reconciler(world.dynamodb, TABLES, clock)
    first = reconciler.plan()
    reconciler.finish(first, [r.totals() for r in check_every_unit(reconciler, first)[0]])
    clock.advance(3600)
    unbalanced_orders_over_hours(world, clock, dynamodb, 1, every=60)
    clock.advance(600)
    plan = reconciler.plan()
    assert plan.checkpoint_read == first.checked_until
    totals = [r.totals() for r in check_every_unit(reconciler, plan)[0]]

    # When its finish step saves the checkpoint, then runs again (a retry after it went through)
    finished = reconciler.finish(plan, totals)
    again = reconciler.finish(plan, totals)

    # Then both saves stand: the checkpoint is this run's end, its summary is shown, and no
    # overlap is reported
    assert (finished.checkpoint_saved, again.checkpoint_saved) == (True, True)
    checkpoint = stored(dynamodb, CHECKPOINT_SK)
    assert (checkpoint["checked_until"], checkpoint["lagged_until"]) == (
        plan.checked_until,
        plan.lagged_until,
    )
    last_run = stored(dynamodb, LAST_RUN_SK)
    assert (last_run["checked_from"], last_run["mismatches"]) == (
        plan.checked_from,
        {"unbalanced_total": 1},
    )


def test_a_run_whose_unit_failed_moves_nothing_and_the_next_checks_the_window_again(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a checked first run, then orders changed in the next hour
    clock.now = T0 + 600
    Reconciler(world.dynamodb, TABLES, clock).run()
    before = (stored(dynamodb, CHECKPOINT_SK), stored(dynamodb, LAST_RUN_SK))
    clock.advance(1800)
    orders = unbalanced_orders_over_hours(world, clock, dynamodb, 4, every=900)
    clock.advance(60)

    # When a run is planned and its units checked but one of them never succeeds (the state
    # machine then fails the execution: its finish step is never invoked)
    failing = Reconciler(world.dynamodb, TABLES, clock)
    failed_plan = failing.plan()
    check_every_unit(failing, replace(failed_plan, units=failed_plan.units[1:]))

    # Then the checkpoint and the last run's summary are as they were
    assert (stored(dynamodb, CHECKPOINT_SK), stored(dynamodb, LAST_RUN_SK)) == before

    # And the next run checks the same window again: every order is reported, none skipped
    clock.advance(3600)
    report = Reconciler(world.dynamodb, TABLES, clock).run()
    assert report.checked_from == failed_plan.checked_from
    assert unbalanced([report]) == Counter(orders)
    assert stored(dynamodb, LAST_RUN_SK)["mismatches"]["unbalanced_total"] == len(orders)


def test_a_long_backlog_is_planned_whole_hours_at_a_time_up_to_the_units_cap(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given orders changed over six hours, more shards of them than one run's units may hold
    clock.now = T0 + 600
    orders = unbalanced_orders_over_hours(world, clock, dynamodb, 36, every=600)
    clock.advance(600)
    capped = Reconciler(world.dynamodb, TABLES, clock, max_units_per_run=tables.CHANGES_SHARDS)

    # When capped runs go on until one catches up
    found: Counter[str] = Counter()
    plans: list[RunPlan] = []
    while not plans or not plans[-1].caught_up:
        plans.append(capped.plan())
        reports, _ = check_every_unit(capped, plans[-1])
        capped.finish(plans[-1], [r.totals() for r in reports])
        found += unbalanced(reports)

    # Then each run stopped at an hour boundary within its cap, said it was behind, and the
    # next went on from there: every order checked once over the runs
    assert all(len(plan.units) <= tables.CHANGES_SHARDS for plan in plans)
    assert [plan.caught_up for plan in plans[:-1]] == [False] * (len(plans) - 1)
    assert all(plan.checked_until.endswith(":00:00.000+00:00") for plan in plans[:-1])
    assert [p.checked_from for p in plans[1:]] == [p.checked_until for p in plans[:-1]]
    assert len(plans) > 2
    assert found == Counter(orders)


def test_an_order_whose_items_cannot_be_read_is_reported_and_the_others_still_checked(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given three unbalanced orders of one hour, one of them with a total no one can read (an
    # item written by hand, or by another version of the code)
    clock.now = T0 + 600
    orders = unbalanced_orders_over_hours(world, clock, dynamodb, 3, every=1)
    dynamodb.update_item(
        TableName=TABLES.ledger,
        Key={"pk": {"S": tables.order_pk(orders[1])}, "sk": {"S": tables.ORDER_SORT}},
        UpdateExpression="SET paid_total = :text",
        ExpressionAttributeValues={":text": {"S": "fifty"}},
    )
    clock.advance(600)
    reconciler = Reconciler(world.dynamodb, TABLES, clock)

    # When its units are checked
    reports, _ = check_every_unit(reconciler, reconciler.plan())

    # Then the unreadable order is a finding about that order, the unit did not fail, and the
    # other two were checked as ever
    unreadable = [m.order_id for r in reports for m in r.mismatches if m.kind == "unreadable_order"]
    assert unreadable == [orders[1]]
    assert unbalanced(reports) == Counter({orders[0]: 1, orders[2]: 1})
