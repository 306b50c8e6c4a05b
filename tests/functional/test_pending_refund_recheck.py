"""A card refund pending when a legacy endpoint's `charge.refunded` arrives counts when it
succeeds, whichever events the endpoint subscribed.

Before 2024-10-28.acacia Stripe sends no `refund.*` event for a card refund: the only event
for a pending refund's later success is `charge.refund.updated`, and an endpoint need not
subscribe it. The charge is therefore watched: the waiting function re-drives its delivery on
a schedule (5 minutes, then doubling, at most every 6 hours) and each re-processing reads the
refunds again, until none is pending. Time is the injected clock; DynamoDB and SQS are moto;
Stripe's refunds API is the local fake."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from devstack.provider_apis import FakeProviderApis
from fixtures import stripe
from fixtures.lambda_events import sqs_record
from functions.process.handler import handle_message
from functions.process.interpreters import Interpreters
from functions.process.messages import RECHECK_GENERATION, Message
from functions.process.waiting import (
    RECHECK_AFTER_SECONDS,
    RECHECK_AT_MOST_EVERY_SECONDS,
    RECHECK_STUCK_SECONDS,
    Waiting,
)
from functions.shared.domain import NoEffect, Outcome
from tests.functional.test_ledger import (
    MP_TOKEN,
    STRIPE_KEY,
    T0,
    charge_refunded_2023,
    paid,
    refund_object,
    stripe_processor,
)
from tests.support.clients import intercepted
from tests.support.clock import FakeClock
from tests.support.queues import taken
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from functions.process.service import EffectProcessor


@pytest.fixture
def provider_apis() -> Iterator[FakeProviderApis]:
    apis = FakeProviderApis(mercadopago_token=MP_TOKEN, stripe_key=STRIPE_KEY).start()
    yield apis
    apis.stop()


def delivered(body: str, processor: EffectProcessor, room: Waiting) -> list[Outcome]:
    """The process Lambda's handler with one delivery straight from ingest."""
    attributes = {"provider": "stripe", "event_id": stripe.unique("evt"), "event_type": "x"}
    record = SQSRecord(sqs_record(body, attributes))
    return [p.outcome for p in handle_message(record, processor, room)]


def redriven(queue: tuple[SQSClient, str], processor: EffectProcessor, room: Waiting) -> int:
    """What the waiting function put on the queue, through the handler as SQS gives it."""
    handled = 0
    for body, attributes in taken(*queue):
        handle_message(SQSRecord(sqs_record(body, attributes)), processor, room)
        handled += 1
    return handled


def watched_for_a_pending_refund(
    world: World, provider_apis: FakeProviderApis, room: Waiting, amount: int
) -> tuple[str, str, dict[str, Any], EffectProcessor]:
    """A paid order on a 2023-10-16 endpoint that subscribed charge.refunded only, whose
    refund is still pending when its charge.refunded is processed: its order, its charge,
    the refund as it will be once succeeded, and the processor reading Stripe's fake API."""
    order, intent, charge = paid(world)
    refund = refund_object(stripe.unique("re"), intent, charge, amount, T0 + 60)
    provider_apis.refunds[charge] = [{**refund, "status": "pending"}]
    processor = stripe_processor(world, provider_apis)
    assert delivered(charge_refunded_2023(order, intent, charge), processor, room) == [
        Outcome.IGNORED
    ]
    return order, charge, refund, processor


