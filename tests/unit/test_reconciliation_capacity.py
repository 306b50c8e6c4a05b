"""The reconciliation keeps up with 200 order changes a second, by the model
(infra/reconciliation.py), and what one run hands between its steps fits Step Functions."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from functions.reconcile.handler import MISMATCH_KINDS
from functions.reconcile.units import MAX_UNITS_PER_RUN, RunPlan, Unit, UnitTotals
from functions.shared import tables
from functions.shared.dynamo import to_attributes
from infra.reconciliation import (
    HOUR_SECONDS,
    PASSES,
    RECONCILIATION,
    RUNS_READING_AN_HOUR,
    reconciliation_capacity,
)

STATE_LIMIT_BYTES = 256 * 1024
REQUIRED_RATE = 200


def test_the_default_settings_keep_up_with_200_changes_a_second() -> None:
    assert reconciliation_capacity(RECONCILIATION) >= REQUIRED_RATE
    # The arithmetic of the docs: 2 x (15 + 7.5) ms a change, 32 workers, 16 shards, 45 minutes
    assert RECONCILIATION.worker_seconds_per_change == pytest.approx(0.045)
    assert reconciliation_capacity(RECONCILIATION) == pytest.approx(320)


@pytest.mark.parametrize("workers", [16, 8, 4, 1])
def test_fewer_workers_keep_up_with_less(workers: int) -> None:
    fewer = replace(RECONCILIATION, max_concurrency=workers)

    assert reconciliation_capacity(fewer) < reconciliation_capacity(RECONCILIATION)
    assert reconciliation_capacity(replace(fewer, max_concurrency=workers // 2 or 1)) <= (
        reconciliation_capacity(fewer)
    )


def test_one_lambda_alone_does_not_keep_up() -> None:
    # Given the design this replaced: one worker, one unit per hour (no shards), one run
    single = replace(RECONCILIATION, max_concurrency=1, shards=1)

    assert reconciliation_capacity(single) < REQUIRED_RATE


def test_slower_reads_keep_up_with_less() -> None:
    slower = replace(RECONCILIATION, seconds_per_order_query=0.015, seconds_per_outbox_read=0.015)

    assert reconciliation_capacity(slower) < reconciliation_capacity(RECONCILIATION)


def test_a_run_at_its_cap_on_orders_still_ends_within_its_budget() -> None:
    # Every order the cap lets a run read checked (the slowest), shared by the workers
    worst = (
        RECONCILIATION.max_orders_per_run
        * RECONCILIATION.seconds_per_order_checked
        / RECONCILIATION.max_concurrency
    )

    assert worst <= RECONCILIATION.run_budget_seconds
    # And the cap holds an hour at the required rate, read in both passes by two runs each
    hour = REQUIRED_RATE * HOUR_SECONDS * PASSES * RUNS_READING_AN_HOUR
    assert RECONCILIATION.max_orders_per_run >= hour
    assert RECONCILIATION.shards == tables.CHANGES_SHARDS
    # An inline Map runs at most 40 iterations at once
    assert RECONCILIATION.max_concurrency <= 40


def test_a_run_at_its_cap_on_units_fits_one_state() -> None:
    # Given a plan of as many units as a run may have (as planned: no cursor yet), and each
    # unit's totals with a count of every kind of mismatch at its largest
    bucket = "2026-11-30T06#15"
    stamp = "2026-11-30T06:59:59.999+00:00"
    units = tuple(Unit(bucket, stamp, stamp, lagged=True) for _ in range(MAX_UNITS_PER_RUN))
    plan = RunPlan(stamp, stamp, stamp, stamp, False, 10**9, units)
    every_kind = Counter(dict.fromkeys(MISMATCH_KINDS, 10**9))
    totals = UnitTotals(10**9, 10**9, 10**9, 10**9, every_kind).to_json()
    # ... and one unit's own state, resumed at the widest cursor DynamoDB writes
    cursor = to_attributes(
        {
            tables.PARTITION_KEY: tables.order_pk("o" * 500),
            tables.SORT_KEY: tables.ORDER_SORT,
            tables.CHANGES_BUCKET: bucket,
        }
    )
    iteration = {"step": "check", "unit": units[0].resumed_at(cursor).to_json(), "totals": totals}

    # Then the plan, and the state after the Map (the plan and the units' totals), each fit
    after_map = {**plan.to_json(), "checked": {"totals": [totals] * MAX_UNITS_PER_RUN}}
    assert len(json.dumps(after_map)) < STATE_LIMIT_BYTES
    assert len(json.dumps(iteration)) < 2048
