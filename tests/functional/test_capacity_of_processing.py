"""What process's own DynamoDB requests consume, by hand: the request bodies are captured from
the process function against moto, the items before and after read from moto's tables, and
the accounting (`devstack/capacity.py`) must find the units worked out here."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from devstack.capacity import Accounting, TableSchema, Units, item_size
from fixtures import stripe
from functions.shared import tables
from functions.shared.tables import create_table_requests
from tests.support.clock import FakeClock
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800
LEDGER, OUTBOX = TABLES.ledger, TABLES.outbox
SCHEMAS = {
    r["TableName"]: TableSchema.from_create_request(r) for r in create_table_requests(TABLES)
}


class TableStore:
    """Both tables as they were at one moment (a scan of moto's), switchable to another."""

    def __init__(self, _: DynamoDBClient) -> None:
        self._dynamodb = boto3.client("dynamodb")  # its own: its scans are not captured
        self.items: dict[tuple[str, str], dict[str, Any]] = {}
        self.load()

    def load(self) -> None:
        self.items = {}
        for table in (LEDGER, OUTBOX):
            for page in self._dynamodb.get_paginator("scan").paginate(TableName=table):
                for item in page["Items"]:
                    self.items[(table, self._key(table, item))] = dict(item)

    def _key(self, table: str, item: Any) -> str:
        return json.dumps([item[k] for k in SCHEMAS[table].keys], sort_keys=True)

    def schema(self, table: str) -> TableSchema:
        return SCHEMAS[table]

    def item(self, table: str, key: Any) -> dict[str, Any] | None:
        return self.items.get((table, self._key(table, key)))


class Captured:
    """Every DynamoDB request a client sends, as its JSON body, and its error code if any."""

    def __init__(self, dynamodb: DynamoDBClient) -> None:
        self.requests: list[tuple[str, dict[str, Any], str | None]] = []
        dynamodb.meta.events.register("before-call.dynamodb", self._before)
        dynamodb.meta.events.register("after-call.dynamodb", self._after)

    def _before(self, model: Any, params: Any, **_: Any) -> None:
        self.requests.append((model.name, json.loads(params["body"]), None))

    def _after(self, parsed: Any, **_: Any) -> None:
        name, body, _error = self.requests[-1]
        self.requests[-1] = (name, body, parsed.get("Error", {}).get("Code"))

    def take(self) -> list[tuple[str, dict[str, Any], str | None]]:
        taken, self.requests = self.requests, []
        return taken


@pytest.fixture
def captured(dynamodb: DynamoDBClient) -> Captured:
    return Captured(dynamodb)


def billed(
    request: tuple[str, dict[str, Any], str | None], before: TableStore, after: TableStore
) -> Units:
    """The request's units, request units only (no item counts)."""
    operation, body, error = request
    state = after.items
    before_items = dict(before.items)
    store = before
    accounting = Accounting(store)
    pending = accounting.before(operation, body)
    store.items = state
    units = accounting.after(pending, error is None, {"__type": f"x#{error}"} if error else {})
    before.items = before_items
    return Units({k: v for k, v in units.items() if k.split(":")[0].startswith(("wru", "rru"))})


def _ref(provider: str, ref: str) -> dict[str, Any]:
    return {
        tables.PARTITION_KEY: {"S": tables.ref_pk(provider, ref)},
        tables.SORT_KEY: {"S": "REF"},
    }


def test_a_new_payment_reads_four_keys_then_writes_five_items_under_a_kilobyte_and_one_index_entry(
    world: World, dynamodb: DynamoDBClient, captured: Captured
) -> None:
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    before = TableStore(dynamodb)

    world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0, charge))

    after = TableStore(dynamodb)
    read, request = captured.take()
    # The read first, eventually consistent: the effect key, the order, the two objects to
    # bind; none exists yet (half a unit each)
    assert read[0] == "BatchGetItem"
    [keys] = read[1]["RequestItems"].values()
    assert (keys["ConsistentRead"], len(keys["Keys"])) == (False, 4)
    assert billed(read, before, after) == Units({f"rru_eventual:{LEDGER}": 2})
    operation, body, _ = request
    assert operation == "TransactWriteItems"
    actions = [next(iter(entry)) for entry in body["TransactItems"]]
    # The effect key, the order, the outbox item, the PaymentIntent's and the charge's bindings
    assert actions == ["Put", "Update", "Put", "Put", "Put"]
    # A binding, by hand: pk "REF#stripe#<id>", sk "REF", ref <id>, order_id <order>
    binding = after.item(LEDGER, _ref("stripe", intent))
    assert item_size(binding) == (2 + 11 + len(intent)) + (2 + 3) + (3 + len(intent)) + (
        8 + len(order)
    )
    # Every item the transaction wrote is under 1 KB: 2 WRU each (prepare and commit)
    written = [
        after.item(LEDGER if i != 2 else OUTBOX, _key_of(e))
        for i, e in enumerate(body["TransactItems"])
    ]
    assert all(0 < item_size(item) < 1024 for item in written)
    # 4 ledger items x 2, 1 outbox item x 2; the order enters the `changed` index; the outbox
    # item enters no index (the stream's first try sends it)
    assert billed(request, before, after) == Units(
        {
            f"wru_transaction:{LEDGER}": 8,
            f"wru_transaction:{OUTBOX}": 2,
            f"wru_index:{LEDGER}/changed": 1,
        }
    )


