"""Lambda event and context shapes as the AWS runtime delivers them."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:umavez-webhooks"


@dataclass
class FakeLambdaContext:
    function_name: str = "umavez-process"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:umavez-process"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    remaining_ms: Callable[[], int] = lambda: 30_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms()


def sqs_record(body: str, attributes: dict[str, str], receive_count: int = 1) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": f"handle-{uuid.uuid4()}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": "1764460800000",
            "SenderId": "AROAEXAMPLE:umavez-ingest",
            "ApproximateFirstReceiveTimestamp": "1764460800100",
        },
        "messageAttributes": {
            name: {
                "stringValue": value,
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "String",
            }
            for name, value in attributes.items()
        },
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


def api_gateway_event(
    provider: str,
    body: bytes,
    headers: dict[str, str],
    method: str = "POST",
    query: dict[str, str] | None = None,
    base64_encoded: bool = False,
) -> dict[str, Any]:
    """An API Gateway REST proxy event for POST /webhooks/{provider}."""
    return {
        "resource": "/webhooks/{provider}",
        "path": f"/webhooks/{provider}",
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {name: [value] for name, value in headers.items()},
        "queryStringParameters": query,
        "pathParameters": {"provider": provider},
        "requestContext": {
            "resourcePath": "/webhooks/{provider}",
            "httpMethod": method,
            "stage": "prod",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": "203.0.113.10", "userAgent": "Stripe/1.0"},
        },
        "body": base64.b64encode(body).decode() if base64_encoded else body.decode("utf-8"),
        "isBase64Encoded": base64_encoded,
    }
