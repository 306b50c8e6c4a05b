"""DynamoDB and its streams answered from memory for every boto3 client of this process,
through botocore's own request hook: the client validates, serializes and parses as against
AWS, only the request never leaves the process. Other services go on to whatever answers
them: moto's in-process mock in the tests, started with MOTO_PASSES_DYNAMODB so that it leaves
DynamoDB to the store (botocore asks every before-send hook, and takes the first answer).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from io import BytesIO
from typing import Any

import boto3
from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.handlers import BUILTIN_HANDLERS
from moto.core.config import DefaultConfig

from devstack.memory import wire
from devstack.memory.operations import MemoryDynamoDB

# botocore's names of the services in its events: the store answers both.
_SERVICES = {"dynamodb": "dynamodb", "dynamodb-streams": "dynamodbstreams"}
_ANSWERED = "_answered_in_memory"
# What moto, started beside the store, is told: DynamoDB is not its to answer (moto's own
# passthrough setting; every other service it mocks as usual).
# (moto replaces its "core" settings whole: the others are its defaults, but for boto3's
# default session, kept: a new one would load each service's model again.)
MOTO_PASSES_DYNAMODB: DefaultConfig = {
    "core": {
        "mock_credentials": True,
        "passthrough": {"urls": [], "services": ["dynamodb"]},
        "reset_boto3_session": False,
        "service_whitelist": None,
    }
}


class _Body(BytesIO):
    def stream(self, **_: Any) -> Iterator[bytes]:
        while chunk := self.read(65536):
            yield chunk


class _Answerer:
    """The before-send hook: answers DynamoDB's and its streams' requests while a store is
    active."""

    def __init__(self) -> None:
        self.store: MemoryDynamoDB | None = None

    def __call__(
        self, event_name: str, request: AWSPreparedRequest, **_: Any
    ) -> AWSResponse | None:
        parts = event_name.split(".")
        if self.store is None or len(parts) < 3 or parts[1] not in _SERVICES:
            return None
        # A client may carry the hook twice (from its session's built-in handlers and from
        # the default session's registration): each request is answered once.
        if getattr(request, _ANSWERED, False):
            return None
        setattr(request, _ANSWERED, True)
        body: Any = request.body or b"{}"
        body = body if isinstance(body, bytes | bytearray | str) else body.read()
        status, answer = wire.answer(self.store, _SERVICES[parts[1]], parts[2], body)
        headers = {"Content-Type": wire.CONTENT_TYPE, "x-amzn-RequestId": "memory"}
        raw = _Body(answer)
        return AWSResponse(request.url, status, headers, raw)  # type: ignore[arg-type]


_ANSWERER = _Answerer()
_HOOK_ID = "umavez-memory-dynamodb"
# Before any other before-send hook (moto's among them), on every session made after this
# import; it answers only while a store is active.
BUILTIN_HANDLERS.insert(0, ("before-send", _ANSWERER))


def _hooked_default_session() -> None:
    """boto3's default session may have been made before this import (its handlers are
    copied into each client it makes): the hook is registered on it too, first."""
    events = boto3._get_default_session()._session.get_component("event_emitter")
    for service in _SERVICES:
        events.register_first(
            f"before-send.{service}", _ANSWERER, unique_id=f"{_HOOK_ID}-{service}"
        )


@contextmanager
def memory_dynamodb(store: MemoryDynamoDB | None = None) -> Iterator[MemoryDynamoDB]:
    """DynamoDB and its streams in memory for the clients made inside this block (and until it
    ends)."""
    _hooked_default_session()
    previous = _ANSWERER.store
    _ANSWERER.store = store or MemoryDynamoDB()
    try:
        yield _ANSWERER.store
    finally:
        _ANSWERER.store = previous
