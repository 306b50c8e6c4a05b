"""The store served over HTTP: a WSGI app speaking DynamoDB's and DynamoDB Streams' JSON 1.0
protocol (`X-Amz-Target: DynamoDB_20120810.<Operation>` or `DynamoDBStreams_20120810.<...>`),
what the local server (`devstack/server.py`) answers those two services with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from devstack.memory import wire
from devstack.memory.operations import MemoryDynamoDB

StartResponse = Callable[..., Any]
Environ = dict[str, Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]
_STATUS = {200: "200 OK", 400: "400 Bad Request", 500: "500 Internal Server Error"}


def served_service(environ: Environ) -> str | None:
    """`dynamodb` or `dynamodbstreams` when the request is one of theirs, else None."""
    prefix = str(environ.get("HTTP_X_AMZ_TARGET", "")).partition(".")[0]
    return wire.TARGETS.get(prefix)


class MemoryApp:
    """Answers DynamoDB's and its streams' requests from one store."""

    def __init__(self, store: MemoryDynamoDB | None = None) -> None:
        self.store = store or MemoryDynamoDB()

    def __call__(self, environ: Environ, start_response: StartResponse) -> list[bytes]:
        service = served_service(environ)
        operation = str(environ.get("HTTP_X_AMZ_TARGET", "")).rpartition(".")[2]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        if service is None:
            status, answer = (
                400,
                (
                    b'{"__type": "com.amazonaws.dynamodb.v20120810#UnknownOperationException", '
                    b'"message": "not a DynamoDB request"}'
                ),
            )
        else:
            status, answer = wire.answer(self.store, service, operation, body)
        start_response(
            _STATUS[status],
            [
                ("Content-Type", wire.CONTENT_TYPE),
                ("Content-Length", str(len(answer))),
                ("x-amzn-RequestId", "memory"),
            ],
        )
        return [answer]


def dispatching(memory: App, other: App) -> App:
    """One app: DynamoDB and its streams to `memory`, every other request to `other`."""

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        chosen = memory if served_service(environ) else other
        return chosen(environ, start_response)

    return app
