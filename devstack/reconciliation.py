"""The reconciliation's state machine on the embedded stack: the same steps of the same function,
plan -> each unit checked side by side (a thread pool in place of the Map state, at most
`max_concurrency` at once, each unit invoked again while it says it is not done) -> finish,
with the state machine's retries. A unit that still fails after them fails the run: finish is
not invoked, and the checkpoint stays where it was (infra/constructs/reconciliation.py).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from functions.reconcile.units import CHECK, FINISH, PLAN
from infra.reconciliation import RECONCILIATION, RETRY_ATTEMPTS

Handler = Callable[[dict[str, Any], Any], Any]


class ReconciliationRunFailed(RuntimeError):
    """A unit failed after its retries: what the execution's failure says on AWS."""


class LocalReconciliation:
    """Called like the function a schedule runs (`Every`), it runs one whole reconciliation and
    returns what the finish step returned."""

    def __init__(
        self,
        handler: Handler,
        max_concurrency: int = RECONCILIATION.max_concurrency,
        retry_attempts: int = RETRY_ATTEMPTS,
    ) -> None:
        self._handler = handler
        self._max_concurrency = max_concurrency
        self._retry_attempts = retry_attempts

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        planned = self._handler({"step": PLAN}, context)
        with ThreadPoolExecutor(self._max_concurrency, thread_name_prefix="reconcile") as pool:
            checked = list(pool.map(lambda unit: self._check_unit(unit, context), planned["units"]))
        result: dict[str, Any] = self._handler(
            {"step": FINISH, "run": planned["run"], "totals": [c["totals"] for c in checked]},
            context,
        )
        return result

    def _check_unit(self, unit: dict[str, Any], context: Any) -> dict[str, Any]:
        state: dict[str, Any] = {"step": CHECK, "unit": unit}
        while True:
            state = self._invoke_with_retries(state, context)
            if state["done"]:
                return state

    def _invoke_with_retries(self, state: dict[str, Any], context: Any) -> dict[str, Any]:
        """No wait between tries (the state machine waits 10 s, then 20, then 40): the local
        server's failures are injected, not throttling that passes."""
        failures = 0
        while True:
            try:
                result: dict[str, Any] = self._handler(state, context)
            except Exception as exc:
                failures += 1
                if failures > self._retry_attempts:
                    raise ReconciliationRunFailed(
                        f"unit {state['unit']['bucket']} failed {failures} times: {exc}"
                    ) from exc
            else:
                return result
