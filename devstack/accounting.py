"""What each request to the local server would be billed, per caller: the server side of the
cost model (`costmodel/model.py`). Off unless the server runs with `--account-capacity`.

Every request is recorded under (caller, service, operation, resource):
- the caller is the `X-Umavez-Caller` header the metered handlers add (`devstack/metering.py`:
  the function whose invocation made the call); requests without it come from the local stack
  itself (pollers standing in for Lambda's event source mappings, the drain, the drill);
- the resource is the table, queue or event bus the request names.
Billed units per service:
- DynamoDB: request units from `devstack/capacity.py`, read from the server's in-memory store
  (the items before and after each write);
- SQS: one request per 64 KB chunk of the larger of request and response; a receive that
  returned no message is counted apart (`empty_receives`: Lambda long-polls, a fixed cost);
- EventBridge PutEvents: one event per 64 KB chunk of each entry;
- SES SendEmail: one message per recipient;
- everything else: one per request.
"""

from __future__ import annotations

import io
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from devstack.capacity import Accounting, Index, Pending, Store, TableSchema, Units
from devstack.memory.operations import MemoryDynamoDB

StartResponse = Callable[..., Any]
Environ = dict[str, Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]
CALLER_HEADER = "X-Umavez-Caller"
CHUNK_BYTES = 64 * 1024
Key = tuple[str, str, str, str]  # caller, service, operation, resource

SERVICES_BY_TARGET = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "dynamodbstreams",
    "AmazonSQS": "sqs",
    "AWSEvents": "events",
    "secretsmanager": "secretsmanager",
}


def service_and_operation(environ: Environ) -> tuple[str, str]:
    target = str(environ.get("HTTP_X_AMZ_TARGET", ""))
    if target:
        prefix, _, operation = target.rpartition(".")
        return SERVICES_BY_TARGET.get(prefix, prefix.lower()), operation
    path = str(environ.get("PATH_INFO", ""))
    if path.startswith("/v2/email/outbound-emails"):
        return "sesv2", "SendEmail"
    if path.startswith("/v2/email/"):
        return "sesv2", path
    return "other", path


class MemoryStore:
    """Schemas and items straight from the server's DynamoDB: the in-memory store it serves
    (`devstack/memory`)."""

    def __init__(self, store: MemoryDynamoDB) -> None:
        self._store = store

    def schema(self, table: str) -> TableSchema:
        found = self._store.table(table)
        indexes = tuple(
            Index(
                index.name,
                tuple(k for k in (index.hash_key, index.range_key) if k),
                index.projection,
                index.included,
            )
            for index in found.indexes.values()
        )
        return TableSchema(table, found.key_names(), indexes)

    def item(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self._store.table(table)
        return found.get(found.checked_key(key))


class Accountant:
    """Serves a request through `app` and records what it would be billed."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._capacity: Accounting | None = None
        self.usage: dict[Key, Units] = defaultdict(Units)
        self.errors = 0

    def _accounting(self) -> Accounting:
        if self._capacity is None:
            self._capacity = Accounting(self._store)
        return self._capacity

    def serve(self, app: App, environ: Environ, start_response: StartResponse) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        service, operation = service_and_operation(environ)
        caller = str(environ.get("HTTP_" + CALLER_HEADER.upper().replace("-", "_"), ""))
        request = json_body(body)
        pending = self._before(service, operation, request)
        status: list[str] = []

        def capture(status_line: str, headers: Any, *args: Any) -> Any:
            status.append(status_line)
            return start_response(status_line, headers, *args)

        chunks = list(app(environ, capture))
        try:
            response_body = b"".join(chunks)
            ok = bool(status) and status[0].startswith("2")
            key = (caller, service, operation, _resource(service, request))
            self.usage[key].add(
                self._units(service, operation, request, body, response_body, ok, pending)
            )
        except Exception:  # noqa: BLE001 - accounting must never fail a request
            self.errors += 1
        return chunks

    def _before(self, service: str, operation: str, request: dict[str, Any]) -> Pending | None:
        if service != "dynamodb":
            return None
        try:
            return self._accounting().before(operation, request)
        except Exception:  # noqa: BLE001 - e.g. a table that does not exist: the request fails
            return None

    def _units(
        self,
        service: str,
        operation: str,
        request: dict[str, Any],
        body: bytes,
        response_body: bytes,
        ok: bool,
        pending: Pending | None,
    ) -> Units:
        units = Units({"requests": 1})
        response = json_body(response_body)
        if service == "dynamodb":
            if pending is not None:
                units.add(self._accounting().after(pending, ok, response))
        elif service == "sqs":
            units["billed"] += _chunks(max(len(body), len(response_body)))
            if operation == "ReceiveMessage" and not response.get("Messages"):
                units["empty_receives"] += 1
            messages = len(response.get("Messages", [])) if operation == "ReceiveMessage" else 0
            units["messages"] += messages
        elif service == "events" and operation == "PutEvents":
            entries = request.get("Entries", [])
            units["entries"] += len(entries)
            units["billed"] += sum(_chunks(len(json.dumps(e))) for e in entries)
        elif service == "sesv2" and operation == "SendEmail":
            destination = request.get("Destination", {})
            recipients = sum(
                len(destination.get(f, [])) for f in ("ToAddresses", "CcAddresses", "BccAddresses")
            )
            units["billed"] += recipients
        else:
            units["billed"] += 1
        return units

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {
                "caller": caller,
                "service": service,
                "operation": operation,
                "resource": resource,
                "units": dict(units),
            }
            for (caller, service, operation, resource), units in sorted(self.usage.items())
        ]


def _chunks(size: int) -> int:
    return max(1, math.ceil(size / CHUNK_BYTES))


def json_body(body: bytes) -> dict[str, Any]:
    """A request's or answer's JSON document; empty when it is none (a query-protocol body)."""
    if not body:
        return {}
    try:
        loaded = json.loads(body)
    except ValueError:
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _resource(service: str, request: Mapping[str, Any]) -> str:
    if service == "dynamodb":
        if "TableName" in request:
            return str(request["TableName"])
        if request.get("RequestItems"):
            return str(next(iter(request["RequestItems"])))
        for entry in request.get("TransactItems", []):
            ((_, action),) = entry.items()
            return str(action.get("TableName", ""))
        return ""
    if service == "sqs":
        return str(request.get("QueueUrl", "")).rstrip("/").rsplit("/", 1)[-1]
    if service == "events":
        entries = request.get("Entries") or [{}]
        return str(entries[0].get("EventBusName", "default"))
    return ""
