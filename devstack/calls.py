"""Which IAM permissions each function's AWS calls need, recorded by the local server while the
stack runs: the evidence `tests/infra/test_permissions.py` holds against the synthesized roles.

Every request that carries the `X-Umavez-Caller` header (`devstack/metering.py`: a function's
invocation) or `X-Umavez-Mapping` (a poller playing that function's event source mapping) is
recorded as one
`AwsCall` per permission it needs: the function, the API's service and operation, the IAM
action, and the resource the request addresses, named locally:

    table/<name>, table/<name>/index/<index>, table/<name>/stream, queue/<name>,
    event-bus/<name>, event-source/<name>, secret/<name>, identity/<address or domain>,
    configuration-set/<name>, *

`devstack/resources.py` says which resource of the deployed stack each local one plays.
An operation authorizes as the IAM action of its own name unless `permissions_needed` says
otherwise (the services' references):
- DynamoDB transactions: each item as its own action on its own table (`Put` as PutItem,
  `Update` as UpdateItem, `Delete` as DeleteItem, `ConditionCheck` as ConditionCheckItem; a
  `TransactGetItems` item as GetItem); a batch as its own action on every table it names; a
  Query or Scan of an index on the index.
- DynamoDB Streams: `dynamodb:` actions on the stream; ListStreams on `*`.
- SQS: a batch as its single action (SendMessageBatch is sqs:SendMessage, DeleteMessageBatch
  sqs:DeleteMessage, ChangeMessageVisibilityBatch sqs:ChangeMessageVisibility).
- SES v2 SendEmail: `ses:SendEmail` on the identity it sends as and on its configuration set.
- EventBridge PutEvents on each entry's bus; Secrets Manager on the secret; CloudWatch
  PutMetricData on `*`.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from devstack.accounting import json_body

# A poller's requests, made for Lambda's event source mapping of this function with its role.
# Not the caller header: the cost model bills a mapping's requests apart from the function's.
MAPPING_HEADER: Final = "X-Umavez-Mapping"
StartResponse = Callable[..., Any]
Environ = dict[str, Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]

IAM_PREFIX: Final = {"dynamodbstreams": "dynamodb", "sesv2": "ses", "monitoring": "cloudwatch"}
# An operation that authorizes as another action than its own name.
ACTION_OF: Final = {
    ("sqs", "SendMessageBatch"): "SendMessage",
    ("sqs", "DeleteMessageBatch"): "DeleteMessage",
    ("sqs", "ChangeMessageVisibilityBatch"): "ChangeMessageVisibility",
}
TRANSACT_ITEM_ACTIONS: Final = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
# Resource-less actions: IAM takes only `*` for them.
ANY_RESOURCE: Final = frozenset({"dynamodb:ListStreams", "cloudwatch:PutMetricData"})


@dataclass(frozen=True, order=True)
class AwsCall:
    """One permission one function's call needed."""

    function: str
    service: str  # the API, as boto3 names it: dynamodb, dynamodbstreams, sqs, sesv2, ...
    operation: str  # the API operation: TransactWriteItems
    action: str  # the IAM action it is authorized as: dynamodb:PutItem
    resource: str  # the local resource it addresses: table/umavez-ledger

    def as_json(self) -> dict[str, str]:
        return asdict(self)