def test_a_pending_refund_counts_when_it_succeeds_though_no_event_says_so(
    world: World,
    provider_apis: FakeProviderApis,
    queue: tuple[SQSClient, str],
    room: Waiting,
    clock: FakeClock,
) -> None:
    # Given a paid order on a 2023-10-16 endpoint that subscribed charge.refunded only, and a
    # refund still pending when its charge.refunded is processed
    order, charge, refund, processor = watched_for_a_pending_refund(
        world, provider_apis, room, 1500
    )
    assert world.order(order).refunded_total == 0

    # When the refund succeeds at Stripe (no event reaches the endpoint) and the waiting
    # function runs before, then after, the first re-check is due
    provider_apis.refunds[charge] = [refund]
    clock.advance(RECHECK_AFTER_SECONDS - 1)
    early = room.redrive()["rechecked"]
    clock.advance(1)
    rechecked = room.redrive()["rechecked"]
    processed = redriven(queue, processor, room)

    # Then the refund counts once, is announced once, and nothing is watched any more
    assert (early, rechecked, processed) == (0, 1, 1)
    assert world.order(order).refunded_total == 1500
    assert sorted(i["transition"] for i in world.outbox(order)) == ["order.paid", "order.refunded"]
    assert list(room.watched()) == []
    clock.advance(RECHECK_AT_MOST_EVERY_SECONDS)
    assert room.redrive()["rechecked"] == 0
    assert world.mismatches(order) == []


def test_a_refund_still_pending_is_read_again_at_doubling_intervals_up_to_six_hours(
    world: World,
    provider_apis: FakeProviderApis,
    queue: tuple[SQSClient, str],
    room: Waiting,
    clock: FakeClock,
) -> None:
    # Given a charge watched for a pending refund
    order, charge, _, processor = watched_for_a_pending_refund(world, provider_apis, room, 700)
    started = clock()

    # When the waiting function runs every 5 minutes for two days and the refund stays pending
    checked_at = []
    for _ in range(2 * 24 * 12):
        clock.advance(300)
        if room.redrive()["rechecked"]:
            checked_at.append(int(clock() - started))
            redriven(queue, processor, room)

    # Then it was read again after 5, 15, 35, 75, 155, 315 minutes, then every 6 hours, and
    # it is still watched, with nothing counted
    gaps = [b - a for a, b in zip([0, *checked_at], checked_at, strict=False)]
    assert gaps[:6] == [300, 600, 1200, 2400, 4800, 9600]
    assert set(gaps[7:]) == {RECHECK_AT_MOST_EVERY_SECONDS}
    assert [w.object for w in room.watched()] == [charge]
    assert world.order(order).refunded_total == 0


def test_a_recheck_that_finds_its_charge_settled_ends_only_its_own_watch(
    world: World, queue: tuple[SQSClient, str], room: Waiting, clock: FakeClock
) -> None:
    # Given a watched charge whose re-check is on its way
    message, carried = recheck_on_its_way(queue, room, clock)

    # When a newer charge.refunded watches it again before that re-check ends the watch
    room.watch(message, {"ch_watched"})
    room.unwatch("stripe", "ch_watched", carried)

    # Then the newer watch stands, and only its own generation ends it
    [renewed] = room.watched()
    assert renewed.generation != carried
    room.unwatch("stripe", "ch_watched", str(renewed.generation))
    assert list(room.watched()) == []


def test_a_watch_ended_and_made_again_is_not_ended_by_an_old_recheck(
    world: World, queue: tuple[SQSClient, str], room: Waiting, clock: FakeClock
) -> None:
    # Given a re-check on its way, and a copy of it (SQS delivers at least once)
    message, carried = recheck_on_its_way(queue, room, clock)

    # When the first copy ends the watch, a new refund watches the charge again, and then the
    # second copy (which also found nothing pending when it read) ends what it carried
    room.unwatch("stripe", "ch_watched", carried)
    room.watch(message, {"ch_watched"})
    room.unwatch("stripe", "ch_watched", carried)

    # Then the new watch stands, with its own schedule from its start
    [again] = room.watched()
    assert int(again.checks) == 0
    assert int(again.next_check_at) == int(clock()) + RECHECK_AFTER_SECONDS


def test_a_pending_refund_read_through_the_api_names_its_charge_to_read_again() -> None:
    # Given charge.refunded on 2023-10-16, whose refunds API lists a pending refund
    listed = Interpreters.build(
        stripe_refunds=lambda charge: [
            {**refund_object("re_pending", "pi_1", charge, 100, T0), "status": "pending"}
        ]
    )
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")

    # When it is read
    [from_api] = listed("stripe", charge_refunded_2023(order, intent, charge))

    # Then it moves no money yet and names its charge to read again
    assert isinstance(from_api, NoEffect)
    assert from_api.recheck == charge


