"""Reconciliation finds what is wrong with the books, and nothing on a clean run."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import TYPE_CHECKING, Any, cast

import boto3
import pytest

from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext
from functions.outbox.channels import EventBridgeChannel
from functions.outbox.sender import OutboxSender
from functions.reconcile import handler
from functions.reconcile.checkpoint import CHECKPOINT_PK, CHECKPOINT_SK, LAST_RUN_SK
from functions.reconcile.reads import groups
from functions.reconcile.service import Reconciler
from functions.shared import tables
from functions.shared.outbox import outbox_id_for
from tests.support.clients import intercepted
from tests.support.clock import FakeClock
from tests.support.reconciliation import stored
from tests.support.sinks import Sinks
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800


def busy_day(world: World) -> list[str]:
    """Orders with payments, partial refunds, a stale payment and a second payment."""
    orders = []
    for _ in range(3):
        order, intent = stripe.unique("ord"), stripe.unique("pi")
        world.deliver(
            stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, order_id=order)
        )
        world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0))
        world.deliver(stripe.refund_created(intent, stripe.unique("re"), 500, T0 + 90))
        world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 700, T0 + 120))
        orders.append(order)
    return orders


def send_everything(world: World, clock: FakeClock) -> None:
    sinks = _sinks()
    sender = OutboxSender(
        world.dynamodb,
        TABLES.outbox,
        [EventBridgeChannel(boto3.client("events"), sinks.bus_name)],
        clock,
    )
    for item in world.outbox():
        sender.deliver(item["outbox_id"], only_if_due=False)


@cache
def _sinks() -> Sinks:
    return Sinks()


@pytest.fixture(autouse=True)
def _fresh_sinks() -> Iterator[None]:
    """Each test gets its own moto, so its own event bus, created once however often it sends."""
    _sinks.cache_clear()
    yield
    _sinks.cache_clear()


def test_clean_run_finds_nothing(world: World, clock: FakeClock) -> None:
    # Given a day of deliveries, all notified
    orders = busy_day(world)
    send_everything(world, clock)
    clock.advance(2 * 3600)

    # When reconciliation runs
    report = Reconciler(world.dynamodb, TABLES, clock).run()

    # Then the books balance and nothing is stuck
    assert report.mismatches == []
    assert (report.orders_checked, report.outbox_items_checked) == (
        len(orders),
        4 * len(orders),  # the stale payment of each order is announced too, flagged late
    )


def test_unbalanced_order_missing_outbox_item_and_stuck_item_are_found(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given three orders, each broken a different way
    unbalanced, missing, stuck = (stripe.unique("ord") for _ in range(3))
    for order in (unbalanced, missing, stuck):
        world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    send_everything(world, clock)
    dynamodb.update_item(
        TableName=TABLES.ledger,
        Key={"pk": {"S": tables.order_pk(unbalanced)}, "sk": {"S": tables.ORDER_SORT}},
        UpdateExpression="ADD paid_total :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    [missing_item] = world.outbox(missing)
    dynamodb.delete_item(
        TableName=TABLES.outbox, Key={"outbox_id": {"S": missing_item["outbox_id"]}}
    )
    stuck_effect = world.deliver(
        stripe.refund_created(
            stripe.unique("pi"), stripe.unique("re"), 100, T0 + 60, order_id=stuck
        )
    )
    assert stuck_effect.effect_key
    clock.advance(2 * 3600)

    # When reconciliation runs
    report = Reconciler(world.dynamodb, TABLES, clock).run()

    # Then each is reported with the order to investigate
    found = sorted((m.kind, m.order_id) for m in report.mismatches)
    assert found == sorted(
        [
            ("unbalanced_total", unbalanced),
            ("missing_outbox_item", missing),
            ("stuck_outbox_item", stuck),
        ]
    )
    stuck_detail = next(m.detail for m in report.mismatches if m.kind == "stuck_outbox_item")
    assert outbox_id_for(stuck_effect.effect_key) in stuck_detail


def test_handler_publishes_mismatch_metrics_by_kind_including_zero(
    world: World,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock.now = time.time() - 60  # the deployed handler reads the real clock; past settling
    monkeypatch.setenv("LEDGER_TABLE", TABLES.ledger)
    monkeypatch.setenv("OUTBOX_TABLE", TABLES.outbox)
    handler.reconciler.cache_clear()
    world.deliver(
        stripe.payment_intent_succeeded(stripe.unique("ord"), stripe.unique("pi"), 5000, T0)
    )

    context = FakeLambdaContext(function_name="umavez-reconciliation")
    planned = handler.lambda_handler({"step": "plan"}, context)
    totals = []
    for unit in planned["units"]:
        state = {"step": "check", "unit": unit}
        while not (state := handler.lambda_handler(state, context))["done"]:
            pass
        totals.append(state["totals"])
    capsys.readouterr()  # (the plan's and the units' own metrics)
    result = handler.lambda_handler(
        {"step": "finish", "run": planned["run"], "totals": totals}, context
    )
    handler.reconciler.cache_clear()

    [emf] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    per_kind = {kind: emf[f"mismatches_{kind}"] for kind in handler.MISMATCH_KINDS}
    assert per_kind == {kind: [0.0] for kind in handler.MISMATCH_KINDS}
    assert emf["reconciliation_mismatches"] == [0.0]
    assert result == {"orders_checked": 1, "mismatches": {}}


def test_late_entry_without_its_announcement_and_a_reversal_off_the_books_are_found(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given an order whose late payment lost its outbox item, and one whose refunded total
    # ignores the refund's reversal
    late, reversed_off = stripe.unique("ord"), stripe.unique("ord")
    intent = stripe.unique("pi")
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 100, T0 + 60, order_id=late))
    stale = world.deliver(stripe.payment_intent_succeeded(late, intent, 5000, T0))
    assert stale.effect_key
    dynamodb.delete_item(
        TableName=TABLES.outbox, Key={"outbox_id": {"S": outbox_id_for(stale.effect_key)}}
    )
    intent, charge, refund = stripe.unique("pi"), stripe.unique("ch"), stripe.unique("re")
    world.deliver(stripe.payment_intent_succeeded(reversed_off, intent, 5000, T0, charge))
    world.deliver(stripe.refund_created(intent, refund, 2000, T0 + 60, charge))
    world.deliver(stripe.refund_failed(intent, refund, 2000, T0 + 120, charge))
    dynamodb.update_item(
        TableName=TABLES.ledger,
        Key={"pk": {"S": tables.order_pk(reversed_off)}, "sk": {"S": tables.ORDER_SORT}},
        UpdateExpression="ADD refunded_total :back",
        ExpressionAttributeValues={":back": {"N": "2000"}},
    )
    send_everything(world, clock)
    clock.advance(60)  # past the settle margin: the run covers changes until now - 5 s

    # When reconciliation runs
    report = Reconciler(world.dynamodb, TABLES, clock).run()

    # Then both are reported
    assert sorted((m.kind, m.order_id) for m in report.mismatches) == sorted(
        [("missing_outbox_item", late), ("unbalanced_total", reversed_off)]
    )


class TornReads:
    """A DynamoDB client whose first Query of one order lands in the middle of a concurrent
    transaction, as a read-committed Query can: the order's totals already include a refund
    the entries it returned do not show yet (the refund commits while the Query pages)."""

    def __init__(self, dynamodb: DynamoDBClient, order_id: str, write: Callable[[], None]):
        self._db: Any = dynamodb
        self._pk = tables.order_pk(order_id)
        self._write = write
        self.torn = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def get_paginator(self, operation: str) -> Any:
        real = self._db.get_paginator(operation)
        if operation != "query":
            return real
        reads = self

        class Paginator:
            def paginate(self, **query: Any) -> Iterator[dict[str, Any]]:
                pages = list(real.paginate(**query))
                target = query.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S")
                if target != reads._pk or reads.torn:
                    return iter(pages)
                reads.torn += 1
                reads._write()  # commits between the Query's read of the entries and the order
                fresh = reads._db.get_item(
                    TableName=TABLES.ledger,
                    Key={"pk": {"S": reads._pk}, "sk": {"S": tables.ORDER_SORT}},
                    ConsistentRead=True,
                )["Item"]
                items = [
                    fresh if item["sk"]["S"] == tables.ORDER_SORT else item
                    for page in pages
                    for item in page["Items"]
                ]
                return iter([{"Items": items}])

        return Paginator()


def test_a_write_landing_between_the_reads_is_not_reported(world: World, clock: FakeClock) -> None:
    # Given a paid order, all notified, and a refund that commits while reconciliation reads
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0))
    send_everything(world, clock)
    clock.advance(600)

    def refund_lands() -> None:
        # Stamped inside the run's window (a transaction built before the settle margin and
        # committed during the read): a change stamped after it would be the next run's
        clock.advance(-10)
        try:
            world.deliver(stripe.refund_created(intent, stripe.unique("re"), 1500, T0 + 60))
        finally:
            clock.advance(10)

    torn = TornReads(world.dynamodb, order, refund_lands)
    naps: list[float] = []

    # When reconciliation runs through that torn read
    report = Reconciler(cast("DynamoDBClient", torn), TABLES, clock, sleep=naps.append).run()

    # Then the candidate is read again after the settle margin and nothing false is reported
    assert torn.torn == 1
    assert report.mismatches == []
    assert (report.cleared_on_recheck, naps) == (1, [5.0])


def test_a_real_mismatch_survives_the_recheck(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given an order whose recorded total was changed behind the ledger's back
    order = stripe.unique("ord")
    world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    send_everything(world, clock)
    dynamodb.update_item(
        TableName=TABLES.ledger,
        Key={"pk": {"S": tables.order_pk(order)}, "sk": {"S": tables.ORDER_SORT}},
        UpdateExpression="ADD paid_total :one",
        ExpressionAttributeValues={":one": {"N": "1"}},
    )
    clock.advance(600)

    # When reconciliation runs
    report = Reconciler(world.dynamodb, TABLES, clock).run()

    # Then the re-read confirms it and it is reported
    assert [(m.kind, m.order_id) for m in report.mismatches] == [("unbalanced_total", order)]
    assert report.cleared_on_recheck == 0


def test_each_run_checks_only_the_orders_changed_since_the_last(
    world: World, clock: FakeClock
) -> None:
    # Given three orders checked by a first run
    orders = busy_day(world)
    send_everything(world, clock)
    clock.advance(600)
    first = Reconciler(world.dynamodb, TABLES, clock).run()

    # When one of them is refunded two hours later and reconciliation runs again
    clock.advance(2 * 3600)
    world.deliver(
        stripe.refund_created(
            stripe.unique("pi"), stripe.unique("re"), 100, int(clock.now), order_id=orders[1]
        )
    )
    send_everything(world, clock)
    clock.advance(600)
    second = Reconciler(world.dynamodb, TABLES, clock).run()
    third = Reconciler(world.dynamodb, TABLES, clock).run()

    # Then the second run reads that order only, the third reads none, and both are clean
    assert (first.orders_checked, second.orders_checked, third.orders_checked) == (3, 1, 0)
    assert first.mismatches == second.mismatches == third.mismatches == []
    assert second.checked_from == first.checked_until


def test_a_run_reads_the_outbox_only_for_the_orders_in_its_window(
    world: World, clock: FakeClock
) -> None:
    # Given three orders checked by a first run, and one of them refunded later in the hour
    orders = busy_day(world)
    send_everything(world, clock)
    clock.advance(600)
    Reconciler(world.dynamodb, TABLES, clock).run()
    clock.advance(600)
    world.deliver(
        stripe.refund_created(
            stripe.unique("pi"), stripe.unique("re"), 100, int(clock.now), order_id=orders[2]
        )
    )
    send_everything(world, clock)
    clock.advance(60)
    outbox_reads: list[str] = []

    def record_outbox_reads(params: dict[str, Any], **_: Any) -> None:
        keys = params["RequestItems"].get(TABLES.outbox, {}).get("Keys", [])
        outbox_reads.extend(key[tables.OUTBOX_KEY]["S"] for key in keys)

    world.dynamodb.meta.events.register(
        "provide-client-params.dynamodb.BatchGetItem", record_outbox_reads
    )
    try:
        # When reconciliation runs again within the same hour (the index knows the hour only)
        second = Reconciler(world.dynamodb, TABLES, clock).run()
    finally:
        world.dynamodb.meta.events.unregister(
            "provide-client-params.dynamodb.BatchGetItem", record_outbox_reads
        )

    # Then it reads the hour's three orders, checks the refunded one, and reads that one's
    # outbox items only
    refunded = {outbox_id_for(e.effect_key) for e in world.effects(orders[2])}
    assert (second.orders_read, second.orders_checked, second.mismatches) == (3, 1, [])
    assert outbox_reads
    assert set(outbox_reads) <= refunded


def test_an_item_whose_stream_try_was_lost_is_reported_once_in_steady_state(
    world: World, clock: FakeClock
) -> None:
    # Given reconciliation running every hour, and then a payment whose outbox item never had
    # its stream try (never sent, never in the due index)
    clock.advance(600)
    Reconciler(world.dynamodb, TABLES, clock).run()
    clock.advance(1800)
    order = stripe.unique("ord")
    paid = world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    assert paid.effect_key

    # When reconciliation goes on running every hour for six hours
    reports = []
    for _ in range(6):
        clock.advance(3600)
        reports.append(Reconciler(world.dynamodb, TABLES, clock).run())

    # Then the item is reported stuck once, past its deadline, with the command that repairs it
    stuck = [(n, m) for n, r in enumerate(reports) for m in r.mismatches]
    assert [(n, m.kind, m.order_id) for n, m in stuck] == [(1, "stuck_outbox_item", order)]
    assert f"umavez outbox revive {outbox_id_for(paid.effect_key)}" in stuck[0][1].detail


def paid_and_notified(world: World, clock: FakeClock) -> tuple[str, str]:
    """An order paid once, its notification sent: the order and the payment's effect key."""
    order = stripe.unique("ord")
    paid = world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    assert paid.effect_key
    send_everything(world, clock)
    return order, paid.effect_key


