"""What the reconciliation reads of the tables: an order's items in one consistent Query, outbox
items by id (100 keys a consistent BatchGet), the orders of one partition of the `changed`
index counted (keys only), and every order as one consistent scan of the ledger reads them,
gathered in groups whose outbox items fit one read."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from functions.shared import tables
from functions.shared.bindings import BATCH_GET_LIMIT
from functions.shared.dynamo import from_attributes, scan_items, to_attributes
from functions.store import queries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import QueryOutputTypeDef

T = TypeVar("T")


class Reads:
    def __init__(self, dynamodb: DynamoDBClient, table_names: tables.TableNames) -> None:
        self._db = dynamodb
        self._tables = table_names

    def order_items(self, order_id: str) -> list[dict[str, Any]]:
        """The order and its entries, in one consistent Query."""
        return self.query_all(
            **queries.partition(self._tables.ledger, tables.order_pk(order_id)),
            ConsistentRead=True,
        )

    def count(self, bucket: str) -> int:
        """Orders in one partition of the `changed` index (keys only: about 80 keys per read
        unit, a page of ~13,000 per request)."""
        pages = self._db.get_paginator("query").paginate(
            **queries.changed(self._tables.ledger, bucket), Select="COUNT"
        )
        return sum(int(page["Count"]) for page in pages)

    def changed_page(
        self, bucket: str, limit: int, cursor: dict[str, Any] | None
    ) -> QueryOutputTypeDef:
        """One page of the keys of a partition of the `changed` index, from `cursor` on."""
        query: dict[str, Any] = {**queries.changed(self._tables.ledger, bucket), "Limit": limit}
        if cursor:
            query["ExclusiveStartKey"] = cursor
        return self._db.query(**query)

    def due_index_ids(self, bucket: str, max_items: int) -> list[str]:
        """The ids of one bucket of the outbox's due index, at most `max_items`."""
        return list(
            queries.due_index_ids(self._db, self._tables.outbox, bucket, max_items=max_items)
        )

    def unmatched(self) -> list[dict[str, Any]]:
        """The payments waiting for an order."""
        return self.query_all(
            **queries.partition(self._tables.ledger, tables.UNMATCHED_PK),
            # A lagging read could miss a delivery the waiting re-drive just moved here.
            ConsistentRead=True,
        )

    def outbox_items(self, outbox_ids: list[str]) -> dict[str, dict[str, Any]]:
        found = self.batch_get(self._tables.outbox, [{tables.OUTBOX_KEY: i} for i in outbox_ids])
        return {item[tables.OUTBOX_KEY]: item for item in found}

    def batch_get(self, table: str, keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for chunk in chunks(keys, BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                table: {"Keys": [to_attributes(k) for k in chunk], "ConsistentRead": True}
            }
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                found += [from_attributes(i) for i in response["Responses"].get(table, [])]
                request = dict(response.get("UnprocessedKeys") or {})
        return found

    def query_all(self, **query: Any) -> list[dict[str, Any]]:
        return list(self._query_pages(**query))

    def _query_pages(self, **query: Any) -> Iterator[dict[str, Any]]:
        for page in self._db.get_paginator("query").paginate(**query):
            for item in page["Items"]:
                yield from_attributes(item)

    def scanned_orders(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Each order and its entries, as one consistent scan of the ledger reads them."""
        partition = ""
        items: list[dict[str, Any]] = []
        for item in scan_items(self._db, self._tables.ledger, consistent_read=True):
            key = str(item[tables.PARTITION_KEY])
            if key != partition:
                if order_of(items):
                    yield partition.removeprefix("ORDER#"), items
                partition, items = key, []
            if key.startswith("ORDER#"):
                items.append(item)
        if order_of(items):
            yield partition.removeprefix("ORDER#"), items


@dataclass(frozen=True)
class ScannedOrder:
    order_id: str
    items: list[dict[str, Any]]
    outbox_ids: list[str]


def groups(
    orders: Iterable[tuple[str, list[dict[str, Any]]]],
    outbox_ids: Callable[[list[dict[str, Any]]], list[str]],
    keys_per_read: int,
) -> Iterator[list[ScannedOrder]]:
    """Orders in turn, gathered while their outbox items fit one read (an order with more is
    a group of its own, read in several), and never more orders than that: orders with no
    item to read (older than the retention) would otherwise gather without end."""
    group: list[ScannedOrder] = []
    keys = 0
    for order_id, items in orders:
        order = ScannedOrder(order_id, items, outbox_ids(items))
        if group and (keys + len(order.outbox_ids) > keys_per_read or len(group) >= keys_per_read):
            yield group
            group, keys = [], 0
        group.append(order)
        keys += len(order.outbox_ids)
    if group:
        yield group


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def order_of(items: list[dict[str, Any]]) -> dict[str, Any]:
    return next((i for i in items if i[tables.SORT_KEY] == tables.ORDER_SORT), {})


def updated_at(items: list[dict[str, Any]]) -> str:
    return str(order_of(items).get("updated_at", ""))