def recheck_on_its_way(
    queue: tuple[SQSClient, str], room: Waiting, clock: FakeClock
) -> tuple[Message, str]:
    """A charge watched, its first re-check due and sent: the delivery, and the generation the
    re-check carries."""
    message = stripe_message()
    room.watch(message, {"ch_watched"})
    clock.advance(RECHECK_AFTER_SECONDS)
    assert room.redrive()["rechecked"] == 1
    [(_, sent)] = list(taken(*queue))
    return message, sent[RECHECK_GENERATION]


def stripe_message() -> Message:
    return Message("stripe", '{"id": "evt_watched"}', "evt_watched", "charge.refunded")


def test_a_refund_pending_for_a_week_is_counted_for_its_alarm_and_still_read_again(
    world: World,
    provider_apis: FakeProviderApis,
    queue: tuple[SQSClient, str],
    room: Waiting,
    clock: FakeClock,
) -> None:
    # Given a charge watched for a refund that stays pending (one awaiting the merchant's action)
    _, charge, _, processor = watched_for_a_pending_refund(world, provider_apis, room, 900)

    # When the waiting function runs a week later, then a day after that
    clock.advance(RECHECK_STUCK_SECONDS)
    at_a_week = room.redrive()
    redriven(queue, processor, room)
    clock.advance(86_400)
    past_a_week = room.redrive()

    # Then the watch counts as stuck (what `RefundPendingOverAWeek` alarms on) only past the
    # week, and the charge is still read again: nothing is given up
    assert (at_a_week["rechecks_over_a_week"], past_a_week["rechecks_over_a_week"]) == (0, 1)
    assert past_a_week["rechecked"] == 1
    assert [w.object for w in room.watched()] == [charge]


def test_a_refund_pending_for_over_a_week_stays_counted_between_its_rechecks(
    world: World,
    provider_apis: FakeProviderApis,
    queue: tuple[SQSClient, str],
    room: Waiting,
    clock: FakeClock,
) -> None:
    # Given a charge watched for over a week for a refund that stays pending, just re-checked
    _, charge, _, processor = watched_for_a_pending_refund(world, provider_apis, room, 900)
    clock.advance(RECHECK_STUCK_SECONDS + 86_400)
    assert room.redrive()["rechecked"] == 1
    redriven(queue, processor, room)

    # When the waiting function runs again before its next re-check is due
    clock.advance(300)
    between = room.redrive()

    # Then the stuck watch is still counted (the alarm reads it on every run, not only when
    # the charge is read again), though nothing was re-checked
    assert (between["rechecked"], between["rechecks_open"]) == (0, 1)
    assert between["rechecks_over_a_week"] == 1
    assert [w.object for w in room.watched()] == [charge]


