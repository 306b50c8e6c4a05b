"""moto as a server on loopback, in its own process, made serializable like the real services.

Every request holds one lock for its whole duration: moto's backends take no locks of their
own, and bare moto interleaves concurrent transactions and lets duplicates through (NOTES.md).
Each request is short, so the stack stays fast; running in a process of its own, moto uses the
second core while the functions use the first.
Optional fault: cancel a share of TransactWriteItems with TransactionConflict, as real
DynamoDB does under contention. `GET /umavez-local/stats` reports requests and faults.
Optional accounting (`--account-capacity`, for `umavez cost`): what each request would be
billed, per caller (`devstack/accounting.py`); off, it costs nothing on the hot path.
Always: the permissions each request naming its caller needed (`devstack/calls.py`), in the
stats' `calls`; a request without the caller header costs one lookup.

Run as `python -m devstack.server --port N [--conflict-rate R] [--seed S] [--account-capacity]`.

Long on purpose: the server process, its lock and its launcher (split or not, priorities,
startup and shutdown) are one mechanism.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from devstack import queue_metrics
from devstack.accounting import CALLER_HEADER, Accountant, service_and_operation
from devstack.calls import MAPPING_HEADER, CallRecorder

StartResponse = Callable[..., Any]
Environ = dict[str, Any]
STATS_PATH = "/umavez-local/stats"
# The bodies of the e-mails SES took, every account and region: what `/moto-api/data.json`
# would say, without serializing every table and queue of the server with them.
EMAILS_PATH = "/umavez-local/emails"
# Publishes the queues' CloudWatch metrics now (the stack, once its queues exist).
QUEUE_METRICS_PATH = "/umavez-local/queue-metrics"
CALLER_ENVIRON = "HTTP_" + CALLER_HEADER.upper().replace("-", "_")
MAPPING_ENVIRON = "HTTP_" + MAPPING_HEADER.upper().replace("-", "_")


class SerializedRequests:
    """WSGI middleware: one request at a time; optional injected transaction conflicts and
    accounting of what each request would be billed."""

    def __init__(
        self,
        app: Callable[[Environ, StartResponse], Iterable[bytes]],
        conflict_rate: float,
        seed: int,
        accountant: Accountant | None = None,
    ) -> None:
        self._app = app
        self._accountant = accountant
        self.recorder = CallRecorder()
        self._lock = threading.Lock()
        self._conflict_rate = conflict_rate
        self._random = random.Random(seed)  # noqa: S311 - fault injection, not security
        self.conflicts_injected = 0
        self.requests: Counter[str] = Counter()
        # Time spent inside the lock per operation: where a local run's time goes.
        self.seconds: dict[str, float] = defaultdict(float)
        # The same per service and operation ("dynamodb Query"): [requests, seconds].
        self.calls: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == STATS_PATH:
            return self._stats(start_response)
        if environ.get("PATH_INFO") == EMAILS_PATH:
            with self._lock:
                return _json_response(start_response, {"bodies": _email_bodies()})
        if environ.get("PATH_INFO") == QUEUE_METRICS_PATH:
            with self._lock:
                queues = queue_metrics.publish_once(int(time.time() * 1000))
                return _json_response(start_response, {"queues": queues})
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        operation = target.rsplit(".", 1)[-1] or str(environ.get("PATH_INFO"))
        name = f"{_service(target, environ)} {operation}"
        with self._lock:
            started = time.perf_counter()
            call = self.calls[name]
            self.requests[operation] += 1
            call[0] += 1
            try:
                app = self._app
                if target.endswith(".TransactWriteItems") and self._conflict():
                    app = self._transaction_conflict
                if self._accountant is not None:
                    app = functools.partial(self._accountant.serve, app)
                caller = environ.get(CALLER_ENVIRON) or environ.get(MAPPING_ENVIRON)
                if caller:
                    service, operation = service_and_operation(environ)
                    return self.recorder.serve(
                        app, environ, start_response, str(caller), service, operation
                    )
                return list(app(environ, start_response))
            finally:
                elapsed = time.perf_counter() - started
                self.seconds[operation] += elapsed
                call[1] += elapsed

    @property
    def lock(self) -> threading.Lock:
        """What a request holds: anything else touching moto's backends holds it too."""
        return self._lock

    def _conflict(self) -> bool:
        if self._conflict_rate and self._random.random() < self._conflict_rate:
            self.conflicts_injected += 1
            return True
        return False

    def _stats(self, start_response: StartResponse) -> list[bytes]:
        stats: dict[str, Any] = {
            "conflicts_injected": self.conflicts_injected,
            "requests": dict(self.requests),
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
            "calls": {k: [int(n), round(t, 3)] for k, (n, t) in list(self.calls.items())},
        }
        with self._lock:
            stats["aws_calls"] = self.recorder.snapshot()
        if self._accountant is not None:
            with self._lock:
                stats["accounting"] = self._accountant.snapshot()
                stats["accounting_errors"] = self._accountant.errors
        return _json_response(start_response, stats)

    @staticmethod
    def _transaction_conflict(environ: Environ, start_response: StartResponse) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        items = json.loads(environ["wsgi.input"].read(length) or b"{}").get("TransactItems", [])
        body = json.dumps(
            {
                "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
                "message": "Transaction cancelled, see the cancellation reasons",
                "CancellationReasons": [
                    {
                        "Code": "TransactionConflict",
                        "Message": "Transaction is ongoing for the item",
                    }
                ]
                + [{"Code": "None"}] * (len(items) - 1),
            }
        ).encode()
        start_response(
            "400 Bad Request",
            [("Content-Type", "application/x-amz-json-1.0"), ("Content-Length", str(len(body)))],
        )
        return [body]


