"""Names, keys and layouts of the tables: one module read by the functions, the tests and infra.

The ledger is one table holding every kind of item, so that an order and everything that
happened to it are one Query away; each kind's keys and its typed model are listed in
functions/shared/items.py. The outbox is its own table because its stream feeds the sender
and nothing else."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Final

PARTITION_KEY: Final = "pk"
SORT_KEY: Final = "sk"
OUTBOX_KEY: Final = "outbox_id"
# Sparse index of outbox items someone must still look at: the attribute exists only while an
# item is pending or being sent, and `next_attempt_at` says when to look (due time or lease end).
# The bucket is sharded (`due#0` .. `due#7`, by a hash of the item's id) so no single index
# partition takes every write; the sweeper reads every shard. A dead item moves to the bucket
# `dead` (sort key: when it died), so dead items are listed without a scan.
OUTBOX_DUE_INDEX: Final = "due"
OUTBOX_DUE_BUCKET: Final = "due_bucket"
OUTBOX_DUE_AT: Final = "next_attempt_at"
OUTBOX_DUE_SHARDS: Final = 8
OUTBOX_DEAD_BUCKET: Final = "dead"

# Sparse, keys-only index of orders by the hour they last changed, for the incremental
# reconciliation: `changed_bucket` is the order's `updated_at` hour plus a shard
# (`2026-11-30T06#3`), and nothing else: no sort key, so an order changed again within the same
# hour writes nothing to the index (a sort key of `updated_at` cost a delete and a put, 2 WRU,
# on every change). The reconciliation reads the order's `updated_at` from the order itself.
# The shards are the reconciliation's parallelism: each hour's shard is one unit of its work,
# checked beside the others (an hour of 200 changes a second is 45,000 orders a shard). Only ever
# raise the count: a reader queries shards 0..CHANGES_SHARDS-1 of every hour, which holds the
# shards of a smaller count too (orders bucketed when there were 4 are in 0..3).
LEDGER_CHANGES_INDEX: Final = "changed"
CHANGES_BUCKET: Final = "changed_bucket"
CHANGES_SHARDS: Final = 16

# TTL attribute (epoch seconds) of both tables. Only DELIVERY audit records and sent outbox
# items carry it; effect keys and orders never expire (they make a redelivery a duplicate).
EXPIRES_AT: Final = "expires_at"

ORDER_SORT: Final = "ORDER"
EFFECT_SORT_PREFIX: Final = "EFFECT#"
REF_SORT: Final = "REF"
# In an order's partition: how much of a payment its entries counted, once captured again.
CAPTURE_SORT_PREFIX: Final = "CAPTURED#"
# In an order's partition: the fee and net of one line of the provider's statement, recorded
# once (its put is conditional) as the order's fee_total and net_total grow by them.
FEE_SORT_PREFIX: Final = "FEE#"
DELIVERY_SORT: Final = "DELIVERY"

LEDGER_TABLE_ENV: Final = "LEDGER_TABLE"
OUTBOX_TABLE_ENV: Final = "OUTBOX_TABLE"
DEFAULT_LEDGER_TABLE: Final = "umavez-ledger"
DEFAULT_OUTBOX_TABLE: Final = "umavez-outbox"


def order_pk(order_id: str) -> str:
    return f"ORDER#{order_id}"


def effect_sk(effect_key: str) -> str:
    return f"{EFFECT_SORT_PREFIX}{effect_key}"


def capture_sk(provider: str, payment: str) -> str:
    return f"{CAPTURE_SORT_PREFIX}{provider}#{payment}"


def fee_sk(provider: str, line_id: str) -> str:
    return f"{FEE_SORT_PREFIX}{provider}#{line_id}"


def shard_of(key: str, shards: int) -> int:
    """A stable shard for a key (not Python's per-process salted hash)."""
    return zlib.crc32(key.encode()) % shards


def due_bucket(outbox_id: str) -> str:
    return f"due#{shard_of(outbox_id, OUTBOX_DUE_SHARDS)}"


def due_buckets() -> list[str]:
    return [f"due#{shard}" for shard in range(OUTBOX_DUE_SHARDS)]


def changes_bucket(order_id: str, updated_at: str) -> str:
    """`updated_at` is ISO-8601: its first 13 characters are the hour (`2026-11-30T06`)."""
    return f"{updated_at[:13]}#{shard_of(order_id, CHANGES_SHARDS)}"


def changes_buckets(stamp: str) -> list[str]:
    """Every shard's partition of the hour `stamp` is in."""
    return [f"{stamp[:13]}#{shard}" for shard in range(CHANGES_SHARDS)]


def ref_pk(provider: str, object_id: str) -> str:
    return f"REF#{provider}#{object_id}"


def delivery_pk(provider: str, event_id: str) -> str:
    return f"DELIVERY#{provider}#{event_id}"


# Waiting and unmatched deliveries each live in one partition: a Query lists them all. They are
# few (a race between a provider's events, or money nobody can route), never the traffic.
WAITING_PK: Final = "WAITING"
UNMATCHED_PK: Final = "UNMATCHED"
# Deliveries that only bind, kept past their wait (expiring with the retention) and re-driven
# once what they are bound through is bound: a chain waiting on them is not broken for good.
DORMANT_PK: Final = "DORMANT"
# Provider objects read again on a schedule (a charge with a refund still pending): as few.
RECHECK_PK: Final = "RECHECK"


def parked_sk(provider: str, event_id: str) -> str:
    return f"{provider}#{event_id}"


@dataclass(frozen=True)
class TableNames:
    ledger: str = DEFAULT_LEDGER_TABLE
    outbox: str = DEFAULT_OUTBOX_TABLE


def create_table_requests(names: TableNames) -> list[dict[str, Any]]:
    """CreateTable arguments for local and test stacks; infra declares the same keys."""
    return [
        {
            "TableName": names.ledger,
            "KeySchema": [
                {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
                {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
            ],
            "AttributeDefinitions": [
                {"AttributeName": PARTITION_KEY, "AttributeType": "S"},
                {"AttributeName": SORT_KEY, "AttributeType": "S"},
                {"AttributeName": CHANGES_BUCKET, "AttributeType": "S"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": LEDGER_CHANGES_INDEX,
                    "KeySchema": [
                        {"AttributeName": CHANGES_BUCKET, "KeyType": "HASH"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            "BillingMode": "PAY_PER_REQUEST",
        },
        {
            "TableName": names.outbox,
            "KeySchema": [{"AttributeName": OUTBOX_KEY, "KeyType": "HASH"}],
            "AttributeDefinitions": [
                {"AttributeName": OUTBOX_KEY, "AttributeType": "S"},
                {"AttributeName": OUTBOX_DUE_BUCKET, "AttributeType": "S"},
                {"AttributeName": OUTBOX_DUE_AT, "AttributeType": "N"},
            ],
            "GlobalSecondaryIndexes": [
                {
                    "IndexName": OUTBOX_DUE_INDEX,
                    "KeySchema": [
                        {"AttributeName": OUTBOX_DUE_BUCKET, "KeyType": "HASH"},
                        {"AttributeName": OUTBOX_DUE_AT, "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
        },
    ]
