"""What the reconciliation keeps in the ledger beside its orders: its checkpoint and its last
run's summary, read as a test reads them back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from functions.reconcile.service import CHECKPOINT_PK
from functions.shared import tables
from functions.shared.dynamo import from_attributes, to_attributes
from tests.support.world import TABLES

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def stored(dynamodb: DynamoDBClient, sort_key: str) -> dict[str, Any]:
    """The reconciliation's item under `sort_key` (CHECKPOINT_SK or LAST_RUN_SK); empty when
    there is none yet."""
    item = dynamodb.get_item(
        TableName=TABLES.ledger,
        Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: sort_key}),
        ConsistentRead=True,
    ).get("Item", {})
    return from_attributes(item)
