"""What reached the sinks, per outbox key: EventBridge events (through the local bus's rule to
a queue: counted in memory and written to a small local table, so that `umavez show` in
another process can read them) and SES messages (from moto's own data dump)."""

from __future__ import annotations

import json
import re
import threading
import urllib.request
from collections import Counter
from typing import Any

from devstack.pollers import Poller
from devstack.resources import client
from devstack.server import EMAILS_PATH

SINK_TABLE = "umavez-local-sink"
RECEIVE_LIMIT = 10  # SQS's most per receive
REFERENCE = re.compile(r"Reference: (obx_[0-9a-f]{64})")


def create_sink_table(endpoint_url: str) -> None:
    client("dynamodb", endpoint_url).create_table(
        TableName=SINK_TABLE,
        KeySchema=[{"AttributeName": "outbox_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "outbox_id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


class SinkRecorder(Poller):
    def __init__(self, endpoint_url: str, sink_queue_url: str) -> None:
        super().__init__("sink-recorder")
        self._sqs = client("sqs", endpoint_url)
        self._dynamodb = client("dynamodb", endpoint_url)
        self._queue_url = sink_queue_url
        self._lock = threading.Lock()
        self.counts: dict[str, Counter[str]] = {}
        self._dirty: set[str] = set()

    def poll_once(self) -> bool:
        """Count one receive's events. Only a full receive is polled again at once: events
        trickle in one by one, and a receive at every arrival cost the functions' process
        and the server a request for each (a batching window, as Lambda's)."""
        messages = self._sqs.receive_message(
            QueueUrl=self._queue_url, MaxNumberOfMessages=RECEIVE_LIMIT
        ).get("Messages", [])
        for message in messages:
            self._count(json.loads(message["Body"])["detail"]["idempotency_key"], "eventbridge")
        if messages:
            self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)
                ],
            )
        if not messages:
            self._flush()
        return len(messages) == RECEIVE_LIMIT

    def _count(self, key: str, channel: str) -> None:
        with self._lock:
            self.counts.setdefault(key, Counter())[channel] += 1
            self._dirty.add(key)

    def _flush(self) -> None:
        """Idle time: write what changed, 25 items a request."""
        with self._lock:
            dirty = [(k, dict(self.counts[k])) for k in self._dirty]
            self._dirty.clear()
        for start in range(0, len(dirty), 25):
            self._dynamodb.batch_write_item(
                RequestItems={
                    SINK_TABLE: [
                        {
                            "PutRequest": {
                                "Item": {
                                    "outbox_id": {"S": key},
                                    **{c: {"N": str(n)} for c, n in channels.items()},
                                }
                            }
                        }
                        for key, channels in dirty[start : start + 25]
                    ]
                }
            )

    def settled(self) -> bool:
        """Nothing queued or in flight for the recorder, and every count written."""
        with self._lock:
            if self._dirty:
                return False
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self._queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return not self.busy and sum(int(v) for v in attributes.values()) == 0


def sink_counts(endpoint_url: str) -> dict[str, dict[str, int]]:
    """Per outbox key, how many times each sink received it."""
    counts: dict[str, dict[str, int]] = {}
    dynamodb: Any = client("dynamodb", endpoint_url)
    for page in dynamodb.get_paginator("scan").paginate(TableName=SINK_TABLE):
        for item in page["Items"]:
            counts[item["outbox_id"]["S"]] = {
                name: int(value["N"]) for name, value in item.items() if name != "outbox_id"
            }
    with urllib.request.urlopen(endpoint_url + EMAILS_PATH, timeout=60) as response:  # noqa: S310
        bodies = json.load(response)["bodies"]
    for body in bodies:
        for key in REFERENCE.findall(body):
            channels = counts.setdefault(key, {})
            channels["email"] = channels.get("email", 0) + 1
    return counts
