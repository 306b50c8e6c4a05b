"""Wrappers around a boto3 client: serialize, count, crash, conflict, pause.

Real DynamoDB transactions are serializable; moto's are not under concurrency (NOTES.md), so
parallel tests go through `serialized`, which holds one lock around each request, the way the
real service orders conflicting writes.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any, TypeVar, cast

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError

from devstack.faults import SimulatedCrashError as _SimulatedCrashError

Client = TypeVar("Client")
Around = Callable[[str, Callable[[], Any]], Any]

_PASS_THROUGH = frozenset({"meta", "exceptions", "can_paginate", "get_paginator", "get_waiter"})

STORE_LOCK = threading.Lock()


# The Lambda died here: nothing after this point ran (the same error the local stack injects).
SimulatedCrashError = _SimulatedCrashError


class _Intercepted:
    def __init__(self, client: Any, around: Around) -> None:
        self._client = client
        self._around = around

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if name in _PASS_THROUGH or name.startswith("_") or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._around(name, lambda: attribute(*args, **kwargs))

        return call


def intercepted(client: Client, around: Around) -> Client:
    return cast(Client, _Intercepted(client, around))


def serialized(client: Client, lock: threading.Lock = STORE_LOCK) -> Client:
    def one_at_a_time(_operation: str, call: Callable[[], Any]) -> Any:
        with lock:
            return call()

    return intercepted(client, one_at_a_time)


class RequestCounter:
    """Counts the API requests a client sends, by operation, from botocore's own events."""

    def __init__(self, client: Any) -> None:
        self.by_operation: Counter[str] = Counter()
        client.meta.events.register("before-call.dynamodb.*", self._count)

    def _count(self, model: Any, **_: Any) -> None:
        self.by_operation[model.name] += 1

    def reset(self) -> None:
        self.by_operation.clear()


def crashing_after(client: Client, requests: int) -> Client:
    """The process dies right after its `requests`-th request returned."""
    sent = 0

    def die_after(_operation: str, call: Callable[[], Any]) -> Any:
        nonlocal sent
        result = call()
        sent += 1
        if sent >= requests:
            raise SimulatedCrashError(f"crashed after request {sent}")
        return result

    return intercepted(client, die_after)


def crashing_before(client: Client, request_number: int) -> Client:
    """The process dies just before sending its `request_number`-th request."""
    sent = 0

    def die_before(_operation: str, call: Callable[[], Any]) -> Any:
        nonlocal sent
        sent += 1
        if sent >= request_number:
            raise SimulatedCrashError(f"crashed before request {sent}")
        return call()

    return intercepted(client, die_before)


def refusing(client: Client, operation: str) -> Client:
    """Every `operation` call (a method name: `send_message`) fails unsent, as an outage of
    the service would; the other calls go through."""

    def refuse(name: str, call: Callable[[], Any]) -> Any:
        if name == operation:
            raise ClientError(
                {"Error": {"Code": "ServiceUnavailable", "Message": "injected outage"}}, name
            )
        return call()

    return intercepted(client, refuse)


def crashing_at(client: Client, operation: str) -> Client:
    """The process dies just before sending an `operation` call (`delete_item`): nothing after
    that point ran."""

    def die(name: str, call: Callable[[], Any]) -> Any:
        if name == operation:
            raise SimulatedCrashError(f"crashed before {name}")
        return call()

    return intercepted(client, die)


def conflicting_once(client: Client) -> Client:
    """The first TransactWriteItems is cancelled with TransactionConflict, as under contention."""
    conflicted = False

    def conflict(operation: str, call: Callable[[], Any]) -> Any:
        nonlocal conflicted
        if operation == "transact_write_items" and not conflicted:
            conflicted = True
            raise ClientError(
                {
                    "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                    "CancellationReasons": [
                        {"Code": "None"},
                        {"Code": "TransactionConflict", "Message": "Transaction is ongoing"},
                        {"Code": "None"},
                    ],
                },
                "TransactWriteItems",
            )
        return call()

    return intercepted(client, conflict)


class PauseAfterFirstRequest:
    """Stops the calling thread after its first request until `resume()`: a fixed interleaving."""

    def __init__(self) -> None:
        self.paused = threading.Event()
        self._resumed = threading.Event()
        self._first = True

    def wrap(self, client: Client) -> Client:
        def pause(_operation: str, call: Callable[[], Any]) -> Any:
            result = call()
            if self._first:
                self._first = False
                self.paused.set()
                if not self._resumed.wait(timeout=10):
                    raise TimeoutError("nobody resumed the paused delivery")
            return result

        return intercepted(client, pause)

    def resume(self) -> None:
        self._resumed.set()


def answering(
    client: Any,
    operation: str,
    answer: Callable[[dict[str, Any]], dict[str, Any] | None],
) -> None:
    """The client's `operation` answered by `answer(params)` (the call's own parameters)
    instead of its endpoint, where that returns a response (None lets the call through): for
    the calls moto does not implement (Lambda's account settings, SES's account, alarm
    history), shaped as AWS answers them."""
    service = client.meta.service_model.service_id.hyphenize()

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["answering_params"] = dict(params)

    def respond(
        params: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        parsed = answer(context.get("answering_params", {}))
        if parsed is None:
            return None
        return AWSResponse(params.get("url", ""), 200, {}, None), parsed  # type: ignore[arg-type]

    client.meta.events.register(f"before-parameter-build.{service}.{operation}", remember)
    client.meta.events.register(f"before-call.{service}.{operation}", respond)


def queue_depth(sqs: Any, url: str) -> tuple[int, int]:
    """A queue's messages waiting and in flight, as SQS approximates them."""
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return (
        int(counts["ApproximateNumberOfMessages"]),
        int(counts["ApproximateNumberOfMessagesNotVisible"]),
    )
