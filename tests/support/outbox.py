"""Outbox items as the sweeper and an operator see them: through the due index's buckets."""

from __future__ import annotations

import hashlib
import itertools
from typing import TYPE_CHECKING

from functions.shared import tables
from functions.shared.dynamo import to_attributes
from functions.shared.outbox import OutboxStatus, iso_time

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def in_bucket(dynamodb: DynamoDBClient, table: str, bucket: str) -> list[str]:
    """The ids the due index holds in one bucket (`due#k` or `dead`), in its order."""
    response = dynamodb.query(
        TableName=table,
        IndexName=tables.OUTBOX_DUE_INDEX,
        KeyConditionExpression="#bucket = :bucket",
        ExpressionAttributeNames={"#bucket": tables.OUTBOX_DUE_BUCKET},
        ExpressionAttributeValues={":bucket": {"S": bucket}},
    )
    return [item[tables.OUTBOX_KEY]["S"] for item in response["Items"]]


def one_id_per_shard() -> list[str]:
    """Outbox ids (of the real shape) whose due bucket is `due#0`, `due#1`, ... in order."""
    found: dict[str, str] = {}
    for n in itertools.count():
        outbox_id = "obx_" + hashlib.sha256(f"shard-{n}".encode()).hexdigest()
        found.setdefault(tables.due_bucket(outbox_id), outbox_id)
        if len(found) == tables.OUTBOX_DUE_SHARDS:
            return [found[bucket] for bucket in tables.due_buckets()]
    raise AssertionError("unreachable")


def put_parked(dynamodb: DynamoDBClient, table: str, outbox_id: str, now: float) -> None:
    """A pending item in its shard of the due index, as the stream's first try leaves one it
    could not send (no recipient: no e-mail)."""
    dynamodb.put_item(
        TableName=table,
        Item=to_attributes(
            {
                tables.OUTBOX_KEY: outbox_id,
                "effect_key": outbox_id.removeprefix("obx_"),
                "order_id": "ord_" + outbox_id[4:12],
                "transition": "order.paid",
                "amount": 5000,
                "currency": "brl",
                "provider": "stripe",
                "external_ref": "pi_" + outbox_id[4:12],
                "event_id": "evt_" + outbox_id[4:12],
                "late": False,
                "status": OutboxStatus.PENDING.value,
                "attempts": 0,
                "created_at": iso_time(now),
                tables.OUTBOX_DUE_BUCKET: tables.due_bucket(outbox_id),
                tables.OUTBOX_DUE_AT: int(now),
            }
        ),
    )
