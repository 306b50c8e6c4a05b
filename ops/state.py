"""The ledger and outbox as they are: what the drill checks and `umavez show` prints."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from functions.shared import tables
from functions.shared.dynamo import from_attributes, scan_items
from functions.shared.items import Entry, FeeLine, Order
from functions.shared.outbox import outbox_id_for


@dataclass
class OrderView:
    """An order's partition and its outbox items: the order (None while no entry moved it),
    its entries, and the provider's statement lines booked on it (each one's fee and net)."""

    order_id: str
    order: Order | None = None
    effects: list[Entry] = field(default_factory=list)
    outbox: list[dict[str, Any]] = field(default_factory=list)
    fees: list[FeeLine] = field(default_factory=list)

    def add(self, item: dict[str, Any]) -> None:
        """An item of the order's partition, by its kind; capture marks count nothing."""
        sort = str(item[tables.SORT_KEY])
        if sort == tables.ORDER_SORT:
            self.order = Order.of({"order_id": self.order_id, **item})
        elif sort.startswith(tables.EFFECT_SORT_PREFIX):
            self.effects.append(Entry.of(item))
        elif sort.startswith(tables.FEE_SORT_PREFIX):
            self.fees.append(FeeLine.of(item))

    @property
    def books(self) -> Order:
        """The order as its totals read: one never written holds nothing."""
        return self.order if self.order is not None else Order(self.order_id)


@dataclass
class LedgerState:
    orders: dict[str, OrderView]
    deliveries: list[dict[str, Any]]
    outbox: list[dict[str, Any]]
    # Provider objects the waiting function reads again (a charge with a refund pending).
    watched: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def load(cls, dynamodb: Any, names: tables.TableNames) -> LedgerState:
        return cls.of(scan_items(dynamodb, names.ledger), scan_items(dynamodb, names.outbox))

    @classmethod
    def of(cls, ledger: Iterable[dict[str, Any]], outbox: Iterable[dict[str, Any]]) -> LedgerState:
        """From items already read (plain values): one scan serves several checks."""
        orders: dict[str, OrderView] = {}
        deliveries, watched = [], []

        def view(order_id: str) -> OrderView:
            return orders.setdefault(order_id, OrderView(order_id))

        for item in ledger:
            pk, sk = item[tables.PARTITION_KEY], item[tables.SORT_KEY]
            if pk.startswith("ORDER#"):
                view(pk.removeprefix("ORDER#")).add(item)
            elif sk == tables.DELIVERY_SORT:
                deliveries.append(item)
            elif pk == tables.RECHECK_PK:
                watched.append(item)
        items = list(outbox)
        by_order: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for item in items:
            by_order[item["order_id"]].append(item)
        for order_id, of_order in by_order.items():
            view(order_id).outbox = of_order
        return cls(orders, deliveries, items, watched)


def order_view(
    dynamodb: Any, names: tables.TableNames, order_id: str, *, with_outbox: bool = True
) -> OrderView:
    """One order, its effects (one Query) and, unless told not to, its outbox items."""
    view = OrderView(order_id)
    pages = dynamodb.get_paginator("query").paginate(
        TableName=names.ledger,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": tables.PARTITION_KEY},
        ExpressionAttributeValues={":pk": {"S": tables.order_pk(order_id)}},
    )
    for page in pages:
        for item in map(from_attributes, page["Items"]):
            view.add(item)
    if view.effects and with_outbox:
        ids = [outbox_id_for(e.effect_key) for e in view.effects]
        keys = [{tables.OUTBOX_KEY: {"S": outbox_id}} for outbox_id in ids]
        for start in range(0, len(keys), 100):
            response = dynamodb.batch_get_item(
                RequestItems={names.outbox: {"Keys": keys[start : start + 100]}}
            )
            view.outbox += [from_attributes(i) for i in response["Responses"][names.outbox]]
    return view