def test_sent_notifications_past_their_retention_are_not_missing(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a paid order whose sent notification expired (TTL) after the 90-day retention
    order, _ = paid_and_notified(world, clock)
    [item] = world.outbox(order)
    assert item[tables.EXPIRES_AT] == int(clock.now) + 90 * 86_400
    clock.advance(91 * 86_400)
    dynamodb.delete_item(TableName=TABLES.outbox, Key={"outbox_id": {"S": item["outbox_id"]}})

    # When the full audit runs
    report = Reconciler(world.dynamodb, TABLES, clock).audit()

    # Then nothing is missing: the entry stays (it makes a resend a duplicate), the item is gone
    assert report.mismatches == []
    assert world.order(order).paid_total == 5000


def test_audit_finds_an_outbox_item_whose_entry_is_gone(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a sent notification whose entry was deleted from the ledger by hand
    order, effect_key = paid_and_notified(world, clock)
    dynamodb.delete_item(
        TableName=TABLES.ledger,
        Key={"pk": {"S": tables.order_pk(order)}, "sk": {"S": tables.effect_sk(effect_key)}},
    )
    clock.advance(600)

    # When the full audit runs
    report = Reconciler(world.dynamodb, TABLES, clock).audit()

    # Then the orphan item and the total its entry no longer explains are both reported
    assert sorted((m.kind, m.order_id) for m in report.mismatches) == [
        ("unbalanced_total", order),
        ("unexpected_outbox_item", order),
    ]


def test_audit_records_of_no_change_expire_and_the_memory_of_effects_does_not(
    world: World, clock: FakeClock
) -> None:
    # Given a paid order, its payment delivered twice, and a delivery that changes nothing
    order = stripe.unique("ord")
    body = stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0)
    world.deliver(body)
    world.deliver(body)
    world.deliver(
        stripe.checkout_session("checkout.session.expired", order, None, stripe.unique("cs"), T0)
    )

    # Then the audit record of the delivery that changed nothing expires after the retention
    [audit] = world.deliveries()
    assert audit.outcome == "ignored"
    assert audit.expires_at == int(clock.now) + 90 * 86_400
    # And the order and its effect key never do: they make the next resend a duplicate
    partition = [i for i in world.snapshot()[TABLES.ledger] if i["pk"] == tables.order_pk(order)]
    assert len(partition) == 2
    assert all(tables.EXPIRES_AT not in item for item in partition)


def total_changed_by_hand(dynamodb: DynamoDBClient, order_id: str) -> None:
    dynamodb.update_item(
        TableName=TABLES.ledger,
        Key={"pk": {"S": tables.order_pk(order_id)}, "sk": {"S": tables.ORDER_SORT}},
        UpdateExpression="SET paid_total = :n",
        ExpressionAttributeValues={":n": {"N": "1"}},
    )


def test_an_audit_reading_orders_side_by_side_reports_what_one_reading_in_turn_does(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a busy day, sent, then one entry deleted and one total changed by hand
    orders = busy_day(world) + busy_day(world)
    send_everything(world, clock)
    *_, last = world.effects(orders[0])
    dynamodb.delete_item(
        TableName=TABLES.ledger,
        Key={
            "pk": {"S": tables.order_pk(orders[0])},
            "sk": {"S": tables.effect_sk(last.effect_key)},
        },
    )
    total_changed_by_hand(dynamodb, orders[1])
    clock.advance(600)
    serial = Reconciler(world.dynamodb, TABLES, clock).audit()
    # (the first four orders' reads wait for each other: only reads side by side get past)
    together, reads = threading.Barrier(4, timeout=10), itertools.count()

    def first_reads_meet(**_: Any) -> None:
        if next(reads) < 4:
            with contextlib.suppress(threading.BrokenBarrierError):
                together.wait()

    # (the client itself, not the world's, which lets one call through at a time)
    dynamodb.meta.events.register("before-call.dynamodb.BatchGetItem", first_reads_meet)
    try:
        # When the audit reads four orders' outbox items at a time (one order a read)
        parallel = Reconciler(dynamodb, TABLES, clock).audit(workers=4, outbox_keys_per_read=1)
    finally:
        dynamodb.meta.events.unregister("before-call.dynamodb.BatchGetItem", first_reads_meet)

    # Then it read them side by side and reports the same mismatches and counts
    assert not together.broken
    assert sorted((m.kind, m.order_id) for m in parallel.mismatches) == sorted(
        (m.kind, m.order_id) for m in serial.mismatches
    )
    assert {m.order_id for m in serial.mismatches} == {orders[0], orders[1]}
    assert (parallel.orders_checked, parallel.outbox_items_checked) == (
        serial.orders_checked,
        serial.outbox_items_checked,
    )


def test_an_audit_reads_the_tables_page_by_page_not_order_by_order(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given two busy days, sent, and one total changed by hand
    orders = busy_day(world) + busy_day(world)
    send_everything(world, clock)
    total_changed_by_hand(dynamodb, orders[2])
    clock.advance(600)
    calls: list[tuple[str, dict[str, Any]]] = []

    def count(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append((model.name, params))

    # When the full audit runs
    world.dynamodb.meta.events.register("before-parameter-build.dynamodb", count)
    try:
        report = Reconciler(world.dynamodb, TABLES, clock).audit()
    finally:
        world.dynamodb.meta.events.unregister("before-parameter-build.dynamodb", count)

    # Then it read every order (one mismatch, read again whole before it was reported) ...
    assert report.orders_checked == len(orders)
    assert [(m.kind, m.order_id) for m in report.mismatches] == [("unbalanced_total", orders[2])]
    # ... from one consistent scan of the ledger and one read of all the orders' outbox items:
    # the only order read on its own (with its outbox items) is the one found wrong
    ledger_scans = [
        p for name, p in calls if name == "Scan" and p.get("TableName") == TABLES.ledger
    ]
    assert ledger_scans
    assert all(p.get("ConsistentRead") for p in ledger_scans)
    order_queries = [
        p["ExpressionAttributeValues"][":pk"]["S"]
        for name, p in calls
        if name == "Query"
        and p["ExpressionAttributeValues"].get(":pk", {}).get("S", "").startswith("ORDER#")
    ]
    assert order_queries == [tables.order_pk(orders[2])]
    outbox_reads = [
        p for name, p in calls if name == "BatchGetItem" and TABLES.outbox in p["RequestItems"]
    ]
    assert len(outbox_reads) == 2


def test_an_audit_holds_at_most_one_reads_worth_of_orders_when_there_is_nothing_to_read() -> None:
    # Given 250 orders past the retention: none has an outbox item left to read
    orders = [(f"ord_{n}", [{"pk": f"ORDER#ord_{n}", "sk": tables.ORDER_SORT}]) for n in range(250)]

    # When the audit gathers them for its reads of 100 keys
    gathered = list(groups(orders, lambda _items: [], keys_per_read=100))

    # Then no group holds more orders than a read's keys: memory stays flat
    assert [len(group) for group in gathered] == [100, 100, 50]


LEDGER_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})


def ledger_reads(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, bool]]:
    """Each read of the ledger table itself (not its index) and whether it was consistent."""
    reads = []
    for name, params in calls:
        if name == "BatchGetItem" and TABLES.ledger in params["RequestItems"]:
            reads.append((name, bool(params["RequestItems"][TABLES.ledger].get("ConsistentRead"))))
        elif (
            name in LEDGER_READS
            and params.get("TableName") == TABLES.ledger
            and "IndexName" not in params
        ):
            reads.append((name, bool(params.get("ConsistentRead"))))
    return reads


def partition(query: dict[str, Any]) -> str:
    return str(query.get("ExpressionAttributeValues", {}).get(":pk", {}).get("S", ""))


def test_every_read_of_the_ledger_is_consistent(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given a busy day, sent, and one order whose total was changed by hand: it looks wrong,
    # so each run reads it twice (a lagging read would report a write the ledger already has,
    # or miss one that makes an order wrong)
    orders = busy_day(world)
    send_everything(world, clock)
    total_changed_by_hand(dynamodb, orders[0])
    clock.advance(600)
    calls: list[tuple[str, dict[str, Any]]] = []

    def record(model: Any, params: dict[str, Any], **_: Any) -> None:
        calls.append((model.name, params))

    # When the scheduled run and the full audit read the tables
    world.dynamodb.meta.events.register("provide-client-params.dynamodb", record)
    try:
        run = Reconciler(world.dynamodb, TABLES, clock).run()
        audit = Reconciler(world.dynamodb, TABLES, clock).audit()
    finally:
        world.dynamodb.meta.events.unregister("provide-client-params.dynamodb", record)

    # Then both found the order, read again before it was reported ...
    wrong = [("unbalanced_total", orders[0])]
    assert [(m.kind, m.order_id) for m in run.mismatches] == wrong
    assert [(m.kind, m.order_id) for m in audit.mismatches] == wrong
    order_reads = [
        p for name, p in calls if name == "Query" and partition(p) == tables.order_pk(orders[0])
    ]
    # (the run's first read and re-read, the audit's re-read: its first read is the scan)
    assert [p.get("ConsistentRead") for p in order_reads] == [True, True, True]
    # ... and every read of the ledger itself asked for a consistent one (its index cannot)
    reads = ledger_reads(calls)
    assert {name for name, _ in reads} == LEDGER_READS
    assert [name for name, consistent in reads if not consistent] == []
    index_reads = [p for name, p in calls if name == "Query" and "IndexName" in p]
    assert index_reads
    assert not any(p.get("ConsistentRead") for p in index_reads)


def test_overlapping_runs_never_move_the_checkpoint_back(world: World, clock: FakeClock) -> None:
    # Given a first run's checkpoint, and a run that starts from it
    busy_day(world)
    send_everything(world, clock)
    clock.advance(600)
    Reconciler(world.dynamodb, TABLES, clock).run()
    clock.advance(3600)
    later: list[Any] = []

    def another_run_finishes_first(operation: str, call: Callable[[], Any]) -> Any:
        # ... and a second run (a manual one beside the schedule) that starts ten minutes
        # later and saves its checkpoint while the first is about to save its own
        if operation == "put_item" and not later:
            clock.advance(600)
            later.append(Reconciler(world.dynamodb, TABLES, clock).run())
        return call()

    overlapped = intercepted(world.dynamodb, another_run_finishes_first)

    # When the first run saves after the second one did
    earlier = Reconciler(overlapped, TABLES, clock).run()

    # Then the later checkpoint stands: the earlier run's save is refused, not written over it
    [second] = later
    assert second.checkpoint_saved
    assert not earlier.checkpoint_saved
    assert earlier.checked_until < second.checked_until
    stored = world.dynamodb.get_item(
        TableName=TABLES.ledger,
        Key={tables.PARTITION_KEY: {"S": CHECKPOINT_PK}, tables.SORT_KEY: {"S": CHECKPOINT_SK}},
        ConsistentRead=True,
    )["Item"]
    assert stored["checked_until"]["S"] == second.checked_until
    # And so does its summary: the refused run's is not shown over it
    assert last_run(world.dynamodb)["checked_until"] == second.checked_until


def last_run(dynamodb: DynamoDBClient) -> dict[str, Any]:
    return stored(dynamodb, LAST_RUN_SK)


def test_each_run_leaves_its_summary_and_says_when_it_stopped_at_its_cap(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given three orders changed in one hour, one of them unbalanced
    orders = busy_day(world)
    send_everything(world, clock)
    total_changed_by_hand(dynamodb, orders[0])
    clock.advance(2 * 3600)

    # When a run capped below the backlog runs, then an uncapped one
    capped = Reconciler(world.dynamodb, TABLES, clock, max_orders_per_run=1).run()
    behind = last_run(dynamodb)
    clock.advance(60)
    Reconciler(world.dynamodb, TABLES, clock).run()
    caught_up = last_run(dynamodb)

    # Then the capped run finished its hour, found the mismatch and says it is behind; the
    # next one resumes after that hour and says it caught up
    assert (capped.caught_up, behind["caught_up"], caught_up["caught_up"]) == (False, False, True)
    assert (behind["orders_checked"], behind["mismatches"]) == (3, {"unbalanced_total": 1})
    assert (caught_up["orders_checked"], caught_up["mismatches"]) == (0, {})
    assert caught_up["checked_from"] == behind["checked_until"] < caught_up["checked_until"]
    assert caught_up["ran_at"] > behind["ran_at"]
    # And what the first found stays beside the clean summary: no later run checks that order
    assert (caught_up["last_mismatch_at"], caught_up["last_mismatches"]) == (
        behind["ran_at"],
        {"unbalanced_total": 1},
    )
