"""The in-memory services served over HTTP: a WSGI app speaking their JSON protocols
(`X-Amz-Target: DynamoDB_20120810.<Operation>`, `DynamoDBStreams_20120810.<...>`,
`AmazonSQS.<...>`, `AWSEvents.<...>`), what the local server (`devstack/server.py`) answers
those services with.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from devstack.memory import wire
from devstack.memory.operations import MemoryDynamoDB
from devstack.memory.wire import MemoryAws

StartResponse = Callable[..., Any]
Environ = dict[str, Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]
_STATUS = {200: "200 OK", 400: "400 Bad Request", 500: "500 Internal Server Error"}


def served_service(environ: Environ) -> str | None:
    """The service (as boto3 names it) when the request is one the app answers, else None."""
    prefix = str(environ.get("HTTP_X_AMZ_TARGET", "")).partition(".")[0]
    return wire.TARGETS.get(prefix)


class MemoryApp:
    """Answers the requests of the in-memory services from one set of stores."""

    def __init__(self, aws: MemoryAws | None = None) -> None:
        self.aws = aws or MemoryAws()

    @property
    def store(self) -> MemoryDynamoDB:
        """The DynamoDB store."""
        return self.aws.dynamodb

    def __call__(self, environ: Environ, start_response: StartResponse) -> list[bytes]:
        service = served_service(environ)
        operation = str(environ.get("HTTP_X_AMZ_TARGET", "")).rpartition(".")[2]
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        headers: list[tuple[str, str]] = []
        if service is None:
            status, answer = 400, b'{"__type": "UnknownOperationException"}'
        else:
            # Queue URLs name the server as its clients reach it.
            self.aws.sqs.base_url = f"http://{environ.get('HTTP_HOST', 'localhost')}"
            status, answer, headers = wire.served(self.aws, service, operation, body)
        start_response(
            _STATUS[status],
            [*headers, ("Content-Length", str(len(answer))), ("x-amzn-RequestId", "memory")],
        )
        return [answer]


def dispatching(memory: App, other: App) -> App:
    """One app: the in-memory services' requests to `memory`, every other request to `other`."""

    def app(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        chosen = memory if served_service(environ) else other
        return chosen(environ, start_response)

    return app
