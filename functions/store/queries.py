"""The ledger's and the outbox's queries, as DynamoDB takes them: a partition, an order's
entries, an hour's shard of the `changed` index, a bucket of the outbox's due index.

Each returns the Query's arguments; the caller adds its paging, projection or consistency.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from functions.shared import tables
from functions.shared.domain import Outcome
from functions.shared.dynamo import to_attributes


def partition(table: str, pk: str) -> dict[str, Any]:
    """Every item of one partition (an order with its entries, the unmatched deliveries)."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk",
        "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY},
        "ExpressionAttributeValues": {":pk": {"S": pk}},
    }


def entries(table: str, order_id: str) -> dict[str, Any]:
    """An order's entries: its partition's items under the entry prefix."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :entry)",
        "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY, "#sk": tables.SORT_KEY},
        "ExpressionAttributeValues": {
            ":pk": {"S": tables.order_pk(order_id)},
            ":entry": {"S": tables.EFFECT_SORT_PREFIX},
        },
    }


def newer_counted_entries(
    table: str, order_id: str, payment: str, ordering_token: int
) -> dict[str, Any]:
    """The order's counted entries of `payment` newer than `ordering_token` (keys only)."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :entry)",
        "FilterExpression": "#payment = :payment AND #token > :token AND #outcome IN (:a, :s)",
        "ExpressionAttributeNames": {
            "#pk": tables.PARTITION_KEY,
            "#sk": tables.SORT_KEY,
            "#payment": "payment",
            "#token": "ordering_token",
            "#outcome": "outcome",
        },
        "ExpressionAttributeValues": to_attributes(
            {
                ":pk": tables.order_pk(order_id),
                ":entry": tables.EFFECT_SORT_PREFIX,
                ":payment": payment,
                ":token": ordering_token,
                ":a": Outcome.APPLIED.value,
                ":s": Outcome.STALE.value,
            }
        ),
        "ProjectionExpression": "#pk",
    }


def entries_with_ref_prefix(
    table: str, order_id: str, payment: str, ref_prefix: str
) -> dict[str, Any]:
    """The order's entries of `payment` whose object id starts with `ref_prefix`."""
    return {
        "TableName": table,
        "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :entries)",
        "FilterExpression": "#payment = :payment AND begins_with(#ref, :prefix)",
        "ExpressionAttributeNames": {
            "#pk": tables.PARTITION_KEY,
            "#sk": tables.SORT_KEY,
            "#payment": "payment",
            "#ref": "external_ref",
        },
        "ExpressionAttributeValues": to_attributes(
            {
                ":pk": tables.order_pk(order_id),
                ":entries": tables.EFFECT_SORT_PREFIX,
                ":payment": payment,
                ":prefix": ref_prefix,
            }
        ),
    }


def changed(table: str, bucket: str) -> dict[str, Any]:
    """One partition of the `changed` index (keys only)."""
    return {
        "TableName": table,
        "IndexName": tables.LEDGER_CHANGES_INDEX,
        "KeyConditionExpression": "#bucket = :bucket",
        "ExpressionAttributeNames": {"#bucket": tables.CHANGES_BUCKET},
        "ExpressionAttributeValues": {":bucket": {"S": bucket}},
    }


def due_index_ids(
    dynamodb: Any,
    table: str,
    bucket: str,
    *,
    due_by: int | None = None,
    max_items: int | None = None,
    page_size: int | None = None,
) -> Iterator[str]:
    """The outbox ids in one bucket of the due index (a `due#k` shard or `dead`), oldest
    first, optionally only those due by `due_by` (epoch seconds)."""
    condition = "#bucket = :bucket" + (" AND #at <= :due_by" if due_by is not None else "")
    names = {
        "#bucket": tables.OUTBOX_DUE_BUCKET,
        **({"#at": tables.OUTBOX_DUE_AT} if due_by is not None else {}),
    }
    values: dict[str, Any] = {":bucket": {"S": bucket}}
    if due_by is not None:
        values[":due_by"] = {"N": str(due_by)}
    paging = {"MaxItems": max_items, "PageSize": page_size}
    pages = dynamodb.get_paginator("query").paginate(
        TableName=table,
        IndexName=tables.OUTBOX_DUE_INDEX,
        KeyConditionExpression=condition,
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=values,
        PaginationConfig={k: v for k, v in paging.items() if v is not None},
    )
    for page in pages:
        for item in page["Items"]:
            yield str(item[tables.OUTBOX_KEY]["S"])
