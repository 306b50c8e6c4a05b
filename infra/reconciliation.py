"""The scheduled reconciliation's fan-out: its settings, shared by the state machine
(infra/constructs/reconciliation.py) and the embedded stack's stand-in for it, and the model of
the rate of order changes it keeps up with (docs/notifications.md, "Reconciliation").

No aws_cdk import here: the local stack and the cost model read these without paying for CDK.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from functions.reconcile.units import MAX_ORDERS_PER_RUN, ORDERS_PER_INVOCATION, SETTLE_SECONDS
from functions.shared import tables

# A check invocation is retried this many times more when it fails (it only reads: trying
# again is safe), waiting RETRY_FIRST_WAIT_SECONDS, then twice as long each time; a unit that
# still fails fails the run, and the checkpoint stays.
RETRY_ATTEMPTS: Final = 3
RETRY_FIRST_WAIT_SECONDS: Final = 10
RETRY_BACKOFF_RATE: Final = 2.0
# Each Lambda reading a changed order waits on DynamoDB: a consistent Query of the order's
# partition, then a BatchGetItem of its outbox items, ~15 ms the pair
# (docs/notifications.md: "~15 ms an order", the figure the 20,000-order cap of the single
# Lambda was sized with). An order the index lists that is another run's costs the Query only.
SECONDS_PER_ORDER_QUERY: Final = 0.0075
SECONDS_PER_OUTBOX_READ: Final = 0.0075
# The re-read of a candidate waits SETTLE_SECONDS once per invocation that found one.
# The settings' reads of an order per change: each pass (the first, and the lagged one a
# deadline later) reads the order's hour partition in the run that checks it and again in the
# next run, whose window starts within that hour (it skips the order there: a Query only).
PASSES: Final = 2
RUNS_READING_AN_HOUR: Final = 2
HOUR_SECONDS: Final = 3600


@dataclass(frozen=True)
class ReconciliationSettings:
    """How the hourly run fans out. The Map state runs `max_concurrency` units at once (an
    inline Map runs at most 40 at a time); a run must end within `run_budget_seconds`, the
    state machine's timeout, before the next one starts."""

    max_concurrency: int = 32
    shards: int = tables.CHANGES_SHARDS
    orders_per_invocation: int = ORDERS_PER_INVOCATION
    max_orders_per_run: int = MAX_ORDERS_PER_RUN
    run_every_seconds: int = HOUR_SECONDS
    run_budget_seconds: int = 45 * 60
    seconds_per_order_query: float = SECONDS_PER_ORDER_QUERY
    seconds_per_outbox_read: float = SECONDS_PER_OUTBOX_READ
    # Reads of an order's hour partition per pass: the run that checks it, and the next run
    # whose window starts within that hour (how much of the hour it reads again depends on the
    # minute the schedule fires: the whole hour, 2, at worst).
    reads_of_an_hour: float = RUNS_READING_AN_HOUR

    @property
    def seconds_per_order_checked(self) -> float:
        return self.seconds_per_order_query + self.seconds_per_outbox_read

    @property
    def worker_seconds_per_change(self) -> float:
        """Lambda time one order change costs, both passes: checked once in each, and read
        (Query only) once more in each by the next run."""
        per_pass = self.seconds_per_order_checked + (
            (self.reads_of_an_hour - 1) * self.seconds_per_order_query
        )
        return PASSES * per_pass

    @property
    def reads_per_change(self) -> float:
        return PASSES * self.reads_of_an_hour

    @property
    def check_timeout_seconds(self) -> int:
        """The function's timeout: three times an invocation's share at the modelled pace, plus
        the settle wait of its re-reads; a slower DynamoDB (throttled, retried) still fits."""
        share = self.orders_per_invocation * self.seconds_per_order_checked
        return math.ceil(3 * share + SETTLE_SECONDS + 60)


RECONCILIATION: Final = ReconciliationSettings()


def reconciliation_capacity(settings: ReconciliationSettings = RECONCILIATION) -> float:
    """The order changes a second the scheduled run keeps up with, sustained: the lower of what
    its workers check within the run's budget and what its cap on orders read lets one run read.

    Time: a run every `run_every_seconds` (E) of changes at rate R costs the workers
    E R x `worker_seconds_per_change` of Lambda time; `max_concurrency` (M) of them share it,
    and the run is no shorter than its longest unit (one hour's shard, read whole: 3,600 R /
    `shards` (S) orders at `seconds_per_order_checked`, its invocations one after another). A
    schedule that keeps every worker busy while work is left ends within work / M + the longest
    unit (Graham's bound for list scheduling), and that must fit the budget (B):

        R (E per_change / M + 3,600 per_checked / S) <= B

    Cap: a run reads each change `reads_per_change` (2 passes x 2) times, and at most
    `max_orders_per_run` orders: R <= cap / (E x 4).

    Defaults: per change 2 x (15 + 7.5) = 45 ms, per order checked 15 ms, M = 32, S = 16,
    E = 3,600 s, B = 2,700 s: time R <= 2,700 / (3,600 x 0.045 / 32 + 3,600 x 0.015 / 16)
    = 2,700 / 8.44 = 320 a second; cap R <= 5,000,000 / (3,600 x 4) = 347 a second: 320.
    """
    every = settings.run_every_seconds
    seconds_per_unit_rate = (
        every * settings.worker_seconds_per_change / settings.max_concurrency
        + HOUR_SECONDS * settings.seconds_per_order_checked / settings.shards
    )
    by_time = settings.run_budget_seconds / seconds_per_unit_rate
    by_cap = settings.max_orders_per_run / (every * settings.reads_per_change)
    return min(by_time, by_cap)
