"""DynamoDB capacity arithmetic, by hand: item sizes, rounding, transactions, indexes, reads."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from devstack.capacity import (
    Accounting,
    Index,
    TableSchema,
    Units,
    index_write_units,
    item_size,
    number_size,
    read_units,
    value_size,
    write_units,
)

TABLE = TableSchema("t", ("pk",), (Index("by_due", ("bucket", "due")),))


class DictStore:
    """The items a request finds, as the test says they are."""

    def __init__(self, *items: dict[str, Any]) -> None:
        self.items = {item["pk"]["S"]: item for item in items}

    def schema(self, table: str) -> TableSchema:
        return TABLE

    def item(self, table: str, key: Any) -> dict[str, Any] | None:
        return self.items.get(key["pk"]["S"])


def s(text: str) -> dict[str, str]:
    return {"S": text}


def n(text: str) -> dict[str, str]:
    return {"N": text}


@pytest.mark.parametrize(
    ("number", "size"),
    [
        ("0", 1),  # no significant digit: 1 byte
        ("5000", 2),  # "5": 1 digit -> 1 + 1
        ("12", 2),
        ("123", 3),  # 3 digits -> 2 + 1
        ("123456", 4),
        ("-0.0012300", 3),  # "123"
        ("1764460800", 5),  # trailing zeros trimmed: "17644608", 8 digits -> 4 + 1
    ],
)
def test_number_size_is_one_byte_per_two_significant_digits_plus_one(
    number: str, size: int
) -> None:
    assert number_size(number) == size


def test_value_sizes_follow_the_documented_rules() -> None:
    assert value_size(s("héllo")) == 6  # UTF-8 bytes
    assert value_size({"B": base64.b64encode(b"\x00\x01\x02").decode()}) == 3  # raw bytes
    assert value_size({"BOOL": True}) == 1
    assert value_size({"NULL": True}) == 1
    assert value_size({"SS": ["ab", "c"]}) == 3  # elements only, no overhead
    assert value_size({"NS": ["12", "5000"]}) == 4  # 2 + 2
    # List: 3 bytes + per element 1 byte + its size: 3 + (1 + 2) + (1 + 1)
    assert value_size({"L": [s("ab"), {"BOOL": False}]}) == 8
    # Map: 3 bytes + per element 1 byte + key + value: 3 + (1 + 1 + 2) + (1 + 2 + 2)
    assert value_size({"M": {"a": s("xy"), "bc": n("12")}}) == 12
    assert value_size({"M": {}}) == 3


def test_item_size_adds_attribute_names_to_values() -> None:
    # "pk" 2 + "ORDER#1" 7, "amount" 6 + 5000 -> 2, "late" 4 + 1
    item = {"pk": s("ORDER#1"), "amount": n("5000"), "late": {"BOOL": False}}
    assert item_size(item) == 9 + 8 + 5
    assert item_size(None) == 0


def test_writes_round_up_to_a_kilobyte_per_item_and_reads_to_four() -> None:
    assert [write_units(size) for size in (0, 1, 1024, 1025, 3000)] == [1, 1, 1, 2, 3]
    assert read_units(0, consistent=True) == 1.0  # a missing item still costs the minimum
    assert read_units(4096, consistent=True) == 1.0
    assert read_units(4097, consistent=True) == 2.0
    assert read_units(4096, consistent=False) == 0.5
    assert read_units(8193, consistent=False) == 1.5


def _due(bucket: str | None, due: str | None, **rest: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"pk": s("obx_1"), **rest}
    if bucket is not None:
        item["bucket"] = s(bucket)
    if due is not None:
        item["due"] = n(due)
    return item


def test_index_writes_one_to_enter_one_to_leave_two_to_move_none_to_stay() -> None:
    index = TABLE.indexes[0]
    pending = _due("due#1", "100", status=s("pending"))
    assert index_write_units(None, pending, index, TABLE) == 1  # enters
    assert index_write_units(pending, _due(None, None, status=s("sent")), index, TABLE) == 1
    assert index_write_units(pending, None, index, TABLE) == 1  # deleted
    moved = _due("due#1", "160", status=s("sending"))
    assert index_write_units(pending, moved, index, TABLE) == 2  # key changed: delete + put
    # Keys only: a non-key attribute changing does not touch the index entry.
    assert index_write_units(pending, _due("due#1", "100", status=s("x")), index, TABLE) == 0
    assert index_write_units(None, {"pk": s("a")}, index, TABLE) == 0  # never in it (sparse)


def test_an_index_projecting_an_attribute_is_written_when_only_that_attribute_changes() -> None:
    index = Index("by_due", ("bucket", "due"), "INCLUDE", ("status",))
    before = _due("due#1", "100", status=s("pending"))
    assert index_write_units(before, _due("due#1", "100", status=s("sending")), index, TABLE) == 1
    assert index_write_units(before, _due("due#1", "100", status=s("pending")), index, TABLE) == 0


def test_an_index_entry_larger_than_a_kilobyte_costs_more_than_one_unit() -> None:
    index = Index("all", ("bucket", "due"), "ALL")
    big = _due("due#1", "100", body=s("x" * 1000))  # 1000 + names + 100 overhead > 1 KB
    assert index_write_units(None, big, index, TABLE) == 2


def test_a_transaction_costs_two_units_per_kilobyte_per_item_rounded_per_item() -> None:
    store = DictStore()
    a, b = {"pk": s("a"), "x": s("y" * 1500)}, {"pk": s("b")}
    request = {"TransactItems": [{"Put": {"TableName": "t", "Item": i}} for i in (a, b)]}
    accounting = Accounting(store)
    pending = accounting.before("TransactWriteItems", request)
    store.items = {"a": a, "b": b}

    units = accounting.after(pending, ok=True, response={})

    # a: 3 + 1501 = 1504 bytes -> 2 KB -> 4 WRU; b: 3 bytes -> 1 KB -> 2 WRU
    # (rounded per item: not 1.5 KB for both, 4)
    assert units["wru_transaction:t"] == 6
    assert units["items_written:t"] == 2


def test_a_cancelled_transaction_still_costs_its_writes_and_its_condition_check_reads() -> None:
    existing = {"pk": s("a"), "x": s("y" * 2000)}  # 3 + 2001 = 2004 bytes
    store = DictStore(existing, {"pk": s("c"), "outcome": s("applied")})
    request = {
        "TransactItems": [
            {"Put": {"TableName": "t", "Item": {"pk": s("a")}, "ConditionExpression": "..."}},
            {"Update": {"TableName": "t", "Key": {"pk": s("b")}, "UpdateExpression": "..."}},
            {"ConditionCheck": {"TableName": "t", "Key": {"pk": s("c")}}},
        ]
    }
    accounting = Accounting(store)
    pending = accounting.before("TransactWriteItems", request)

    units = accounting.after(
        pending, ok=False, response={"__type": "x#TransactionCanceledException"}
    )

    # Put: the larger of the existing 2004 bytes and the attempted 3 -> 2 KB x 2 = 4;
    # Update of a missing item: 1 KB x 2 = 2; the check: a transactional read, 2 RRU.
    assert units == Units(
        {"wru_transaction:t": 6, "rru_transaction:t": 2, "cancelled_transactions:t": 1}
    )


def test_an_update_is_billed_on_the_larger_of_the_item_before_and_after() -> None:
    store = DictStore({"pk": s("a"), "x": s("y" * 1500)})
    request = {"TableName": "t", "Key": {"pk": s("a")}, "UpdateExpression": "REMOVE x"}
    accounting = Accounting(store)
    pending = accounting.before("UpdateItem", request)
    store.items = {"a": {"pk": s("a")}}

    units = accounting.after(pending, ok=True, response={})

    assert units["wru_standard:t"] == 2  # 1504 bytes before, 3 after


def test_a_failed_conditional_write_costs_at_least_one_unit() -> None:
    accounting = Accounting(DictStore())
    request = {"TableName": "t", "Key": {"pk": s("a")}, "ConditionExpression": "..."}
    pending = accounting.before("UpdateItem", request)
    failed = {"__type": "x#ConditionalCheckFailedException"}
    assert accounting.after(pending, ok=False, response=failed) == Units({"wru_standard:t": 1})


def test_reads_consistent_and_eventual_per_item_and_per_query_page() -> None:
    five_kb = {"pk": s("a"), "x": s("y" * 5000)}
    accounting = Accounting(DictStore(five_kb))
    get = {"TableName": "t", "Key": {"pk": s("a")}, "ConsistentRead": True}
    batch = {"RequestItems": {"t": {"Keys": [{"pk": s("a")}, {"pk": s("missing")}]}}}
    query = {"TableName": "t", "IndexName": "by_due", "KeyConditionExpression": "..."}
    page = {"Items": [{"pk": s("x" * 3000)}, {"pk": s("y" * 3000)}], "Count": 2}

    def units(operation: str, request: dict[str, Any], response: Any = None) -> Units:
        return accounting.after(accounting.before(operation, request), True, response or {})

    assert units("GetItem", get) == Units({"rru_strong:t": 2})  # 5 KB -> 8 KB
    # Eventually consistent, each item on its own: 5 KB -> 1.0; missing -> 0.5
    assert units("BatchGetItem", batch) == Units({"rru_eventual:t": 1.5})
    # A page is rounded as a whole: 6004 bytes -> 8 KB -> 2 units x 0.5
    assert units("Query", query, page) == Units({"rru_eventual:t/by_due": 1.0})
