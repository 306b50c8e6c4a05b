"""The embedded stack's AWS: one `python -m devstack.server` process (`devstack/server.py`), or
two with DynamoDB and its streams in a process of their own, launched and stopped for one
stack; their priorities (the rest of a split stack yields the CPU to the DynamoDB process), and
their statistics as one server's.

Long on purpose: the launcher (split or not, priorities, startup and shutdown) is one
mechanism.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from typing import Any

from devstack.server import QUEUE_METRICS_PATH, STATS_PATH

# Served by the DynamoDB process of a split server: DynamoDB and its streams share a backend.
DYNAMODB_SERVICES = ("dynamodb", "dynamodbstreams")
# How much lower than the DynamoDB process the rest of a split stack runs (nice(1) steps).
YIELDING_NICENESS = 10


# The priority this process started at: what `niceness` is counted from, however many
# stacks it starts (a lowered priority cannot be raised again without privileges).
_STARTING_PRIORITY = os.getpriority(os.PRIO_PROCESS, 0) if hasattr(os, "getpriority") else 0


def _steps_down(niceness: int) -> int:
    """How many nice steps lower the caller must go to run `niceness` below the process's
    starting priority (0 when it is there already)."""
    if not hasattr(os, "getpriority"):
        return 0
    target = min(_STARTING_PRIORITY + niceness, 19)
    return max(0, target - os.getpriority(os.PRIO_PROCESS, 0))


def yield_cpu(niceness: int) -> None:
    """Run the calling thread (Linux; elsewhere the process) `niceness` steps below the
    process's starting priority, never higher than it runs now; where the platform has no
    priorities, nothing changes."""
    steps = _steps_down(niceness)
    if steps:
        os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + steps)


def _lowered(niceness: int) -> list[str]:
    """The prefix that starts a command `niceness` below the process's starting priority, if
    the platform has `nice`."""
    steps = _steps_down(niceness)
    if steps <= 0 or shutil.which("nice") is None:
        return []
    return ["nice", "-n", str(steps)]


class _ServerProcess:
    """One `python -m devstack.server` process."""

    def __init__(self, port: int, conflict_rate: float, seed: int, account_capacity: bool) -> None:
        self.port = port or _free_port()
        self._command = [
            sys.executable,
            "-m",
            "devstack.server",
            "--port",
            str(self.port),
            "--conflict-rate",
            str(conflict_rate),
            "--seed",
            str(seed),
            *(["--account-capacity"] if account_capacity else []),
        ]
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def launch(self, niceness: int = 0) -> None:
        """Start the process, `niceness` steps below the caller's process's starting
        priority (`_lowered`)."""
        self._process = subprocess.Popen(  # noqa: S603 - our own module
            [*_lowered(niceness), *self._command]
        )

    def ready(self) -> bool:
        if self._process is not None and self._process.poll() is not None:
            raise RuntimeError(f"the local AWS server exited with {self._process.returncode}")
        try:
            self.stats()
        except OSError:
            return False
        return True

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(self.url + STATS_PATH, timeout=2) as response:  # noqa: S310
            stats: dict[str, Any] = json.load(response)
        return stats

    def publish_queue_metrics(self) -> None:
        with urllib.request.urlopen(self.url + QUEUE_METRICS_PATH, timeout=10) as response:  # noqa: S310
            response.read()

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(timeout=10)


class LocalAws:
    """The moto server for one embedded stack: one process, or two with `split_dynamodb`.

    Split, DynamoDB and its streams are served by a process of their own (with the injected
    transaction conflicts) and every other service by the first: two locks on two cores, for
    the fire drill's throughput. `endpoint_url` is the first; `service_endpoints` says which
    services go elsewhere (`devstack.resources.client` and the Lambdas' environment follow
    it). One process is what `umavez serve` runs: a command in another shell knows one URL.
    """

    def __init__(
        self,
        port: int = 0,
        conflict_rate: float = 0.0,
        seed: int = 7,
        account_capacity: bool = False,
        split_dynamodb: bool = False,
    ) -> None:
        self._main = _ServerProcess(
            port, 0.0 if split_dynamodb else conflict_rate, seed, account_capacity
        )
        self._dynamodb = (
            _ServerProcess(0, conflict_rate, seed, account_capacity) if split_dynamodb else None
        )
        self.port = self._main.port
        # What start() changed in the caller's process, for stop() to put back.
        self._priority_before: int | None = None
        self._installed_loopback = False

    @property
    def endpoint_url(self) -> str:
        return self._main.url

    @property
    def service_endpoints(self) -> dict[str, str]:
        """Services served elsewhere than `endpoint_url`, by their boto3 name."""
        if self._dynamodb is None:
            return {}
        return dict.fromkeys(DYNAMODB_SERVICES, self._dynamodb.url)

    @property
    def pids(self) -> dict[str, int]:
        """The running processes by what they serve: `main`, and `dynamodb` when split."""
        named = {"main": self._main, "dynamodb": self._dynamodb}
        return {name: p.pid for name, p in named.items() if p is not None and p.pid is not None}

    @property
    def _processes(self) -> list[_ServerProcess]:
        return [self._main, *([self._dynamodb] if self._dynamodb else [])]

    def start(self, timeout_seconds: float = 30) -> LocalAws:
        """Launch the processes. Split, the DynamoDB process keeps the caller's priority and
        everything else yields the CPU to it: the other server from its start, the calling
        thread from now on (with every thread it starts after this, as Linux threads inherit
        their creator's). The DynamoDB process serializes the pipeline's every write and most
        of its reads; when the other processes keep both cores busy, it waited for a core while
        holding its lock, and everything waited with it (measured: NOTES.md). Priorities are
        counted from the process's starting one: a second stack in the same process lowers
        nothing further, and its DynamoDB process runs as low as the rest (a process cannot
        raise a priority again). From now on, this process's calls to loopback skip SigV4 and
        urllib3 (`devstack/loopback_calls.py`): no local server verifies a signature, and
        the two took ~40% of the functions' process's time."""
        from devstack import loopback_calls
        from devstack.resources import route_services

        if self._dynamodb is not None:
            self._dynamodb.launch()
            self._main.launch(YIELDING_NICENESS)
            if hasattr(os, "getpriority"):
                self._priority_before = os.getpriority(os.PRIO_PROCESS, 0)
            yield_cpu(YIELDING_NICENESS)
        else:
            self._main.launch()
        deadline = time.monotonic() + timeout_seconds
        waiting = list(self._processes)
        while waiting and time.monotonic() < deadline:
            waiting = [p for p in waiting if not p.ready()]
            if waiting:
                time.sleep(0.1)
        if waiting:
            self.stop()
            raise TimeoutError("the local AWS server did not start")
        route_services(self.endpoint_url, self.service_endpoints)
        self._installed_loopback = not loopback_calls.installed()
        loopback_calls.install()
        return self

    def publish_queue_metrics(self) -> None:
        """The queues' CloudWatch metrics, now (they are served by the first process)."""
        self._main.publish_queue_metrics()

    def stats(self) -> dict[str, Any]:
        """Both processes' statistics added up (their accounting too)."""
        return merge_stats([p.stats() for p in self._processes])

    def stop(self) -> None:
        """The processes stopped, and the caller's process as it was before start(): its calls
        signed and sent by botocore again, its thread's priority back (where the platform
        lets a process raise it again: Linux asks for CAP_SYS_NICE; without it, the thread
        keeps the lower priority, as `nice` would)."""
        from devstack import loopback_calls
        from devstack.resources import route_services

        route_services(self.endpoint_url, {})
        for process in self._processes:
            process.stop()
        if self._installed_loopback:
            loopback_calls.uninstall()
            self._installed_loopback = False
        if self._priority_before is not None:
            with contextlib.suppress(PermissionError):
                os.setpriority(os.PRIO_PROCESS, 0, self._priority_before)
            self._priority_before = None


def merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The processes' statistics as one server's: counts and seconds added up per operation,
    accounting entries (each process bills its own services) put together."""
    merged: dict[str, Any] = {
        "conflicts_injected": sum(p["conflicts_injected"] for p in parts),
        "requests": dict(sum((Counter(p["requests"]) for p in parts), Counter())),
        "seconds": {},
        "calls": {},
        "aws_calls": sorted(
            {tuple(sorted(c.items())): c for p in parts for c in p.get("aws_calls", [])}.values(),
            key=lambda c: sorted(c.items()),
        ),
    }
    for part in parts:
        for operation, seconds in part["seconds"].items():
            merged["seconds"][operation] = round(merged["seconds"].get(operation, 0) + seconds, 3)
        for name, (n, seconds) in part["calls"].items():
            was = merged["calls"].get(name, [0, 0.0])
            merged["calls"][name] = [was[0] + n, round(was[1] + seconds, 3)]
        if "accounting" in part:
            merged["accounting"] = merged.get("accounting", []) + part["accounting"]
            merged["accounting_errors"] = (
                merged.get("accounting_errors", 0) + part["accounting_errors"]
            )
    return merged


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
