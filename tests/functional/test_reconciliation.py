"""Reconciliation finds what is wrong with the books, and nothing on a clean run."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

import boto3
import pytest

from functions.outbox.channels import EventBridgeChannel
from functions.outbox.sender import OutboxSender
from functions.reconcile import handler
from functions.reconcile.service import Reconciler
from functions.shared import tables
from functions.shared.outbox import outbox_id_for
from local_stack import stripe_events as stripe
from tests.conftest import TABLES
from tests.support.clock import FakeClock
from tests.support.lambda_events import FakeLambdaContext
from tests.support.sinks import Sinks
from tests.support.world import World

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
    sinks = Sinks()
    sender = OutboxSender(
        world.dynamodb,
        TABLES.outbox,
        [EventBridgeChannel(boto3.client("events"), sinks.bus_name)],
        clock,
    )
    for item in world.outbox():
        sender.deliver(item["outbox_id"], only_if_due=False)


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
    clock.now = time.time()  # the deployed handler reads the real clock
    monkeypatch.setenv("LEDGER_TABLE", TABLES.ledger)
    monkeypatch.setenv("OUTBOX_TABLE", TABLES.outbox)
    handler.reconciler.cache_clear()
    world.deliver(
        stripe.payment_intent_succeeded(stripe.unique("ord"), stripe.unique("pi"), 5000, T0)
    )

    result = handler.lambda_handler({}, FakeLambdaContext(function_name="umavez-reconciliation"))
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

    # When reconciliation runs
    report = Reconciler(world.dynamodb, TABLES, clock).run()

    # Then both are reported
    assert sorted((m.kind, m.order_id) for m in report.mismatches) == sorted(
        [("missing_outbox_item", late), ("unbalanced_total", reversed_off)]
    )
