"""The scheduled reconciliation cut into units of work, and the shapes its steps hand each other.

A run is three steps (docs/notifications.md, "Reconciliation"): `plan` reads the checkpoint and
cuts the window into units, one per pass, hour and shard of the `changed` index; `check` reads
one unit, at most `ORDERS_PER_INVOCATION` orders an invocation, and says where it stopped;
`finish` adds the units' totals up, records the run and moves the checkpoint. On AWS a Step
Functions state machine runs them (infra/constructs/reconciliation.py), the units side by side;
on the embedded stack a thread pool does (devstack/reconciliation.py). What they hand each
other is JSON, small on purpose: a state's input or output is at most 256 KB.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Final

# The `step` of the event the function is invoked with.
PLAN: Final = "plan"
CHECK: Final = "check"
FINISH: Final = "finish"

# Orders one `check` invocation reads (its timeout is sized from it: infra/reconciliation.py).
# A unit with more goes on in the next invocation, from the index's cursor: no unit is bounded
# by one Lambda's timeout, however busy its hour was.
ORDERS_PER_INVOCATION: Final = 5_000
# Units one run plans at most: the plan and the units' totals travel in one state (256 KB), and
# a Standard execution keeps at most 25,000 history events (about 12 per unit, 8 more per
# invocation after a unit's first). A longer backlog stops at an hour boundary and the next
# run goes on (`caught_up` false).
MAX_UNITS_PER_RUN: Final = 400
# Orders (index keys, counted by the plan) one run reads at most, both passes together, so that
# a run over a backlog still ends within its budget: at ~15 ms an order, 32 workers read this
# many in 39 minutes of the 45 (infra/reconciliation.py models it). An hour at 200 changes a
# second is read about four times (two passes, two runs each): 2.9 million.
MAX_ORDERS_PER_RUN: Final = 5_000_000
# How far behind now a run reads, and how long a candidate waits before it is read again: the
# `changed` index is eventually consistent (its writes land within a second or so).
SETTLE_SECONDS: Final = 5.0


@dataclass(frozen=True)
class Unit:
    """One partition of the `changed` index (an hour and a shard), for one pass, with the part
    of the run's window that falls in that hour; `cursor` is where the last invocation stopped
    (the index's LastEvaluatedKey, as DynamoDB wrote it)."""

    bucket: str
    checked_from: str
    checked_until: str
    lagged: bool = False
    cursor: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        shape: dict[str, Any] = {
            "bucket": self.bucket,
            "from": self.checked_from,
            "until": self.checked_until,
            "lagged": self.lagged,
        }
        if self.cursor:
            shape["cursor"] = self.cursor
        return shape

    @classmethod
    def from_json(cls, shape: dict[str, Any]) -> Unit:
        return cls(
            bucket=str(shape["bucket"]),
            checked_from=str(shape["from"]),
            checked_until=str(shape["until"]),
            lagged=bool(shape.get("lagged", False)),
            cursor=shape.get("cursor") or None,
        )

    def resumed_at(self, cursor: dict[str, Any] | None) -> Unit:
        return replace(self, cursor=cursor)


@dataclass(frozen=True)
class RunPlan:
    """A run's window and its units. `checkpoint_read` is the checkpoint it started from: the
    finish step saves its own only over that one (runs that overlap never move it back)."""

    checkpoint_read: str
    checked_from: str
    checked_until: str
    lagged_until: str
    # False when the window stopped at a cap before `now - settle`: the next run resumes.
    caught_up: bool
    orders_counted: int
    units: tuple[Unit, ...] = ()

    def run_json(self) -> dict[str, Any]:
        """Everything but the units: what the finish step needs."""
        return {
            "checkpoint_read": self.checkpoint_read,
            "checked_from": self.checked_from,
            "checked_until": self.checked_until,
            "lagged_until": self.lagged_until,
            "caught_up": self.caught_up,
            "orders_counted": self.orders_counted,
        }

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run_json(), "units": [unit.to_json() for unit in self.units]}

    @classmethod
    def from_run_json(cls, shape: dict[str, Any]) -> RunPlan:
        return cls(
            checkpoint_read=str(shape["checkpoint_read"]),
            checked_from=str(shape["checked_from"]),
            checked_until=str(shape["checked_until"]),
            lagged_until=str(shape["lagged_until"]),
            caught_up=bool(shape["caught_up"]),
            orders_counted=int(shape["orders_counted"]),
        )


@dataclass
class UnitTotals:
    """What a unit found, added up over its invocations: counts only (each mismatch is logged,
    with its order and detail, by the invocation that found it)."""

    orders_read: int = 0
    orders_checked: int = 0
    outbox_items_checked: int = 0
    cleared_on_recheck: int = 0
    mismatches: Counter[str] = field(default_factory=Counter)

    def add(self, other: UnitTotals) -> UnitTotals:
        return UnitTotals(
            self.orders_read + other.orders_read,
            self.orders_checked + other.orders_checked,
            self.outbox_items_checked + other.outbox_items_checked,
            self.cleared_on_recheck + other.cleared_on_recheck,
            self.mismatches + other.mismatches,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "orders_read": self.orders_read,
            "orders_checked": self.orders_checked,
            "outbox_items_checked": self.outbox_items_checked,
            "cleared_on_recheck": self.cleared_on_recheck,
            "mismatches": dict(self.mismatches),
        }

    @classmethod
    def from_json(cls, shape: dict[str, Any] | None) -> UnitTotals:
        shape = shape or {}
        return cls(
            int(shape.get("orders_read", 0)),
            int(shape.get("orders_checked", 0)),
            int(shape.get("outbox_items_checked", 0)),
            int(shape.get("cleared_on_recheck", 0)),
            Counter({str(k): int(v) for k, v in (shape.get("mismatches") or {}).items()}),
        )
