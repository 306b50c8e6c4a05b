"""Event source mappings with Lambda's semantics, polling the local server. Each runs its
mapping's one definition (`infra/mappings.py`: batch size and window, filter, retries,
bisecting, parallelization, partial batch responses, concurrency, starting position), the one
the CDK stack synthesizes. A poller acts for Lambda with the function's execution role: its
calls name that function (`devstack/metering.py`'s `on_behalf_of`), so the local server
records them among the function's (`devstack/calls.py`).

- SQS -> process: `devstack/queue_poller.py`.
- DynamoDB Streams -> outbox: `devstack/stream_poller.py`.
- a schedule for the sweeper: `Every`, here.
When idle, a poller waits a little longer each time (up to half a second), and goes back
to full speed as soon as there is work: empty polls cost the single-threaded server time.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from devstack.lambdas import LambdaContext

Handler = Callable[[dict[str, Any], Any], Any]
IDLE_MIN_SECONDS = 0.01
IDLE_MAX_SECONDS = 0.5


class Poller(threading.Thread):
    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        # Set: the poller takes nothing new (its function is down: a burst drill's outage).
        self.paused = threading.Event()
        self.stats: Counter[str] = Counter()
        self.busy = False
        self.errors: list[str] = []

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        idle = IDLE_MIN_SECONDS
        while not self.stopping.is_set():
            if self.paused.is_set():
                self.stopping.wait(IDLE_MAX_SECONDS)
                continue
            try:
                worked = self.poll_once()
            except Exception as exc:  # noqa: BLE001 - a Lambda error must not kill the mapping
                self.errors.append(repr(exc))
                worked = False
            if worked:
                idle = IDLE_MIN_SECONDS
            else:
                self.stopping.wait(idle)
                idle = min(IDLE_MAX_SECONDS, idle * 2)

    def poll_once(self) -> bool:
        raise NotImplementedError


class Every(Poller):
    """A schedule: calls `handler` every `seconds`."""

    def __init__(self, name: str, seconds: float, handler: Handler, function_name: str) -> None:
        super().__init__(name)
        self._seconds = seconds
        self._handler = handler
        self._function_name = function_name
        # What each run returned, for the drill to judge (a handful of small dicts).
        self.results: list[Any] = []

    def poll_once(self) -> bool:
        if self.stopping.wait(self._seconds):
            return True
        self.run_now()
        return True

    def run_now(self) -> Any:
        self.busy = True
        try:
            self.stats["runs"] += 1
            result = self._handler({}, LambdaContext(self._function_name))
            self.results.append(result)
            return result
        finally:
            self.busy = False
