"""The state of the world after deliveries: what tests assert on, never HTTP responses."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from functions.asaas.models import PROVIDER as ASAAS
from functions.process.service import EffectProcessor, Processed
from functions.shared import books, tables
from functions.shared.dynamo import from_attributes, scan_items
from functions.shared.items import DeliveryRecord, Entry, Order
from functions.store import queries
from functions.stripe.models import PROVIDER as STRIPE
from tests.support.asaas import AsaasAsDelivered

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

ProcessorFactory = Callable[["DynamoDBClient", tables.TableNames], EffectProcessor]
# The tables every test on moto creates (conftest.py's fixtures).
TABLES = tables.TableNames(ledger="test-ledger", outbox="test-outbox")


@dataclass
class World:
    dynamodb: DynamoDBClient
    tables: tables.TableNames
    make_processor: ProcessorFactory
    # Asaas's API, answering each payment as the last Asaas delivery carried it (when the
    # processor reads it from there: tests/support/asaas.py)
    asaas: AsaasAsDelivered | None = None

    def processor(self, client: DynamoDBClient | None = None) -> EffectProcessor:
        return self.make_processor(client or self.dynamodb, self.tables)

    def deliver(self, body: str, client: DynamoDBClient | None = None) -> Processed:
        """One Stripe delivery, which announces exactly one thing."""
        [processed] = self.processor(client).process(STRIPE, body)
        return processed

    def deliver_all(self, body: str, provider: str = STRIPE) -> list[Processed]:
        """One delivery that may announce several entries (a dispute's opening and verdict)."""
        if provider == ASAAS and self.asaas is not None:
            self.asaas.carried_by(body)
        return list(self.processor().process(provider, body))

    def deliver_in_parallel(self, body: str, copies: int) -> list[Processed]:
        """`copies` deliveries of one body released at the same instant, one thread each."""
        processor = self.processor()
        start = threading.Barrier(copies)
        results: list[Processed] = []
        errors: list[BaseException] = []

        def deliver() -> None:
            start.wait()
            try:
                results.extend(processor.process(STRIPE, body))
            except Exception as exc:  # noqa: BLE001 - re-raised below in the test thread
                errors.append(exc)

        threads = [threading.Thread(target=deliver) for _ in range(copies)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]
        return results

    def _scan(self, table: str) -> list[dict[str, Any]]:
        return list(scan_items(self.dynamodb, table))

    def order(self, order_id: str) -> Order:
        """The order as its totals read: one never written holds nothing (`find_order` tells
        whether its row exists)."""
        return self.find_order(order_id) or Order(order_id)

    def find_order(self, order_id: str) -> Order | None:
        response = self.dynamodb.get_item(
            TableName=self.tables.ledger,
            Key={
                tables.PARTITION_KEY: {"S": tables.order_pk(order_id)},
                tables.SORT_KEY: {"S": tables.ORDER_SORT},
            },
        )
        item = response.get("Item")
        return Order.of(from_attributes(item)) if item else None

    def effects(self, order_id: str) -> list[Entry]:
        """The order's entries: its partition's items under the entry prefix."""
        pages = self.dynamodb.get_paginator("query").paginate(
            **queries.entries(self.tables.ledger, order_id)
        )
        return [Entry.of(from_attributes(item)) for page in pages for item in page["Items"]]

    def outbox(self, order_id: str | None = None) -> list[dict[str, Any]]:
        items = self._scan(self.tables.outbox)
        return [i for i in items if order_id is None or i["order_id"] == order_id]

    def deliveries(self) -> list[DeliveryRecord]:
        return [
            DeliveryRecord.of(item)
            for item in self._scan(self.tables.ledger)
            if item[tables.SORT_KEY] == tables.DELIVERY_SORT
        ]

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every item of every table, in a stable order: equal snapshots mean nothing changed."""

        def key(item: dict[str, Any]) -> str:
            return repr(sorted(item.items()))

        return {
            table: sorted(self._scan(table), key=key)
            for table in (self.tables.ledger, self.tables.outbox)
        }

    def mismatches(
        self,
        order_id: str,
        effects: list[Entry] | None = None,
        outbox: list[dict[str, Any]] | None = None,
    ) -> list[books.Mismatch]:
        """What reconciliation would report for the order (its entries and outbox items read
        here unless the caller read them already)."""
        effects = self.effects(order_id) if effects is None else effects
        outbox = self.outbox(order_id) if outbox is None else outbox
        order = self.find_order(order_id) or Order(order_id)
        return books.unbalanced_totals(order, effects) + books.unmatched_outbox(effects, outbox)
