"""Lambda event and context shapes as the AWS runtime delivers them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:umavez-webhooks"


@dataclass
class FakeLambdaContext:
    function_name: str = "umavez-process"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:umavez-process"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_remaining_time_in_millis(self) -> int:
        return 30_000


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
