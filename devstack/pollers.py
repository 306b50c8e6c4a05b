"""Event source mappings with Lambda's semantics, polling the local server. Each runs its
mapping's one definition (`infra/mappings.py`: batch size and window, filter, retries,
bisecting, parallelization, partial batch responses, concurrency, starting position), the one
the CDK stack synthesizes. A poller acts for Lambda with the function's execution role: its
calls name that function (`devstack/metering.py`'s `on_behalf_of`), so the local server
records them among the function's (`devstack/calls.py`).

- SQS -> process: batches (gathered for up to the mapping's batching window), partial batch
  responses (only succeeded records are deleted), the queue's visibility timeout before a
  failed record returns, and its redrive policy to the DLQ.
  A batch stays invisible while its invocation runs: Lambda's timeout is a sixth of the
  visibility timeout, so AWS never redelivers a message its function still holds. Locally
  the timeout is seconds and a busy server can make a batch take longer: the poller extends
  the batch's visibility while the handler runs, or a slow batch would be received again, up
  to the DLQ, without ever having failed.
- DynamoDB Streams -> outbox: the mapping's filter, its parallelization factor (the shard's
  records in lanes by partition key, the lanes' batches invoked at once), partial batch
  responses, a batch whose invocation failed split in two (bisecting), bounded retries, then
  the failed records' coordinates to the on-failure queue.
- a schedule for the sweeper.
When idle, a poller waits a little longer each time (up to half a second), and goes back
to full speed as soon as there is work: empty polls cost the single-threaded server time.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Final

from botocore.exceptions import ClientError

from devstack.lambdas import LambdaContext
from devstack.metering import on_behalf_of
from devstack.resources import client
from functions.process.eventbridge import stripe_event_of
from functions.shared.errors import MalformedEventError
from infra.mappings import QueueMapping, StreamMapping

Handler = Callable[[dict[str, Any], Any], Any]
IDLE_MIN_SECONDS = 0.01
IDLE_MAX_SECONDS = 0.5
# While a batch fills within its window, the queue is read again this often.
BATCHING_POLL_SECONDS = 0.1
# SQS hands out at most this many messages a receive.
SQS_RECEIVE_MOST = 10


class Poller(threading.Thread):
    def __init__(self, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.stopping = threading.Event()
        # Set: the poller takes nothing new (its function is down: a burst drill's outage).
        self.paused = threading.Event()
        self.stats: Counter[str] = Counter()
        self.busy = False
        self.errors: list[str] = []

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        idle = IDLE_MIN_SECONDS
        while not self.stopping.is_set():
            if self.paused.is_set():
                self.stopping.wait(IDLE_MAX_SECONDS)
                continue
            try:
                worked = self.poll_once()
            except Exception as exc:  # noqa: BLE001 - a Lambda error must not kill the mapping
                self.errors.append(repr(exc))
                worked = False
            if worked:
                idle = IDLE_MIN_SECONDS
            else:
                self.stopping.wait(idle)
                idle = min(IDLE_MAX_SECONDS, idle * 2)

    def poll_once(self) -> bool:
        raise NotImplementedError


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


SHARD_OF: Final = "umavezShardId"


class StreamRecords:
    """Reads every shard of a stream from its starting position on (TRIM_HORIZON: the oldest
    record kept), as the records Lambda delivers."""

    def __init__(
        self,
        streams: Any,
        stream_arn: str,
        limit: int | None = None,
        starting_position: str = "TRIM_HORIZON",
    ) -> None:
        self._streams = streams
        self._arn = stream_arn
        self._starting_position = starting_position
        self._limit = {"Limit": limit} if limit else {}
        self._iterators: dict[str, str | None] = {}
        self._shards: list[str] = []
        self._shards_read_at = -1e9

    def _shard_ids(self) -> list[str]:
        if time.monotonic() - self._shards_read_at > 5:
            description = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]
            self._shards = [shard["ShardId"] for shard in description["Shards"]]
            self._shards_read_at = time.monotonic()
        return self._shards

    def next_records(self) -> list[dict[str, Any]]:
        """One GetRecords per shard, from where the last call stopped."""
        records: list[dict[str, Any]] = []
        for shard_id in self._shard_ids():
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self._arn,
                    ShardId=shard_id,
                    ShardIteratorType=self._starting_position,
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue
            response = self._streams.get_records(ShardIterator=iterator, **self._limit)
            self._iterators[shard_id] = response.get("NextShardIterator")
            records += [
                {**lambda_stream_record(dict(r), self._arn), SHARD_OF: shard_id}
                for r in response["Records"]
            ]
        return records


class StreamToLambda(Poller):
    def __init__(
        self,
        name: str,
        endpoint_url: str,
        table_name: str,
        handler: Handler,
        failures_url: str,
        mapping: StreamMapping,
        gives_up: Callable[[], bool] = lambda: False,
    ) -> None:
        """`gives_up` decides, batch by batch, that the mapping discards a batch at once, as
        after its retries or past its maximum record age: a fault the drill injects, so that
        the sweeper's way back for those items runs."""
        super().__init__(name)
        self.mapping = mapping
        self._gives_up = gives_up
        # The stack's own wiring, as CloudFormation hands Lambda the stream's ARN: no call of
        # the function's.
        dynamodb = client("dynamodb", endpoint_url)
        self._sqs = on_behalf_of(mapping.function, client("sqs", endpoint_url))
        self._arn = dynamodb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
        self._records = StreamRecords(
            on_behalf_of(mapping.function, client("dynamodbstreams", endpoint_url)),
            self._arn,
            mapping.batch_size * mapping.parallelization_factor,
            mapping.starting_position,
        )
        self._handler = handler
        self._failures_url = failures_url
        self._stats_lock = threading.Lock()
        self._lanes = ThreadPoolExecutor(
            mapping.parallelization_factor, thread_name_prefix=f"{name}-lane"
        )

    def run(self) -> None:
        try:
            super().run()
        finally:
            self._lanes.shutdown(wait=True)

    def poll_once(self) -> bool:
        records = self._records.next_records()
        if not records:
            # A new outbox item is in no index until its first try: the drain knows the
            # stream has none left unread only from reads of it that found nothing.
            self.stats["empty_reads"] += 1
        matching = [r for r in records if self.mapping.matches(r)]
        self.stats["filtered_out"] += len(records) - len(matching)
        if matching:
            self.busy = True
            try:
                lanes = by_partition_key(matching, self.mapping.parallelization_factor)
                # Each lane's batches in order, the lanes at once, all done before the next
                # read (a lane that raised too: then its error).
                running = [self._lanes.submit(self._invoke_lane, lane) for lane in lanes]
                wait(running)
                for lane in running:
                    lane.result()
            finally:
                self.busy = False
        return bool(records)

    def _invoke_lane(self, lane: list[dict[str, Any]]) -> None:
        size = self.mapping.batch_size
        for start in range(0, len(lane), size):
            batch = lane[start : start + size]
            if self._gives_up():
                self._count("given_up", len(batch))
                self._send_to_on_failure(batch)
            else:
                self._invoke_with_retries(batch, self.mapping.retry_attempts)

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            self.stats[name] += n

    def _invoke_with_retries(self, batch: list[dict[str, Any]], retries: int) -> None:
        """Invokes until the batch succeeds or its retries run out. Partial failures: the
        batch again from its first failed record. An invocation that failed (raised): split
        in two with bisecting, each half with the retries left, else the whole batch again."""
        while True:
            # The shard each record came from is the poller's, not part of Lambda's record.
            records = [{k: v for k, v in r.items() if k != SHARD_OF} for r in batch]
            try:
                response = self._handler({"Records": records}, LambdaContext("umavez-outbox"))
            except Exception as exc:  # noqa: BLE001 - Lambda retries a function error
                self.errors.append(repr(exc))
                self._count("function_errors")
                if self.mapping.bisect_batch_on_error and len(batch) > 1 and retries > 0:
                    self._count("bisected")
                    half = len(batch) // 2
                    self._invoke_with_retries(batch[:half], retries - 1)
                    self._invoke_with_retries(batch[half:], retries - 1)
                    return
                first = 0
            else:
                self._count("records", len(batch))
                reported = (response or {}).get("batchItemFailures", [])
                failed = (
                    [f["itemIdentifier"] for f in reported]
                    if self.mapping.report_batch_item_failures
                    else []
                )
                if not failed:
                    return
                first = next(
                    i for i, r in enumerate(batch) if r["dynamodb"]["SequenceNumber"] in failed
                )
            if retries == 0:
                break
            retries -= 1
            self._count("retried")
            batch = batch[first:]
        self._send_to_on_failure(batch)

    def _send_to_on_failure(self, batch: list[dict[str, Any]]) -> None:
        self._count("sent_to_on_failure", len(batch))
        self._sqs.send_message(
            QueueUrl=self._failures_url,
            MessageBody=json.dumps(
                on_failure_message(batch, invocations=1 + self.mapping.retry_attempts)
            ),
        )


