"""What a statement pass reads of the ledger: every order changed from a time on (the walk of
the `changed` index, hour by hour, each order once)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from functions.shared import tables
from functions.store import queries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def orders_changed_since(
    db: DynamoDBClient, ledger: str, since: int, clock: Callable[[], float]
) -> Iterator[str]:
    """Every order changed from `since` on (the `changed` index, hour by hour)."""
    hour = datetime.fromtimestamp(since, tz=UTC).replace(minute=0, second=0, microsecond=0)
    now = datetime.fromtimestamp(clock(), tz=UTC)
    seen: set[str] = set()
    while hour <= now:
        for bucket in tables.changes_buckets(hour.isoformat()):
            pages = db.get_paginator("query").paginate(**queries.changed(ledger, bucket))
            for page in pages:
                for key in page["Items"]:
                    order_id = str(key[tables.PARTITION_KEY]["S"]).removeprefix("ORDER#")
                    if order_id not in seen:
                        seen.add(order_id)
                        yield order_id
        hour += timedelta(hours=1)