def test_a_watch_ended_while_its_recheck_is_sent_is_not_made_again(
    world: World, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given a watched charge whose re-check is due, and a re-check of the previous one that
    # finds the charge settled and ends the watch while the waiting function sends this one
    sqs, url = queue
    room = Waiting(world.dynamodb, sqs, TABLES, url, clock)
    room.watch(stripe_message(), {"ch_watched"})
    [watch] = room.watched()
    clock.advance(RECHECK_AFTER_SECONDS)

    def ending_the_watch_meanwhile(operation: str, call: Callable[[], Any]) -> Any:
        result = call()
        if operation == "send_message":
            room.unwatch("stripe", "ch_watched", str(watch.generation))
        return result

    racing = Waiting(
        world.dynamodb, intercepted(sqs, ending_the_watch_meanwhile), TABLES, url, clock
    )

    # When the waiting function re-drives it, and runs again later
    sent = racing.redrive()
    clock.advance(RECHECK_AT_MOST_EVERY_SECONDS)
    later = room.redrive()

    # Then the ended watch stays ended: nothing is scheduled again, and later runs re-check
    # nothing and fail on nothing
    assert sent["rechecked"] == 1
    assert list(room.watched()) == []
    assert (later["rechecked"], later["rechecks_open"], later["redrive_failures"]) == (0, 0, 0)


def test_a_pending_refund_beside_a_settled_one_is_watched_and_counts_when_it_succeeds(
    world: World,
    provider_apis: FakeProviderApis,
    queue: tuple[SQSClient, str],
    room: Waiting,
    clock: FakeClock,
) -> None:
    # Given a paid order on a 2023-10-16 endpoint that subscribed charge.refunded only, whose
    # charge has a refund succeeded and another still pending when charge.refunded is read
    order, intent, charge = paid(world)
    settled = refund_object(stripe.unique("re"), intent, charge, 1000, T0 + 60)
    pending = refund_object(stripe.unique("re"), intent, charge, 500, T0 + 120)
    provider_apis.refunds[charge] = [{**pending, "status": "pending"}, settled]
    processor = stripe_processor(world, provider_apis)
    outcomes = delivered(charge_refunded_2023(order, intent, charge), processor, room)

    # Then the settled one counts, and the charge is watched for the pending one
    assert sorted(outcomes) == sorted([Outcome.APPLIED, Outcome.IGNORED])
    assert world.order(order).refunded_total == 1000
    assert [w.object for w in room.watched()] == [charge]

    # When the pending refund succeeds at Stripe (no event says so) and its re-check is due
    provider_apis.refunds[charge] = [pending, settled]
    clock.advance(RECHECK_AFTER_SECONDS)
    assert room.redrive()["rechecked"] == 1
    redriven(queue, processor, room)

    # Then both refunds count once, and nothing is watched any more
    assert world.order(order).refunded_total == 1500
    assert list(room.watched()) == []
    assert world.mismatches(order) == []


def charge_refunded_embedding(
    order: str, intent: str, charge: str, refunds: list[dict[str, Any]]
) -> str:
    """charge.refunded as endpoints before 2022-11-15 receive it: the refunds embedded."""
    event = json.loads(stripe.fixture_text("charge.refunded.2022-08-01"))
    event["id"] = stripe.unique("evt")
    event["data"]["object"].update({"id": charge, "payment_intent": intent})
    event["data"]["object"]["metadata"] = {"order_id": order}
    event["data"]["object"]["refunds"] = {"object": "list", "data": refunds, "has_more": False}
    return json.dumps(event)


def test_a_pending_refund_embedded_in_the_event_is_watched_and_counts_when_it_succeeds(
    world: World,
    provider_apis: FakeProviderApis,
    queue: tuple[SQSClient, str],
    room: Waiting,
    clock: FakeClock,
) -> None:
    # Given a paid order on a 2022-08-01 endpoint (refunds embedded in charge.refunded) that
    # did not subscribe charge.refund.updated, and a charge.refunded embedding one refund
    # succeeded and one still pending
    order, intent, charge = paid(world)
    settled = refund_object(stripe.unique("re"), intent, charge, 1000, T0 + 60)
    pending = {**refund_object(stripe.unique("re"), intent, charge, 1500, T0 + 90)}
    provider_apis.refunds[charge] = [settled, {**pending, "status": "pending"}]
    processor = stripe_processor(world, provider_apis)
    body = charge_refunded_embedding(
        order, intent, charge, [settled, {**pending, "status": "pending"}]
    )
    delivered(body, processor, room)
    assert world.order(order).refunded_total == 1000
    assert len(list(room.watched())) == 1

    # When the pending refund succeeds at Stripe (no event reaches the endpoint) and the
    # first re-check is due
    provider_apis.refunds[charge] = [settled, pending]
    clock.advance(RECHECK_AFTER_SECONDS)
    room.redrive()
    redriven(queue, processor, room)

    # Then both refunds count once each, each announced once, and the watch has ended
    assert world.order(order).refunded_total == 2500
    assert sorted(i["transition"] for i in world.outbox(order)) == [
        "order.paid",
        "order.refunded",
        "order.refunded",
    ]
    assert list(room.watched()) == []
