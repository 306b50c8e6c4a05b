"""What the reconciliation keeps in the ledger beside its orders: its checkpoint and its last
run's summary, read as a test reads them back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fixtures import stripe
from functions.reconcile.checkpoint import CHECKPOINT_PK
from functions.shared import tables
from functions.shared.dynamo import from_attributes, to_attributes
from tests.support.world import TABLES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mypy_boto3_dynamodb import DynamoDBClient

    from tests.support.clock import FakeClock
    from tests.support.world import World

T0 = 1_764_460_800  # 2025-11-30T00:00:00Z: an hour boundary


def stored(dynamodb: DynamoDBClient, sort_key: str) -> dict[str, Any]:
    """The reconciliation's item under `sort_key` (CHECKPOINT_SK or LAST_RUN_SK); empty when
    there is none yet."""
    item = dynamodb.get_item(
        TableName=TABLES.ledger,
        Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: sort_key}),
        ConsistentRead=True,
    ).get("Item", {})
    return from_attributes(item)


def unbalanced_orders_over_hours(
    world: World,
    clock: FakeClock,
    dynamodb: DynamoDBClient,
    count: int,
    every: float,
    ids: Sequence[str] = (),
) -> list[str]:
    """`count` paid orders, one every `every` seconds, each total then changed by hand (the
    stamp the index knows it by stays): each order's check reports it, once per check. The
    first orders take `ids` when given (a test that needs two in one shard says so)."""
    orders = []
    for n in range(count):
        order = ids[n] if n < len(ids) else stripe.unique("ord")
        world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
        dynamodb.update_item(
            TableName=TABLES.ledger,
            Key={"pk": {"S": tables.order_pk(order)}, "sk": {"S": tables.ORDER_SORT}},
            UpdateExpression="ADD paid_total :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        orders.append(order)
        clock.advance(every)
    return orders


def two_ids_in_one_shard() -> list[str]:
    """Two fresh order ids the changed index puts in one shard of an hour (ids come from a
    process-wide sequence: without this, whether two orders share a shard is luck)."""
    first = stripe.unique("ord")
    wanted = tables.shard_of(first, tables.CHANGES_SHARDS)
    second = stripe.unique("ord")
    while tables.shard_of(second, tables.CHANGES_SHARDS) != wanted:
        second = stripe.unique("ord")
    return [first, second]