def permissions_needed(
    service: str, operation: str, request: Mapping[str, Any], streams: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(IAM action, local resource) for each permission one request needs. `streams` names
    the stream of each shard iterator the server handed out (GetRecords names only that)."""
    prefix = IAM_PREFIX.get(service, service)

    def action(name: str) -> str:
        return f"{prefix}:{ACTION_OF.get((service, name), name)}"

    if service == "dynamodb":
        return _dynamodb(operation, request, action)
    if service == "dynamodbstreams":
        arn = str(request.get("StreamArn") or streams.get(str(request.get("ShardIterator")), ""))
        resource = "*" if operation == "ListStreams" else _stream(arn)
        return [(action(operation), resource)]
    if service == "sqs":
        url = str(request.get("QueueUrl") or request.get("QueueName", ""))
        return [(action(operation), "queue/" + url.rstrip("/").rsplit("/", 1)[-1])]
    if service == "events" and operation == "DescribeEventSource":
        return [(action(operation), f"event-source/{request.get('Name', '')}")]
    if service == "events":
        buses = {str(e.get("EventBusName") or "default") for e in request.get("Entries", [])}
        return [(action(operation), f"event-bus/{_last(bus)}") for bus in sorted(buses)]
    if service == "secretsmanager":
        return [(action(operation), f"secret/{request.get('SecretId', '')}")]
    if service == "sesv2" and operation == "SendEmail":
        sender = str(request.get("FromEmailAddress", "")).rsplit("<", 1)[-1].rstrip(">")
        needed = [(action(operation), f"identity/{sender}")]
        if configuration_set := request.get("ConfigurationSetName"):
            needed.append((action(operation), f"configuration-set/{configuration_set}"))
        return needed
    if action(operation) in ANY_RESOURCE:
        return [(action(operation), "*")]
    return [(action(operation), f"unknown/{service}")]


def _dynamodb(
    operation: str, request: Mapping[str, Any], action: Callable[[str], str]
) -> list[tuple[str, str]]:
    if operation in ("TransactWriteItems", "TransactGetItems"):
        needed = set()
        for entry in request.get("TransactItems", []):
            for kind, item in entry.items():
                name = TRANSACT_ITEM_ACTIONS.get(kind, kind)
                needed.add((action(name), f"table/{_last(item.get('TableName', ''))}"))
        return sorted(needed)
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(action(operation), f"table/{_last(t)}") for t in sorted(request["RequestItems"])]
    table = f"table/{_last(str(request.get('TableName', '')))}"
    if request.get("IndexName"):
        table += f"/index/{request['IndexName']}"
    return [(action(operation), table)]


def _last(name: str) -> str:
    """A table or bus named by its ARN or by its name: the name."""
    return name.rsplit("/", 1)[-1] if name.startswith("arn:") else name


def _stream(arn: str) -> str:
    """arn:aws:dynamodb:<region>:<account>:table/<table>/stream/<label> -> table/<table>/stream"""
    table = arn.split(":table/", 1)[-1].split("/stream/", 1)[0]
    return f"table/{table}/stream"


class CallRecorder:
    """Serves a request through an app and records the permissions it needed, for requests
    that name their caller. Distinct calls only: a drill's thousands of requests are a few
    dozen calls."""

    def __init__(self) -> None:
        self.calls: set[AwsCall] = set()
        # Shard iterator -> its stream, for the GetRecords that use them (each one once: a
        # GetRecords hands out the next).
        self._streams: dict[str, str] = {}
        self.errors = 0

    def serve(
        self,
        app: App,
        environ: Environ,
        start_response: StartResponse,
        caller: str,
        service: str,
        operation: str,
    ) -> list[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        environ["wsgi.input"] = io.BytesIO(body)
        chunks = list(app(environ, start_response))
        try:
            self._record(caller, service, operation, json_body(body), chunks)
        except Exception:  # noqa: BLE001 - recording must never fail a request
            self.errors += 1
        return chunks

    def _record(
        self,
        caller: str,
        service: str,
        operation: str,
        request: dict[str, Any],
        chunks: list[bytes],
    ) -> None:
        for action, resource in permissions_needed(service, operation, request, self._streams):
            self.calls.add(AwsCall(caller, service, operation, action, resource))
        if service == "dynamodbstreams" and operation in ("GetShardIterator", "GetRecords"):
            used = str(request.get("ShardIterator", ""))
            stream = str(request.get("StreamArn") or self._streams.pop(used, ""))
            answer = json_body(b"".join(chunks))
            handed_out = answer.get("ShardIterator") or answer.get("NextShardIterator")
            if handed_out and stream:
                self._streams[str(handed_out)] = stream

    def snapshot(self) -> list[dict[str, str]]:
        return [call.as_json() for call in sorted(self.calls)]
