"""moto as a server on loopback, with DynamoDB made serializable like the real one.

Every DynamoDB and DynamoDB Streams request holds one lock for its whole duration (bare moto
interleaves concurrent transactions and lets duplicates through: NOTES.md). Other services
run concurrently. Optional fault: cancel a share of TransactWriteItems with
TransactionConflict, as real DynamoDB does under contention.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

from local_stack import transactions

StartResponse = Callable[..., Any]
Environ = dict[str, Any]


class SerializedDynamoDB:
    """WSGI middleware: one DynamoDB request at a time; optional injected conflicts."""

    def __init__(self, app: Callable[[Environ, StartResponse], Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()
        self.conflict_rate = 0.0
        self.conflicts_injected = 0
        self._random = random.Random(7)  # noqa: S311 - fault injection, not security

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
        if not target.startswith(("DynamoDB_", "DynamoDBStreams_")):
            return self._app(environ, start_response)
        with self._lock:
            if target.endswith(".TransactWriteItems") and self._conflict():
                return self._transaction_conflict(environ, start_response)
            return list(self._app(environ, start_response))

    def _conflict(self) -> bool:
        if self.conflict_rate and self._random.random() < self.conflict_rate:
            self.conflicts_injected += 1
            return True
        return False

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


class LocalAws:
    """A moto server on 127.0.0.1 (a free port unless given) for one embedded stack."""

    def __init__(self, port: int = 0) -> None:
        transactions.install()
        self.dynamodb_gate = SerializedDynamoDB(DomainDispatcherApplication(create_backend_app))
        self._server: BaseWSGIServer = make_server(
            "127.0.0.1", port, self.dynamodb_gate, threaded=True, request_handler=QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> LocalAws:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        transactions.uninstall()


class QuietHandler(MotoRequestHandler):
    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return
