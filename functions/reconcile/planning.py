"""A scheduled run's window since the checkpoint, cut into units (functions/reconcile/units.py):
per pass, per hour, one unit per shard of the `changed` index that holds an order, up to the
run's caps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from functions.reconcile.stamps import hours, iso, shifted
from functions.reconcile.units import RunPlan, Unit
from functions.shared import tables
from functions.shared.items import RunCheckpoint


@dataclass(frozen=True)
class PlanLimits:
    settle_seconds: float
    first_run_lookback_seconds: int
    pending_deadline_seconds: int
    max_orders_per_run: int
    max_units_per_run: int


class Planner:
    def __init__(self, limits: PlanLimits, count: Callable[[str], int]) -> None:
        self._limits = limits
        self._count = count

    def plan(self, now: float, saved: RunCheckpoint) -> RunPlan:
        """The window since the checkpoint up to `now - settle`, cut into units: per pass, per
        hour, one unit per shard of the `changed` index that holds an order (counted, keys only).
        The window stops at an hour boundary once the run's orders or units reach their caps (a
        huge backlog is resumed by the next run, not lost).

        Then the same window once more, a deadline later (the lagged pass, with its own
        checkpoint): every outbox item of an order whose last change is that old is past its
        deadline, so one that is neither sent nor in the due index (its stream try was lost)
        is reported there, once, however young it was when its order was first checked.
        """
        start = saved.checked_until or iso(now - self._limits.first_run_lookback_seconds)
        until = iso(now - self._limits.settle_seconds)
        units: list[Unit] = []
        counted = [0]
        checked_until = max(self._plan_pass(start, until, units, counted), start)
        lag = self._limits.pending_deadline_seconds + 60
        lagged_from = saved.lagged_until or shifted(start, -lag)
        lagged_until = shifted(checked_until, -lag)
        if lagged_from < lagged_until:
            # The caps are shared: what the first pass left; the lagged one resumes next run.
            lagged_until = self._plan_pass(lagged_from, lagged_until, units, counted, lagged=True)
        else:
            lagged_until = lagged_from
        return RunPlan(
            checkpoint_read=saved.checked_until,
            checked_from=start,
            checked_until=checked_until,
            lagged_until=lagged_until,
            caught_up=checked_until >= until,
            orders_counted=counted[0],
            units=tuple(units),
        )

    def _plan_pass(
        self, start: str, until: str, units: list[Unit], counted: list[int], lagged: bool = False
    ) -> str:
        """Units for the hours of [start, until], whole hours only; how far they reach (an
        hour boundary when a cap stopped them)."""
        for hour_start, hour_end in hours(start, until):
            full = len(units) + tables.CHANGES_SHARDS > self._limits.max_units_per_run
            if counted[0] >= self._limits.max_orders_per_run or full:
                return hour_start
            for bucket in tables.changes_buckets(hour_start):
                orders = self._count(bucket)
                if orders:
                    units.append(Unit(bucket, hour_start, hour_end, lagged=lagged))
                    counted[0] += orders
        return until