def _json_response(start_response: StartResponse, document: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(document).encode()]


def _email_bodies() -> list[str]:
    from moto.ses.models import ses_backends

    return [
        str(message.body)
        for account in ses_backends.values()
        for backend in account.values()
        for message in backend.sent_messages
        if hasattr(message, "body")
    ]


def _service(target: str, environ: Environ) -> str:
    """`dynamodb`, `dynamodbstreams`, `sqs`, `events`, `secretsmanager`, ...: from the JSON
    protocols' target (`DynamoDB_20120810.Query`), else from the signing scope of the request."""
    if target:
        prefix = target.split(".", 1)[0].split("_", 1)[0].lower()
        return {"amazonsqs": "sqs", "awsevents": "events"}.get(prefix, prefix)
    scope = str(environ.get("HTTP_AUTHORIZATION", "")).split("Credential=", 1)[-1].split("/")
    return scope[3] if len(scope) > 3 else "other"


def serve(port: int, conflict_rate: float, seed: int, account_capacity: bool = False) -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    from devstack.speedups import moto_patches

    moto_patches.install()
    app = SerializedRequests(
        DomainDispatcherApplication(create_backend_app),
        conflict_rate,
        seed,
        Accountant() if account_capacity else None,
    )
    server = make_server(
        "127.0.0.1", port, app, threaded=True, request_handler=keep_alive_handler()
    )
    queue_metrics.start_publishing(app.lock, time.time, threading.Event())
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()
    server.serve_forever()


def _exit_with_parent(parent: int) -> None:
    """A stack killed without its cleanup (`kill` of the drill) leaves no server behind: once
    its parent is gone (the process is re-parented), the server exits."""
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(0)


def keep_alive_handler() -> type[Any]:
    """moto's request handler, keeping connections open.

    Werkzeug's development server answers every request with `Connection: close`: each AWS
    call then opened a TCP connection (and the server a thread for it), a third of the
    functions' own time in a drill. AWS SDKs send a `Content-Length` with every request, so
    the body is read whole before the app runs and the answer carries its length: the next
    request on the connection starts exactly where this one ended. A request whose body has no
    length (chunked) is answered and its connection closed, as Werkzeug does.
    """
    from moto.moto_server.werkzeug_app import MotoRequestHandler

    class KeepAliveHandler(MotoRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body are two writes: with Nagle's algorithm on a kept connection, the
        # second waits for the client's delayed ACK (40 ms a request).
        disable_nagle_algorithm = True

        def run_wsgi(self) -> None:
            length = self.headers.get("Content-Length")
            if length is None and self.headers.get("Transfer-Encoding"):
                self.close_connection = True
                super().run_wsgi()
                return
            if self.headers.get("Expect", "").lower().strip() == "100-continue":
                self.wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            environ = self.make_environ()
            environ["wsgi.input"] = io.BytesIO(self.rfile.read(int(length or 0)))
            started: list[Any] = []
            written: list[bytes] = []

            def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> Any:
                started[:] = [status, headers]
                return written.append

            try:
                returned = list(self.server.app(environ, start_response))
                body = b"".join(written + returned)
                status, headers = started
            except Exception:  # noqa: BLE001 - the client gets a 500 and the connection closes
                traceback.print_exc()
                body, status, headers = b"internal error", "500 INTERNAL SERVER ERROR", []
                self.close_connection = True
            code, _, reason = status.partition(" ")
            self.send_response(int(code), reason)
            for name, value in headers:
                if name.lower() not in ("content-length", "connection", "transfer-encoding"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return

    return KeepAliveHandler


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
        urllib3 (`devstack/speedups/loopback_calls.py`): no local server verifies a signature, and
        the two took ~40% of the functions' process's time."""
        from devstack.resources import route_services
        from devstack.speedups import loopback_calls

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
        from devstack.resources import route_services
        from devstack.speedups import loopback_calls

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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="moto, serialized, for the umavez local stack")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--conflict-rate", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--account-capacity",
        action="store_true",
        help="record what each request would be billed (GET /umavez-local/stats)",
    )
    arguments = parser.parse_args()
    serve(arguments.port, arguments.conflict_rate, arguments.seed, arguments.account_capacity)
