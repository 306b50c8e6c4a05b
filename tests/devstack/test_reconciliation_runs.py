"""The embedded stack's stand-in for the reconciliation's state machine: the same steps of the
same handler, its units side by side, retried, and a run that cannot finish moves nothing."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import pytest

from devstack.reconciliation import LocalReconciliation, ReconciliationRunFailed
from fixtures.lambda_events import FakeLambdaContext
from functions.reconcile import handler
from functions.reconcile.checkpoint import CHECKPOINT_SK, LAST_RUN_SK
from functions.reconcile.service import Reconciler
from infra.reconciliation import RETRY_ATTEMPTS
from tests.support.clock import FakeClock
from tests.support.reconciliation import T0, stored, unbalanced_orders_over_hours
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CONTEXT = FakeLambdaContext(function_name="umavez-reconciliation")


@pytest.fixture
def unbalanced(world: World, clock: FakeClock, dynamodb: DynamoDBClient) -> list[str]:
    """Six orders changed over an hour and a half, each total then changed by hand."""
    clock.now = T0 + 600
    orders = unbalanced_orders_over_hours(world, clock, dynamodb, 6, every=900)
    clock.advance(60)
    return orders


@pytest.fixture(autouse=True)
def _handler_on_the_test_clock(
    world: World, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handler, "reconciler", lambda: Reconciler(world.dynamodb, TABLES, clock))


class FailingUnits:
    """The handler, but the check of one unit fails its first `failures` invocations."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.steps: Counter[str] = Counter()
        self._failing: str | None = None

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        self.steps[event["step"]] += 1
        if event["step"] == "check":
            self._failing = self._failing or event["unit"]["bucket"]
            if event["unit"]["bucket"] == self._failing and self.failures:
                self.failures -= 1
                raise ConnectionError("DynamoDB endpoint unreachable")
        return handler.lambda_handler(event, context)


def test_a_unit_that_fails_is_retried_and_the_run_finishes(
    unbalanced: list[str], dynamodb: DynamoDBClient
) -> None:
    # Given a unit whose check fails as often as the state machine retries it
    flaky = FailingUnits(failures=RETRY_ATTEMPTS)

    # When the run goes through plan, its units four at a time, and finish
    result = LocalReconciliation(flaky, max_concurrency=4)({}, CONTEXT)

    # Then the unit was tried again and the run found every order, once
    assert flaky.failures == 0
    assert (flaky.steps["plan"], flaky.steps["finish"]) == (1, 1)
    assert result["mismatches"]["unbalanced_total"] == len(unbalanced)
    assert stored(dynamodb, LAST_RUN_SK)["orders_checked"] == len(unbalanced)


def test_a_unit_that_keeps_failing_fails_the_run_and_the_next_checks_its_window(
    unbalanced: list[str], dynamodb: DynamoDBClient, clock: FakeClock
) -> None:
    # Given a unit whose check fails once more than it is retried
    broken = FailingUnits(failures=RETRY_ATTEMPTS + 1)

    # When the run goes through its steps
    with pytest.raises(ReconciliationRunFailed, match=f"failed {RETRY_ATTEMPTS + 1} times"):
        LocalReconciliation(broken, max_concurrency=4)({}, CONTEXT)

    # Then the run never finished: no summary, no checkpoint
    assert broken.steps["finish"] == 0
    assert stored(dynamodb, CHECKPOINT_SK) == stored(dynamodb, LAST_RUN_SK) == {}
    # And the next run checks the whole window again
    clock.advance(3600)
    result = LocalReconciliation(handler.lambda_handler, max_concurrency=4)({}, CONTEXT)
    assert result["mismatches"]["unbalanced_total"] == len(unbalanced)
