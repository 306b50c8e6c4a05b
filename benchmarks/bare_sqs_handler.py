"""The floor ingest is compared with: a handler that only sends the body to SQS."""

from __future__ import annotations

import os
from typing import Any

import boto3

sqs = boto3.client("sqs")


def lambda_handler(event: dict[str, Any], _context: object) -> dict[str, Any]:
    sqs.send_message(QueueUrl=os.environ["WEBHOOK_QUEUE_URL"], MessageBody=event["body"])
    return {"statusCode": 200, "body": ""}
