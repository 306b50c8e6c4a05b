"""SQS -> process, as Lambda's event source mapping runs it on the local server (the mapping's
one definition, `infra/mappings.py`; see `devstack/pollers.py`): batches (gathered for up to the
mapping's batching window), partial batch responses (only succeeded records are deleted), the
queue's visibility timeout before a failed record returns, and its redrive policy to the DLQ.

A batch stays invisible while its invocation runs: Lambda's timeout is a sixth of the
visibility timeout, so AWS never redelivers a message its function still holds. Locally the
timeout is seconds and a busy server can make a batch take longer: the poller extends the
batch's visibility while the handler runs, or a slow batch would be received again, up to the
DLQ, without ever having failed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError

from devstack.lambdas import LambdaContext
from devstack.metering import on_behalf_of
from devstack.pollers import Handler, Poller
from devstack.resources import client
from functions.process.eventbridge import stripe_event_of
from functions.shared.errors import MalformedEventError
from infra.mappings import QueueMapping

# While a batch fills within its window, the queue is read again this often.
BATCHING_POLL_SECONDS = 0.1
# SQS hands out at most this many messages a receive.
SQS_RECEIVE_MOST = 10


class SqsToLambda(Poller):
    def __init__(
        self,
        name: str,
        endpoint_url: str,
        queue_url: str,
        handler: Handler,
        mapping: QueueMapping,
        crash_before_delete: Callable[[], bool] = lambda: False,
        new_event: Callable[[], threading.Event] = threading.Event,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], object] | None = None,
    ) -> None:
        """`new_event` makes the event the visibility keeper waits on between extensions (a
        test passes one whose waits end when it says time has passed); `clock` times the
        batching window and `pause` waits between reads while a batch fills (a test's let its
        time pass)."""
        super().__init__(name)
        self.mapping = mapping
        self._new_event = new_event
        self._clock = clock
        self._pause = pause or self.stopping.wait
        self._sqs = on_behalf_of(mapping.function, client("sqs", endpoint_url))
        self._queue_url = queue_url
        self._queue_arn = self._sqs.get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        self._handler = handler
        self._crash_before_delete = crash_before_delete
        self.event_ids: Counter[str] = Counter()
        self._visibility = int(
            self._sqs.get_queue_attributes(
                QueueUrl=queue_url, AttributeNames=["VisibilityTimeout"]
            )["Attributes"]["VisibilityTimeout"]
        )

    def _receive(self, most: int) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self._sqs.receive_message(
            QueueUrl=self._queue_url,
            MaxNumberOfMessages=min(most, SQS_RECEIVE_MOST),
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        return messages

    def _batch(self) -> list[dict[str, Any]]:
        """Lambda's batch: up to the batch size, read until it is full or the batching window
        since its first message has passed."""
        size = self.mapping.batch_size
        messages = self._receive(size)
        if not messages:
            return []
        closes = self._clock() + self.mapping.max_batching_window_seconds
        while len(messages) < size and not self.stopping.is_set():
            more = self._receive(size - len(messages))
            if more:
                messages += more
                continue
            left = closes - self._clock()
            if left <= 0:
                break
            self._pause(min(left, BATCHING_POLL_SECONDS))
        return messages

    def poll_once(self) -> bool:
        messages = self._batch()
        if not messages:
            return False
        self.busy = True
        try:
            records = [self._record(m) for m in messages]
            for message in messages:
                self.event_ids[event_id_of(message)] += 1
            with self._held(messages) as extended:
                response = self._handler({"Records": records}, LambdaContext("umavez-process"))
            failed = (
                {f["itemIdentifier"] for f in (response or {}).get("batchItemFailures", [])}
                if self.mapping.report_batch_item_failures
                else set()
            )
            self.stats["records"] += len(records)
            self.stats["failed"] += len(failed)
            if self._crash_before_delete():
                self.stats["crashed_before_delete"] += 1
                if extended[0]:  # back after the queue's own timeout, as if never extended
                    self._set_visibility(messages, self._visibility)
                return True  # the effects committed; the messages come back after the timeout
            if extended[0] and failed:
                self._set_visibility(
                    [m for m in messages if m["MessageId"] in failed], self._visibility
                )
            done = [
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                for i, m in enumerate(messages)
                if m["MessageId"] not in failed
            ]
            if done:
                self._sqs.delete_message_batch(QueueUrl=self._queue_url, Entries=done)
        finally:
            self.busy = False
        return True

    @contextmanager
    def _held(self, messages: list[dict[str, Any]]) -> Iterator[list[bool]]:
        """While the handler runs, its messages stay invisible: every half visibility timeout
        they are hidden for four more. Yields a flag: set once it extended anything."""
        done, extended = self._new_event(), [False]

        def extend() -> None:
            while not done.wait(self._visibility / 2):
                extended[0] = self._set_visibility(messages, self._visibility * 4) or extended[0]
                self.stats["visibility_extended"] += 1

        keeper = threading.Thread(target=extend, name=f"{self.name}-visibility", daemon=True)
        keeper.start()
        try:
            yield extended
        finally:
            done.set()
            keeper.join()

    def _set_visibility(self, messages: list[dict[str, Any]], seconds: int) -> bool:
        entries = [
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": seconds}
            for i, m in enumerate(messages)
        ]
        try:
            self._sqs.change_message_visibility_batch(QueueUrl=self._queue_url, Entries=entries)
        except ClientError:  # received again meanwhile: its new holder has it now
            return False
        return True

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        return {
            "messageId": message["MessageId"],
            "receiptHandle": message["ReceiptHandle"],
            "body": message["Body"],
            "attributes": message.get("Attributes", {}),
            "messageAttributes": {
                name: {
                    "stringValue": value.get("StringValue"),
                    "stringListValues": [],
                    "binaryListValues": [],
                    "dataType": value.get("DataType", "String"),
                }
                for name, value in message.get("MessageAttributes", {}).items()
            },
            "md5OfBody": message.get("MD5OfBody", ""),
            "eventSource": "aws:sqs",
            "eventSourceARN": self._queue_arn,
            "awsRegion": "us-east-1",
        }


def event_id_of(message: dict[str, Any]) -> str:
    """The event a webhook-queue message carries: ingest's `event_id` attribute, or the id of
    the Stripe event in an EventBridge envelope (that rule sets no attributes); "?" if none."""
    attribute = message.get("MessageAttributes", {}).get("event_id", {}).get("StringValue")
    if attribute:
        return str(attribute)
    try:
        return stripe_event_of(message.get("Body", "")).event_id
    except MalformedEventError:
        return "?"
