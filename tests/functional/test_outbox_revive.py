"""Reviving dead outbox items: same item, same key, a fresh give-up age, sent by the sweeper."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import boto3
import pytest

from devstack.faults import FaultyChannel
from fixtures import stripe
from functions.outbox.channels import Channel, EventBridgeChannel, SesEmailChannel
from functions.outbox.revive import OutboxReviver, Revived, ReviveResult
from functions.outbox.sender import OutboxSender, SendPolicy, SendResult
from functions.outbox.sweeper import Sweeper
from functions.shared import tables
from functions.shared.outbox import iso_time, outbox_id_for
from tests.support.clock import FakeClock
from tests.support.outbox import in_bucket
from tests.support.sinks import EMAIL_SENDER, Sinks
from tests.support.world import TABLES, World

T0 = 1_764_460_800
HOUR = 3600
SWEEP_GRACE = 120
POLICY = SendPolicy(lease_seconds=60, backoff_base_seconds=30, give_up_seconds=6 * HOUR)


@pytest.fixture
def sinks(world: World) -> Sinks:
    return Sinks()


@pytest.fixture
def sink_up() -> list[bool]:
    """Whether the sinks take notifications; a test switches it."""
    return [True]


def channels(sinks: Sinks, sink_up: list[bool]) -> list[Channel]:
    def down() -> bool:
        return not sink_up[0]

    return [
        FaultyChannel(EventBridgeChannel(boto3.client("events"), sinks.bus_name), fails=down),
        FaultyChannel(SesEmailChannel(boto3.client("sesv2"), EMAIL_SENDER), fails=down),
    ]


def sender(
    world: World, clock: FakeClock, via: Sequence[Channel], policy: SendPolicy = POLICY
) -> OutboxSender:
    return OutboxSender(world.dynamodb, TABLES.outbox, via, clock, policy)


def sweep(world: World, clock: FakeClock, via: Sequence[Channel]) -> dict[str, int]:
    swept = Sweeper(world.dynamodb, TABLES.outbox, sender(world, clock, via), clock, SWEEP_GRACE)
    return dict(swept.sweep())


def paid_order(world: World) -> str:
    order = stripe.unique("ord")
    processed = world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    assert processed.effect_key
    return outbox_id_for(processed.effect_key)


def outbox_item(world: World, outbox_id: str) -> dict[str, Any]:
    [item] = [i for i in world.outbox() if i["outbox_id"] == outbox_id]
    return item


def dead_item(world: World, clock: FakeClock, sinks: Sinks) -> str:
    """An applied payment whose sinks refused it, with a give-up age of zero: dead at once."""
    outbox_id = paid_order(world)
    broken = channels(sinks, [False])
    sent = sender(world, clock, broken, SendPolicy(give_up_seconds=0)).deliver(
        outbox_id, only_if_due=False
    )
    assert sent.result is SendResult.DEAD
    return outbox_id


def test_an_item_that_died_in_an_outage_is_revived_and_sent_once_with_its_key(
    world: World, sinks: Sinks, sink_up: list[bool], clock: FakeClock
) -> None:
    # Given the sinks down for longer than the give-up age: the item died
    outbox_id = paid_order(world)
    sink_up[0] = False
    via = channels(sinks, sink_up)
    sender(world, clock, via).deliver(outbox_id, only_if_due=False)
    for _ in range(POLICY.give_up_seconds // HOUR + 1):
        clock.advance(HOUR + SWEEP_GRACE)
        if sweep(world, clock, via) == {"dead": 1}:
            break
    assert outbox_item(world, outbox_id)["status"] == "dead"
    died_at = int(clock.now)
    died_after = outbox_item(world, outbox_id)["attempts"]

    # When the sinks are fixed, a day later, and the operator revives it
    clock.advance(24 * HOUR)
    revived = OutboxReviver(world.dynamodb, TABLES.outbox, clock).revive(outbox_id)

    # Then it is pending again, due now, in its own shard, with a fresh give-up age
    assert revived == Revived(
        outbox_id,
        ReviveResult.REVIVED,
        status="dead",
        attempts=died_after,
        died_at=died_at,
        last_error="eventbridge unavailable (injected)",
    )
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["attempts"], item["revivals"]) == ("pending", 0, 1)
    assert (item["revived_at"], item["next_attempt_at"]) == (iso_time(clock.now), int(clock.now))
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.due_bucket(outbox_id)) == [outbox_id]
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.OUTBOX_DEAD_BUCKET) == []

    # When the sweeper meets it while a sink still fails
    clock.advance(SWEEP_GRACE)
    still_down = sweep(world, clock, via)

    # Then it is backed off, not buried again at once (its age counts from the revival)
    assert still_down == {"retry_later": 1}
    assert outbox_item(world, outbox_id)["status"] == "pending"

    # When the sinks take it again and the sweeper runs once it is due
    sink_up[0] = True
    clock.advance(30 + SWEEP_GRACE)
    swept = sweep(world, clock, via)

    # Then it is sent, once, with the same key it always had
    assert swept == {"sent": 1}
    assert outbox_item(world, outbox_id)["status"] == "sent"
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}


def test_reviving_an_item_that_is_not_dead_or_does_not_exist_changes_nothing(
    world: World, sinks: Sinks, sink_up: list[bool], clock: FakeClock
) -> None:
    # Given a pending item the sweeper owns (its first try failed) and a sent one
    pending = paid_order(world)
    assert sender(world, clock, []).park(pending, "the first try failed")
    sent = paid_order(world)
    assert (
        sender(world, clock, channels(sinks, sink_up)).deliver(sent, only_if_due=False).result
        is SendResult.SENT
    )
    before = world.snapshot()
    reviver = OutboxReviver(world.dynamodb, TABLES.outbox, clock)

    # When the operator revives them, and an id that names nothing
    missing = "obx_" + "0" * 64
    results = [reviver.revive(i) for i in (pending, sent, missing)]

    # Then each is reported as what it is, and no item changed
    assert [(r.result, r.status) for r in results] == [
        (ReviveResult.NOT_DEAD, "pending"),
        (ReviveResult.NOT_DEAD, "sent"),
        (ReviveResult.NOT_FOUND, None),
    ]
    assert world.snapshot() == before


def test_an_item_stuck_outside_the_due_index_is_handed_to_the_sweeper_and_sent_once(
    world: World, sinks: Sinks, sink_up: list[bool], clock: FakeClock
) -> None:
    # Given a new item whose stream try was lost, past the reconciliation's deadline
    stuck = paid_order(world)
    clock.advance(2 * HOUR)
    assert sweep(world, clock, channels(sinks, sink_up)) == {}  # the sweeper cannot see it

    # When the operator revives it (as the reconciliation's report says), and the sweeper runs
    revived = OutboxReviver(world.dynamodb, TABLES.outbox, clock).revive(stuck)
    clock.advance(SWEEP_GRACE)
    swept = sweep(world, clock, channels(sinks, sink_up))

    # Then it was in the due index, and was sent once, with its key
    assert (revived.result, revived.status) == (ReviveResult.REVIVED, "pending")
    assert swept == {"sent": 1}
    assert sinks.events_by_key() == {stuck: 1}
    assert outbox_item(world, stuck)["status"] == "sent"


def test_revive_all_dead_pages_the_dead_bucket_and_touches_nothing_else(
    world: World, sinks: Sinks, sink_up: list[bool], clock: FakeClock
) -> None:
    # Given five dead items (more than a page), one pending and one sent
    dead = []
    for _ in range(5):
        dead.append(dead_item(world, clock, sinks))
        clock.advance(1)
    pending = paid_order(world)
    sent = paid_order(world)
    sender(world, clock, channels(sinks, sink_up)).deliver(sent, only_if_due=False)
    untouched = {i: outbox_item(world, i) for i in (pending, sent)}

    # When the operator revives every dead item, two per page
    results = OutboxReviver(world.dynamodb, TABLES.outbox, clock, page_size=2).revive_all_dead()

    # Then each dead one, oldest death first, is pending in its shard; the others are as they were
    assert [(r.outbox_id, r.result) for r in results] == [(i, ReviveResult.REVIVED) for i in dead]
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.OUTBOX_DEAD_BUCKET) == []
    for outbox_id in dead:
        assert outbox_item(world, outbox_id)["status"] == "pending"
        assert outbox_id in in_bucket(world.dynamodb, TABLES.outbox, tables.due_bucket(outbox_id))
    assert {i: outbox_item(world, i) for i in (pending, sent)} == untouched


def test_a_revived_item_is_not_sent_again_through_a_channel_that_took_it(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given an item EventBridge took and SES refused past the give-up age: dead, half sent
    outbox_id = paid_order(world)
    ses_up = [False]
    via: list[Channel] = [
        EventBridgeChannel(boto3.client("events"), sinks.bus_name),
        FaultyChannel(
            SesEmailChannel(boto3.client("sesv2"), EMAIL_SENDER), fails=lambda: not ses_up[0]
        ),
    ]
    died = sender(world, clock, via, SendPolicy(give_up_seconds=0)).deliver(
        outbox_id, only_if_due=False
    )
    assert died.result is SendResult.DEAD
    assert (sinks.events_by_key(), sinks.emails_by_key()) == ({outbox_id: 1}, {})

    # When SES is fixed, the operator revives the item and the sweeper sends it
    ses_up[0] = True
    clock.advance(HOUR)
    revived = OutboxReviver(world.dynamodb, TABLES.outbox, clock).revive(outbox_id)
    clock.advance(SWEEP_GRACE)
    swept = sweep(world, clock, via)

    # Then the e-mail goes out, and EventBridge, which had it already, got it once in all
    assert (revived.result, swept) == (ReviveResult.REVIVED, {"sent": 1})
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert sinks.events_by_key() == {outbox_id: 1}
    assert outbox_item(world, outbox_id)["channels_sent"] == {"eventbridge", "email"}
