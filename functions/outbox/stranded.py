"""New outbox items whose stream record the event source mapping gave up on: parked for the
sweeper from the mapping's on-failure queue.

A new item is in no index until its first try ends (functions/outbox/sender.py), so a record
the stream discards (retries exhausted, or older than the mapping's maximum record age) would
leave its item where no sweeper looks. Lambda sends the discarded batch's coordinates, not its
records, to the on-failure queue:

    {"requestContext": {"condition": "RetryAttemptsExhausted", ...},
     "DDBStreamBatchInfo": {"shardId": ..., "startSequenceNumber": ...,
                            "endSequenceNumber": ..., "streamArn": ..., "batchSize": ...}}

The records stay in the stream for 24 hours. Each sweep reads them back (GetShardIterator at
the start sequence number, GetRecords up to the end one) and parks every new outbox item of
the range in the due index, where the sweeper sends it. A message is deleted only once its
whole range was read; one whose records are gone stays on the queue, which is alarmed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any, Final

from botocore.exceptions import ClientError

from functions.outbox.sender import OutboxSender
from functions.shared.errors import UmavezError

PARKED: Final = "parked"
ALREADY_HANDLED: Final = "already_handled"
UNREADABLE: Final = "unreadable"
# GetRecords may answer empty before the records of an open shard; this many in a row end it.
EMPTY_READS_LIMIT: Final = 5


class StrandedRangeError(UmavezError):
    """The message's records could not be read back (gone from the stream, or malformed)."""


class StrandedItems:
    def __init__(
        self,
        sqs: Any,
        streams: Any,
        queue_url: str,
        sender: OutboxSender,
        max_messages: int = 100,
    ) -> None:
        self._sqs = sqs
        self._streams = streams
        self.queue_url = queue_url
        self._sender = sender
        self._max_messages = max_messages

    def park_all(self) -> Counter[str]:
        """Counts of items parked, items found sent or parked already, and messages left on
        the queue because their records could not be read back."""
        results: Counter[str] = Counter()
        for message in self._messages():
            try:
                # All of the range first: a message is deleted only once all of it was read.
                outbox_ids = list(self._outbox_ids(message["Body"]))
            except StrandedRangeError:
                results[UNREADABLE] += 1
                continue
            for outbox_id in outbox_ids:
                parked = self._sender.park(outbox_id, "its stream record was given up on")
                results[PARKED if parked else ALREADY_HANDLED] += 1
            self._sqs.delete_message(
                QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
            )
        return results

    def _messages(self) -> Iterator[dict[str, Any]]:
        received = 0
        while received < self._max_messages:
            batch = self._sqs.receive_message(
                QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0
            ).get("Messages", [])
            if not batch:
                return
            received += len(batch)
            yield from batch

    def _outbox_ids(self, body: str) -> Iterator[str]:
        try:
            info = json.loads(body)["DDBStreamBatchInfo"]
            arn, shard = str(info["streamArn"]), str(info["shardId"])
            start, end = str(info["startSequenceNumber"]), int(info["endSequenceNumber"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StrandedRangeError(f"not a stream batch's coordinates: {exc!r}") from exc
        try:
            iterator: str | None = self._streams.get_shard_iterator(
                StreamArn=arn,
                ShardId=shard,
                ShardIteratorType="AT_SEQUENCE_NUMBER",
                SequenceNumber=start,
            )["ShardIterator"]
            empty_reads = 0
            while iterator and empty_reads < EMPTY_READS_LIMIT:
                response = self._streams.get_records(ShardIterator=iterator)
                records = response.get("Records", [])
                empty_reads = 0 if records else empty_reads + 1
                for record in records:
                    sequence = int(record["dynamodb"]["SequenceNumber"])
                    if sequence > end:
                        return
                    if outbox_id := _new_item_id(record):
                        yield outbox_id
                    if sequence == end:
                        return
                iterator = response.get("NextShardIterator")
        except ClientError as exc:
            raise StrandedRangeError(f"{shard} from {start}: {exc}") from exc
        # The range's end was never reached: its items may not all be parked; the message stays.
        raise StrandedRangeError(f"{shard}: records from {start} to {end} not all read back")


def _new_item_id(record: dict[str, Any]) -> str | None:
    if record.get("eventName") != "INSERT":
        return None
    image = record.get("dynamodb", {}).get("NewImage", {})
    outbox_id = image.get("outbox_id", {}).get("S")
    return str(outbox_id) if outbox_id else None
