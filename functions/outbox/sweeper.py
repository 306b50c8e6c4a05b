"""Re-drive outbox items the stream did not finish: retries exhausted, lease expired after a
crash, or a stream record aged out (streams keep records 24 h). Out of attempts -> dead."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from functions.outbox.sender import OutboxSender, SendResult
from functions.shared import tables

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class Sweeper:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_name: str,
        sender: OutboxSender,
        clock: Callable[[], float],
        grace_seconds: int = 120,
        max_items: int = 1000,
    ) -> None:
        self._db = dynamodb
        self._table = table_name
        self._sender = sender
        self._clock = clock
        self._grace = grace_seconds
        self._max_items = max_items

    def sweep(self) -> Counter[str]:
        """Counts of what happened to each due item, by SendResult value."""
        results: Counter[str] = Counter()
        for outbox_id in self._due_items():
            sent = self._sender.deliver(outbox_id, only_if_due=True)
            if sent.result is SendResult.SKIPPED and self._sender.bury_if_exhausted(outbox_id):
                results[SendResult.DEAD.value] += 1
            else:
                results[sent.result.value] += 1
        return results

    def _due_items(self) -> Iterator[str]:
        """Every shard of the due index, each oldest first; the grace leaves fresh items to
        the stream. At most max_items per shard in one sweep."""
        paginator = self._db.get_paginator("query")
        for bucket in tables.due_buckets():
            pages = paginator.paginate(
                TableName=self._table,
                IndexName=tables.OUTBOX_DUE_INDEX,
                KeyConditionExpression="#bucket = :due AND #at <= :cutoff",
                ExpressionAttributeNames={
                    "#bucket": tables.OUTBOX_DUE_BUCKET,
                    "#at": tables.OUTBOX_DUE_AT,
                },
                ExpressionAttributeValues={
                    ":due": {"S": bucket},
                    ":cutoff": {"N": str(int(self._clock()) - self._grace)},
                },
                PaginationConfig={"MaxItems": self._max_items},
            )
            for page in pages:
                for item in page["Items"]:
                    yield item[tables.OUTBOX_KEY]["S"]