def by_partition_key(records: list[dict[str, Any]], lanes: int) -> list[list[dict[str, Any]]]:
    """A shard's records split as Lambda's parallelization factor splits them: every record of
    one partition key in the same lane, in stream order; lanes that got nothing left out."""
    split: list[list[dict[str, Any]]] = [[] for _ in range(lanes)]
    for record in records:
        key = json.dumps(record["dynamodb"]["Keys"], sort_keys=True).encode()
        split[zlib.crc32(key) % lanes].append(record)
    return [lane for lane in split if lane]


def on_failure_message(batch: list[dict[str, Any]], invocations: int = 4) -> dict[str, Any]:
    """What Lambda sends to a stream mapping's on-failure destination: the discarded batch's
    coordinates in its shard, not its records."""
    sequence = [r["dynamodb"]["SequenceNumber"] for r in batch]
    return {
        "requestContext": {
            "condition": "RetryAttemptsExhausted",
            "approximateInvokeCount": invocations,
        },
        "version": "1.0",
        "DDBStreamBatchInfo": {
            "shardId": batch[0][SHARD_OF],
            "startSequenceNumber": sequence[0],
            "endSequenceNumber": sequence[-1],
            "batchSize": len(batch),
            "streamArn": batch[0]["eventSourceARN"],
        },
    }


