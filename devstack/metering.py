"""The client side of the cost model: which function made each AWS call, how long each
invocation ran, and how many bytes each function logged.

- `wrap(name, handler)`: an invocation is timed, wall clock, split into the time it waited on
  AWS calls (from botocore's `before-send` to `response-received`: here the local server) and
  its own work; while it runs, every AWS request its thread makes carries the header
  `X-Umavez-Caller: name`, which the local server's accounting reads
  (`devstack/accounting.py`). The pollers run handlers in-process, one thread per
  invocation, so a thread-local names the function.
- `log_stream(stream)`: a log stream that counts the bytes and lines each function writes
  (Powertools Logger: what CloudWatch Logs would ingest).
- stdout, while installed: what a handler prints (Powertools Metrics' EMF blobs, which Lambda
  also ships to CloudWatch Logs) is counted for its function and not echoed.

The embedded stack names the caller of every AWS call even without metering
(`tag_calls`, `acting_as`, and `on_behalf_of` for a poller playing a function's event source
mapping): the local server records the permissions each function's calls need
(`devstack/calls.py`).
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

import boto3

from devstack.accounting import CALLER_HEADER
from devstack.calls import MAPPING_HEADER
from devstack.capacity import Units

Handler = Callable[[dict[str, Any], Any], Any]
_current = threading.local()


def current_function() -> str | None:
    name: str | None = getattr(_current, "function", None)
    return name


def tag_calls() -> Callable[[], None]:
    """From now on, every boto3 client made from the default session names the function whose
    invocation calls it. Returns the undo."""
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    session: Any = boto3.DEFAULT_SESSION
    session.events.register("before-send", _tag_request, unique_id="umavez-caller")
    return lambda: session.events.unregister("before-send", unique_id="umavez-caller")


def acting_as(name: str, handler: Handler) -> Handler:
    """The handler, whose AWS calls name `name` as their caller while it runs."""

    def named(event: dict[str, Any], context: Any) -> Any:
        previous = current_function()
        _current.function = name
        try:
            return handler(event, context)
        finally:
            _current.function = previous

    return named


def on_behalf_of(function: str, client: Any) -> Any:
    """The client, every call of which names `function` as its caller: a poller's, which
    plays the function's event source mapping, calls with the function's execution role."""

    def tag(request: Any, **_: Any) -> None:
        request.headers[MAPPING_HEADER] = function

    client.meta.events.register("before-send", tag)
    return client


class Metering:
    """Counters per function: `invocations`, `billed_ms` (each invocation's wall-clock time on
    this machine, rounded up to 1 ms), `aws_seconds` (of which waiting on AWS calls: the local
    server), `compute_ms` (the rest: the function's own work), `log_bytes`, `log_lines`,
    `emf_bytes`, `emf_lines`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counters: dict[str, Units] = {}
        self._stdout: TextIO | None = None
        self._session: Any = None
        self._previous_session: Any = None

    # -- lifecycle ---------------------------------------------------------------------------

    def install(self) -> Metering:
        """Tag the AWS calls of every boto3 client created from now on (the handlers create
        theirs lazily, on their first invocation), and count what handlers print."""
        self._previous_session = boto3.DEFAULT_SESSION
        boto3.setup_default_session()
        self._session = boto3.DEFAULT_SESSION
        events = self._session.events
        events.register("before-send", _tag_request, unique_id="umavez-caller")
        events.register("before-send", _aws_call_started, unique_id="umavez-aws-started")
        events.register("response-received", _aws_call_ended, unique_id="umavez-aws-ended")
        self._stdout = sys.stdout
        sys.stdout = _TaggedStdout(sys.stdout, self)
        return self

    def uninstall(self) -> None:
        if self._stdout is not None:
            sys.stdout = self._stdout
            self._stdout = None
        if self._session is not None:
            events = self._session.events
            events.unregister("before-send", unique_id="umavez-caller")
            events.unregister("before-send", unique_id="umavez-aws-started")
            events.unregister("response-received", unique_id="umavez-aws-ended")
            self._session = None
            boto3.DEFAULT_SESSION = self._previous_session

    def __enter__(self) -> Metering:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.uninstall()

    # -- recording ---------------------------------------------------------------------------

    def add(self, function: str, **amounts: float) -> None:
        with self._lock:
            counters = self.counters.setdefault(function, Units())
            for name, amount in amounts.items():
                counters[name] += amount

    def wrap(self, name: str, handler: Handler) -> Handler:
        def metered(event: dict[str, Any], context: Any) -> Any:
            previous = current_function()
            previous_aws = getattr(_current, "aws_seconds", 0.0)
            _current.function, _current.aws_seconds = name, 0.0
            started = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                elapsed = time.perf_counter() - started
                waited = min(_current.aws_seconds, elapsed)
                self.add(
                    name,
                    invocations=1,
                    billed_ms=math.ceil(elapsed * 1000),
                    aws_seconds=waited,
                    compute_ms=(elapsed - waited) * 1000,
                )
                _current.function, _current.aws_seconds = previous, previous_aws

        return metered

    def log_stream(self, stream: TextIO) -> Any:
        return _CountingStream(stream, self)

    def snapshot(self) -> dict[str, dict[str, float]]:
        with self._lock:
            return {name: dict(counters) for name, counters in self.counters.items()}


def _tag_request(request: Any, **_: Any) -> None:
    name = current_function()
    if name:
        request.headers[CALLER_HEADER] = name


def _aws_call_started(**_: Any) -> None:
    _current.call_started = time.perf_counter()


def _aws_call_ended(**_: Any) -> None:
    started = getattr(_current, "call_started", None)
    if started is not None and current_function():
        _current.aws_seconds = getattr(_current, "aws_seconds", 0.0) + (
            time.perf_counter() - started
        )
    _current.call_started = None


class _CountingStream:
    """A handler log stream: counts each function's bytes and lines, writes everything."""

    def __init__(self, inner: TextIO, metering: Metering) -> None:
        self._inner = inner
        self._metering = metering

    def write(self, text: str) -> int:
        self._metering.add(
            current_function() or "outside an invocation",
            log_bytes=len(text.encode()),
            log_lines=text.count("\n"),
        )
        return self._inner.write(text)

    def flush(self) -> None:
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _TaggedStdout:
    """stdout: a handler's prints (EMF metrics) are counted for its function, not echoed."""

    def __init__(self, inner: TextIO, metering: Metering) -> None:
        self._inner = inner
        self._metering = metering

    def write(self, text: str) -> int:
        function = current_function()
        if function is None:
            return self._inner.write(text)
        self._metering.add(function, emf_bytes=len(text.encode()), emf_lines=text.count("\n"))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
