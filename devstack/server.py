"""The local stack's AWS as a server on loopback, in its own process, made serializable like the
real services: DynamoDB and DynamoDB Streams, SQS and EventBridge answered by the project's
in-memory stores (`devstack/memory`, through `devstack/memory/wsgi.py`), every other service
(SES, Secrets Manager, CloudWatch, ...) by moto's server, as moto ships it.

Every request holds one lock for its whole duration: moto's backends take no locks of their
own, and bare moto interleaves concurrent requests (NOTES.md). Each request is short, so the
stack stays fast; running in a process of its own, the server uses the second core while the
functions use the first.
Optional fault: cancel a share of TransactWriteItems with TransactionConflict, as real
DynamoDB does under contention. `GET /umavez-local/stats` reports requests and faults.
Optional accounting (`--account-capacity`, for `umavez cost`): what each request would be
billed, per caller (`devstack/accounting.py`); off, it costs nothing on the hot path.
Always: the permissions each request naming its caller needed (`devstack/calls.py`), in the
stats' `calls`; a request without the caller header costs one lookup.

Run as `python -m devstack.server --port N [--conflict-rate R] [--seed S] [--account-capacity]`.

Its launcher, one process or two for a stack: `devstack/local_aws.py`.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import random
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from devstack import queue_metrics
from devstack.accounting import CALLER_HEADER, Accountant, service_and_operation
from devstack.calls import MAPPING_HEADER, CallRecorder
from devstack.memory.sqs import MemorySqs

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
        queues: MemorySqs | None = None,
    ) -> None:
        self._app = app
        self._queues = queues or MemorySqs()
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
                queues = queue_metrics.publish_once(self._queues, int(time.time() * 1000))
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
        """What a request holds: anything else touching the server's backends holds it too."""
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

    from devstack.accounting import MemoryStore
    from devstack.memory.wsgi import MemoryApp, dispatching

    memory = MemoryApp()
    app = SerializedRequests(
        dispatching(memory, DomainDispatcherApplication(create_backend_app)),
        conflict_rate,
        seed,
        Accountant(MemoryStore(memory.aws.dynamodb)) if account_capacity else None,
        memory.aws.sqs,
    )
    server = make_server(
        "127.0.0.1", port, app, threaded=True, request_handler=keep_alive_handler()
    )
    queue_metrics.start_publishing(memory.aws.sqs, app.lock, time.time, threading.Event())
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