def lambda_stream_record(record: dict[str, Any], stream_arn: str) -> dict[str, Any]:
    """A DynamoDB Streams GetRecords record, shaped as Lambda delivers it to a function."""
    dynamodb = dict(record["dynamodb"])
    created: Any = dynamodb.get("ApproximateCreationDateTime")
    if created is not None and hasattr(created, "timestamp"):
        dynamodb["ApproximateCreationDateTime"] = int(created.timestamp())
    return {
        "eventID": record["eventID"],
        "eventName": record["eventName"],
        "eventVersion": record.get("eventVersion", "1.1"),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.get("awsRegion", "us-east-1"),
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }


class Every(Poller):
    """A schedule: calls `handler` every `seconds`."""

    def __init__(self, name: str, seconds: float, handler: Handler, function_name: str) -> None:
        super().__init__(name)
        self._seconds = seconds
        self._handler = handler
        self._function_name = function_name
        # What each run returned, for the drill to judge (a handful of small dicts).
        self.results: list[Any] = []

    def poll_once(self) -> bool:
        if self.stopping.wait(self._seconds):
            return True
        self.run_now()
        return True

    def run_now(self) -> Any:
        self.busy = True
        try:
            self.stats["runs"] += 1
            result = self._handler({}, LambdaContext(self._function_name))
            self.results.append(result)
            return result
        finally:
            self.busy = False
