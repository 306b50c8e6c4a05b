"""DynamoDB Streams over the tables held in memory: a table created with a stream keeps one
shard, and every write that changes the table appends a record to it (INSERT, MODIFY,
REMOVE, with the keys and the images its view type asks for), in write order. A write refused
(a condition that failed, a cancelled transaction) writes nothing and so records nothing.

As in moto, every put or update records, whether or not it changed the item (DynamoDB itself
records only writes that change something), and records are kept as long as the table is.
Shard iterators carry their own position (the stream's ARN, the shard and an index), so that
the store keeps no state per iterator.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devstack.memory.expressions import Item
from devstack.memory.tables import DynamoError, item_size, validation

# Sequence numbers as DynamoDB's look (21 digits, increasing): the first record's, then one up.
FIRST_SEQUENCE = 100000000000000000001
SHARD_ID = "shardId-00000000000000000001-00000001"
DEFAULT_LIMIT = 1000
Request = Mapping[str, Any]
Answer = dict[str, Any]


@dataclass
class Stream:
    """One table's stream: its shard's records, oldest first."""

    arn: str
    label: str
    view_type: str
    table_name: str
    key_schema: list[Any]
    created: float = field(default_factory=time.time)
    region: str = "us-east-1"
    records: list[Answer] = field(default_factory=list)

    def add(self, keys: Item, old: Item | None, new: Item | None) -> None:
        """The record of one write: `old` the item before (None: there was none), `new` after
        (None: deleted)."""
        dynamodb: Answer = {
            "ApproximateCreationDateTime": int(time.time()),
            "Keys": keys,
            "SequenceNumber": str(FIRST_SEQUENCE + len(self.records)),
            "StreamViewType": self.view_type,
        }
        if new is not None and self.view_type in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
            dynamodb["NewImage"] = new
        if old is not None and self.view_type in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
            dynamodb["OldImage"] = old
        dynamodb["SizeBytes"] = _size(dynamodb)
        self.records.append(
            {
                "eventID": uuid.uuid4().hex,
                "eventName": "INSERT" if old is None else "REMOVE" if new is None else "MODIFY",
                "eventVersion": "1.1",
                "eventSource": "aws:dynamodb",
                "awsRegion": self.region,
                "dynamodb": dynamodb,
            }
        )

    def clear(self) -> None:
        self.records.clear()

    def summary(self) -> Answer:
        return {"StreamArn": self.arn, "TableName": self.table_name, "StreamLabel": self.label}

    def description(self) -> Answer:
        return {
            **self.summary(),
            "StreamStatus": "ENABLED",
            "StreamViewType": self.view_type,
            "CreationRequestDateTime": self.created,
            "KeySchema": self.key_schema,
            "Shards": [
                {
                    "ShardId": SHARD_ID,
                    "SequenceNumberRange": {"StartingSequenceNumber": str(FIRST_SEQUENCE)},
                }
            ],
        }


def _size(dynamodb: Mapping[str, Any]) -> int:
    images = [dynamodb.get(name) or {} for name in ("Keys", "NewImage", "OldImage")]
    return sum(item_size(image) for image in images)


def _stream(streams: Mapping[str, Stream], arn: str) -> Stream:
    """The stream an ARN names (`arn:...:table/<table>/stream/<label>`)."""
    table = arn.split(":table/", 1)[-1].split("/stream/", 1)[0]
    found = streams.get(table)
    if found is None or found.arn != arn:
        raise DynamoError("ResourceNotFoundException", f"Requested resource not found: {arn}")
    return found


def _iterator(stream: Stream, position: int) -> str:
    return f"{stream.arn}|{SHARD_ID}|{position}"


def _sequence(request: Request) -> int:
    try:
        return int(request["SequenceNumber"]) - FIRST_SEQUENCE
    except (KeyError, ValueError):
        raise validation("A SequenceNumber is required for this iterator type") from None


def list_streams(streams: Mapping[str, Stream], request: Request) -> Answer:
    wanted = request.get("TableName")
    return {
        "Streams": [s.summary() for name, s in sorted(streams.items()) if wanted in (None, name)]
    }


def describe_stream(streams: Mapping[str, Stream], request: Request) -> Answer:
    return {"StreamDescription": _stream(streams, request["StreamArn"]).description()}


def get_shard_iterator(streams: Mapping[str, Stream], request: Request) -> Answer:
    stream = _stream(streams, request["StreamArn"])
    if request["ShardId"] != SHARD_ID:
        raise DynamoError("ResourceNotFoundException", f"Shard not found: {request['ShardId']}")
    kind = request["ShardIteratorType"]
    if kind == "TRIM_HORIZON":
        position = 0
    elif kind == "LATEST":
        position = len(stream.records)
    elif kind == "AT_SEQUENCE_NUMBER":
        position = _sequence(request)
    elif kind == "AFTER_SEQUENCE_NUMBER":
        position = _sequence(request) + 1
    else:
        raise validation(f"Invalid ShardIteratorType: {kind}")
    if not 0 <= position <= len(stream.records):
        raise validation(f"Invalid SequenceNumber {request.get('SequenceNumber')} for the shard")
    return {"ShardIterator": _iterator(stream, position)}


def get_records(streams: Mapping[str, Stream], request: Request) -> Answer:
    """At most Limit records from the iterator's position on, and the iterator after them."""
    arn, _, position_text = str(request["ShardIterator"]).rpartition("|")
    arn, _, shard = arn.rpartition("|")
    if shard != SHARD_ID or not position_text.isdigit():
        raise validation("Invalid ShardIterator")
    stream = _stream(streams, arn)
    limit = int(request.get("Limit") or DEFAULT_LIMIT)
    if not 1 <= limit <= DEFAULT_LIMIT:
        raise validation("Limit must be between 1 and 1000")
    start = int(position_text)
    records = stream.records[start : start + limit]
    return {"Records": records, "NextShardIterator": _iterator(stream, start + len(records))}


OPERATIONS: dict[str, Callable[[Mapping[str, Stream], Request], Answer]] = {
    "ListStreams": list_streams,
    "DescribeStream": describe_stream,
    "GetShardIterator": get_shard_iterator,
    "GetRecords": get_records,
}
