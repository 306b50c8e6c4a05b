"""The ledger's typed items (functions/shared/items.py): read from what DynamoDB returned."""

from __future__ import annotations

import pytest

from functions.shared import tables
from functions.shared.domain import FinancialStatus, Outcome, Total
from functions.shared.items import Entry, MalformedItemError, Order, OrderPartition, Parked


def test_an_entry_keeps_the_attributes_it_knows_and_ignores_the_others() -> None:
    # Given an entry as the ledger holds it, with its keys and an attribute no model names
    item = {
        tables.PARTITION_KEY: tables.order_pk("ord_1"),
        tables.SORT_KEY: tables.effect_sk("k1"),
        "effect_key": "k1",
        "order_id": "ord_1",
        "outcome": Outcome.STALE.value,
        "transition": "order.paid",
        "amount": 5000,
        "currency": "brl",
        "written_by_a_newer_version": True,
    }

    # When it is read
    entry = Entry.of(item)

    # Then its fields are typed, and it counted (stale entries count)
    assert (entry.effect_key, entry.amount, entry.currency) == ("k1", 5000, "brl")
    assert entry.counted
    assert not Entry.of({**item, "outcome": Outcome.VOIDED.value}).counted


def test_an_item_without_an_attribute_its_kind_always_has_is_malformed() -> None:
    # Given an entry item without its outcome
    item = {"effect_key": "k1", "order_id": "ord_1", tables.SORT_KEY: tables.effect_sk("k1")}

    # When it is read, Then the error names the kind and the item
    with pytest.raises(MalformedItemError, match=r"Entry item None/EFFECT#k1"):
        Entry.of(item)


def test_an_order_read_without_its_id_takes_it_from_its_key_and_says_its_status() -> None:
    # Given an order item written before its id was stored, refunded in part
    item = {
        tables.PARTITION_KEY: tables.order_pk("ord_7"),
        tables.SORT_KEY: tables.ORDER_SORT,
        "paid_total": 10000,
        "refunded_total": 2500,
    }

    # When it is read
    order = Order.of(item)

    # Then it knows its id, its totals (absent ones zero) and what they say
    assert order.order_id == "ord_7"
    assert order.total(Total.REFUNDED) == 2500
    assert order.totals[Total.DISPUTED] == 0
    assert order.financial_status is FinancialStatus.PARTIALLY_REFUNDED


def test_an_orders_partition_holds_its_order_and_entries_not_its_capture_marks() -> None:
    # Given the items one Query of an order's partition returns
    pk = tables.order_pk("ord_2")
    entry = {"effect_key": "k1", "order_id": "ord_2", "outcome": "applied", "amount": 300}
    items: list[dict[str, object]] = [
        {tables.PARTITION_KEY: pk, tables.SORT_KEY: tables.effect_sk("k1"), **entry},
        {tables.PARTITION_KEY: pk, tables.SORT_KEY: tables.capture_sk("stripe", "pi_1")},
        {tables.PARTITION_KEY: pk, tables.SORT_KEY: tables.ORDER_SORT, "paid_total": 300},
    ]

    # When they are read as one partition, and as a partition with no order row
    partition = OrderPartition.of("ord_2", items)
    no_row = OrderPartition.of("ord_2", items[:2])

    # Then the order and its one entry are typed; a missing row reads as nothing counted
    assert partition.books.paid_total == 300
    assert [e.effect_key for e in partition.entries] == ["k1"]
    assert no_row.order is None
    assert no_row.books == Order("ord_2")


def test_an_unmatched_delivery_is_a_parked_one_in_the_unmatched_partition() -> None:
    # Given a parked delivery moved to the unmatched partition
    item = {
        tables.PARTITION_KEY: tables.UNMATCHED_PK,
        tables.SORT_KEY: tables.parked_sk("stripe", "evt_1"),
        "provider": "stripe",
        "event_id": "evt_1",
        "body": "{}",
        "objects": ["pi_1"],
        "waiting_since": 1_780_000_000,
        "unmatched_at": "2026-12-04T10:00:00+00:00",
    }

    # When it is read, Then it says where it is and what it waited for
    parked = Parked.of(item)
    assert parked.unmatched
    assert parked.objects == ["pi_1"]
