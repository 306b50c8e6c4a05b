"""DynamoDB Streams -> outbox, as Lambda's event source mapping runs it on the local server (the
mapping's one definition, `infra/mappings.py`; see `devstack/pollers.py`): the mapping's filter,
its parallelization factor (the shard's records in lanes by partition key, the lanes' batches
invoked at once), partial batch responses, a batch whose invocation failed split in two
(bisecting), bounded retries, then the failed records' coordinates to the on-failure queue.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Final

from devstack.lambdas import LambdaContext
from devstack.metering import on_behalf_of
from devstack.pollers import Handler, Poller
from devstack.resources import client
from infra.mappings import StreamMapping

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