def test_a_duplicate_costs_one_read_and_no_transaction(
    world: World, dynamodb: DynamoDBClient, captured: Captured
) -> None:
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    payment = stripe.payment_intent_succeeded(order, intent, 5000, T0, charge)
    world.deliver(payment)
    captured.take()
    before = TableStore(dynamodb)

    world.deliver(payment)

    # Only the read: it finds the effect key, so nothing is written (a cancelled transaction
    # would have cost its five items in full)
    [request] = captured.take()
    assert request[0] == "BatchGetItem"
    assert billed(request, before, TableStore(dynamodb)) == Units({f"rru_eventual:{LEDGER}": 2})
    assert TableStore(dynamodb).items == before.items


def test_a_stale_payment_goes_straight_to_its_own_transaction_without_the_bound_payment(
    world: World, dynamodb: DynamoDBClient, captured: Captured, clock: FakeClock
) -> None:
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(
        stripe.refund_created(intent, stripe.unique("re"), 5000, T0 + 60, charge, order_id=order)
    )
    captured.take()
    clock.advance(1)
    before = TableStore(dynamodb)

    world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0, charge))

    after = TableStore(dynamodb)
    read, superseded, transaction, entries, reopen = captured.take()
    assert (read[0], superseded[0], transaction[2]) == ("BatchGetItem", "Query", None)
    assert (entries[0], reopen[0]) == ("Query", "UpdateItem")
    # The order's entries are queried once before the transaction, on this path only: a stale
    # payment is e-mailed unless a newer movement of its own payment counted (here its refund
    # did). Once more after it: the payment taught the order its customer, and the refund's
    # notification is re-opened if it left without its e-mail (not sent yet here: refused).
    # The order's last event is a later second: no guarded attempt. The key (stale), the
    # order's totals, the late outbox item, the charge's binding (the refund bound the
    # PaymentIntent already), the delivery's audit record
    assert [next(iter(e)) for e in transaction[1]["TransactItems"]] == [
        "Put",
        "Update",
        "Put",
        "Put",
        "Put",
    ]
    # Four ledger items x 2 WRU, the outbox item x 2; the order changed again within its hour:
    # nothing written to the `changed` index
    assert billed(transaction, before, after) == Units(
        {f"wru_transaction:{LEDGER}": 8, f"wru_transaction:{OUTBOX}": 2}
    )


def test_a_refund_reads_its_payments_bindings_then_its_key_and_order_then_writes_three_items(
    world: World, dynamodb: DynamoDBClient, captured: Captured, clock: FakeClock
) -> None:
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0, charge))
    captured.take()
    clock.advance(1)
    before = TableStore(dynamodb)

    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 5000, T0 + 60, charge))

    after = TableStore(dynamodb)
    lookup, read, transaction = captured.take()
    assert (lookup[0], read[0]) == ("BatchGetItem", "BatchGetItem")
    [keys] = lookup[1]["RequestItems"].values()
    assert keys["ConsistentRead"] is True
    assert len(keys["Keys"]) == 2  # the PaymentIntent's and the charge's bindings
    # Two items under 4 KB, strongly consistent: 1 RRU each; then the key and the order,
    # eventually consistent: half a unit each
    assert billed(lookup, before, after) == Units({f"rru_strong:{LEDGER}": 2})
    assert billed(read, before, after) == Units({f"rru_eventual:{LEDGER}": 1})
    # The order changed within its hour again: no index write
    assert billed(transaction, before, after) == Units(
        {f"wru_transaction:{LEDGER}": 4, f"wru_transaction:{OUTBOX}": 2}
    )


def _key_of(entry: dict[str, Any]) -> dict[str, Any]:
    ((kind, action),) = entry.items()
    if kind == "Put":
        return SCHEMAS[action["TableName"]].key_of(action["Item"])
    return dict(action["Key"])
