"""The in-memory services' requests and answers as their JSON protocols carry them: a body in,
a status, a body and headers out, errors as the protocol renders them (DynamoDB's
`{"__type": "com.amazonaws.dynamodb.v20120810#Code", "message": ...}`, SQS's with the query
protocol's code in `x-amzn-query-error`, EventBridge's bare code). One rendering for both ways
to the stores: botocore's hook in a process (`hook.py`, DynamoDB) and the WSGI app on loopback
(`wsgi.py`, every service here).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from devstack.memory import sqs_operations
from devstack.memory.events import MemoryEvents
from devstack.memory.operations import MemoryDynamoDB
from devstack.memory.sqs import MemorySqs, SqsError
from devstack.memory.tables import DynamoError

ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
CONTENT_TYPE = "application/x-amz-json-1.0"
# The protocols' X-Amz-Target prefixes, by the service boto3 names.
TARGETS = {
    "DynamoDB_20120810": "dynamodb",
    "DynamoDBStreams_20120810": "dynamodbstreams",
    "AmazonSQS": "sqs",
    "AWSEvents": "events",
}
_SERVER_ERRORS = frozenset({"InternalServerError"})
Answered = tuple[int, bytes, list[tuple[str, str]]]


def answer(store: MemoryDynamoDB, service: str, operation: str, body: Any) -> tuple[int, bytes]:
    """The HTTP status and body DynamoDB (`service` "dynamodb") or DynamoDB Streams
    ("dynamodbstreams") would answer `body`, a request's JSON, with."""
    request = json.loads(body or b"{}")
    try:
        if service == "dynamodbstreams":
            status, answered = 200, store.handle_streams(operation, request)
        else:
            status, answered = 200, store.handle(operation, request)
    except DynamoError as error:
        status = 500 if error.code in _SERVER_ERRORS else 400
        answered = {"__type": ERROR_PREFIX + error.code, "message": error.message, **error.fields}
    return status, json.dumps(answered).encode()


@dataclass
class MemoryAws:
    """The services the local server answers itself: DynamoDB and its streams, SQS,
    EventBridge (whose targets are the SQS queues)."""

    dynamodb: MemoryDynamoDB = field(default_factory=MemoryDynamoDB)
    sqs: MemorySqs = field(default_factory=MemorySqs)
    events: MemoryEvents = field(init=False)

    def __post_init__(self) -> None:
        self.events = MemoryEvents(self.sqs)


def served(aws: MemoryAws, service: str, operation: str, body: Any) -> Answered:
    """Status, body and headers of the answer to one request of a service `TARGETS` names."""
    if service in ("dynamodb", "dynamodbstreams"):
        status, answered = answer(aws.dynamodb, service, operation, body)
        return status, answered, [("Content-Type", CONTENT_TYPE)]
    request = json.loads(body or b"{}")
    headers = [("Content-Type", CONTENT_TYPE if service == "sqs" else "application/x-amz-json-1.1")]
    try:
        if service == "sqs":
            result = sqs_operations.handle(aws.sqs, operation, request)
        else:
            result = aws.events.handle(operation, request)
    except SqsError as error:
        code = f"com.amazonaws.sqs#{error.code}" if service == "sqs" else error.code
        if service == "sqs":
            headers.append(("x-amzn-query-error", f"{error.query_code};Sender"))
        return 400, json.dumps({"__type": code, "message": error.message}).encode(), headers
    return 200, json.dumps(result).encode(), headers
