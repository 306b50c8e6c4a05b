"""What a queue holds, taken off it the way a consumer takes it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, cast

import boto3
from botocore.exceptions import ClientError


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


# What an SQS message body may contain; moto takes anything, SQS refuses the rest.
SQS_REFUSES: Final = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _refuse_as_sqs_does(params: dict[str, Any], **_: Any) -> None:
    if SQS_REFUSES.search(params.get("MessageBody", "")):
        raise ClientError(
            {
                "Error": {
                    "Code": "InvalidMessageContents",
                    "Message": "Invalid binary character in the message body",
                }
            },
            "SendMessage",
        )


@contextmanager
def refusing_what_sqs_refuses() -> Iterator[None]:
    """SendMessage from clients made inside refuses the characters SQS does (moto does not)."""
    events = boto3.DEFAULT_SESSION.events if boto3.DEFAULT_SESSION else None
    if events is None:
        boto3.setup_default_session()
        events = cast(Any, boto3.DEFAULT_SESSION).events
    events.register("provide-client-params.sqs.SendMessage", _refuse_as_sqs_does)
    try:
        yield
    finally:
        events.unregister("provide-client-params.sqs.SendMessage", _refuse_as_sqs_does)
