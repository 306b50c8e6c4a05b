"""What a queue holds, taken off it the way a consumer takes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def taken(sqs: Any, url: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Every message on the queue, received and deleted: its body and its attributes."""
    while messages := sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    ).get("Messages", []):
        for message in messages:
            attributes = {
                name: value["StringValue"]
                for name, value in message.get("MessageAttributes", {}).items()
            }
            yield message["Body"], attributes
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
