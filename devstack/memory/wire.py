"""The store's requests and answers as DynamoDB's JSON 1.0 protocol carries them: a body in,
a status and a body out, errors as `{"__type": "com.amazonaws.dynamodb.v20120810#Code",
"message": ...}`. One rendering for both ways to the store: botocore's hook in a process
(`hook.py`) and the WSGI app on loopback (`wsgi.py`).
"""

from __future__ import annotations

import json
from typing import Any

from devstack.memory.operations import MemoryDynamoDB
from devstack.memory.tables import DynamoError

ERROR_PREFIX = "com.amazonaws.dynamodb.v20120810#"
CONTENT_TYPE = "application/x-amz-json-1.0"
# The protocol's X-Amz-Target prefixes, by the service boto3 names.
TARGETS = {"DynamoDB_20120810": "dynamodb", "DynamoDBStreams_20120810": "dynamodbstreams"}
_SERVER_ERRORS = frozenset({"InternalServerError"})


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
