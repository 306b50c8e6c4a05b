"""The outbox sender on moto: DynamoDB Streams in, SES and EventBridge out, counted per key."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from functions.outbox import handler
from functions.outbox.channels import Channel, EventBridgeChannel, SesEmailChannel
from functions.outbox.sender import OutboxSender, SendPolicy, SendResult
from functions.outbox.sweeper import Sweeper
from functions.shared.outbox import outbox_id_for
from local_stack import stripe_events as stripe
from local_stack.faults import FaultyChannel, first
from tests.conftest import TABLES
from tests.support.clients import SimulatedCrashError, crashing_after, crashing_before, serialized
from tests.support.clock import FakeClock
from tests.support.lambda_events import FakeLambdaContext
from tests.support.sinks import EMAIL_SENDER, Sinks
from tests.support.streams import StreamReader, stream_event
from tests.support.world import World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800
POLICY = SendPolicy(lease_seconds=60, max_attempts=3, backoff_base_seconds=30)
SWEEP_GRACE = 120


@pytest.fixture
def sinks(dynamodb: DynamoDBClient) -> Sinks:
    return Sinks()


@pytest.fixture
def stream(dynamodb: DynamoDBClient) -> StreamReader:
    return StreamReader(TABLES.outbox)


def real_channels(sinks: Sinks) -> list[Channel]:
    return [
        EventBridgeChannel(boto3.client("events"), sinks.bus_name),
        SesEmailChannel(boto3.client("sesv2"), EMAIL_SENDER),
    ]


def sender(
    world: World,
    clock: FakeClock,
    channels: Sequence[Channel],
    client: DynamoDBClient | None = None,
) -> OutboxSender:
    return OutboxSender(client or world.dynamodb, TABLES.outbox, channels, clock, POLICY)


def sweep(world: World, clock: FakeClock, channels: Sequence[Channel]) -> dict[str, int]:
    return dict(
        Sweeper(
            world.dynamodb, TABLES.outbox, sender(world, clock, channels), clock, SWEEP_GRACE
        ).sweep()
    )


def paid_order(world: World) -> tuple[str, str]:
    """A payment with a recipient, processed: returns (order id, outbox id)."""
    order = stripe.unique("ord")
    processed = world.deliver(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    assert processed.effect_key
    return order, outbox_id_for(processed.effect_key)


def outbox_item(world: World, outbox_id: str) -> dict[str, Any]:
    [item] = [i for i in world.outbox() if i["outbox_id"] == outbox_id]
    return item


@pytest.fixture
def deployed_sender(world: World, sinks: Sinks, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("OUTBOX_TABLE", TABLES.outbox)
    monkeypatch.setenv("LEDGER_TABLE", TABLES.ledger)
    monkeypatch.setenv("EVENT_BUS_NAME", sinks.bus_name)
    monkeypatch.setenv("EMAIL_SENDER", EMAIL_SENDER)
    handler.outbox_sender.cache_clear()
    yield
    handler.outbox_sender.cache_clear()


@pytest.mark.usefixtures("deployed_sender")
def test_new_outbox_item_reaches_each_sink_once_with_its_key(
    world: World, sinks: Sinks, stream: StreamReader
) -> None:
    # Given an applied payment whose outbox item is on the stream
    _, outbox_id = paid_order(world)

    # When the outbox Lambda receives the stream batch, and then the sender's own updates
    response = handler.lambda_handler(stream_event(stream.new_records()), FakeLambdaContext())
    handler.lambda_handler(stream_event(stream.new_records()), FakeLambdaContext())

    # Then each sink got the notification exactly once, keyed by the outbox id, and it is sent
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert outbox_item(world, outbox_id)["status"] == "sent"
    assert response["batchItemFailures"] == []


@pytest.mark.usefixtures("deployed_sender")
def test_the_same_stream_batch_delivered_twice_sends_once(
    world: World, sinks: Sinks, stream: StreamReader
) -> None:
    _, outbox_id = paid_order(world)
    batch = stream_event(stream.new_records())

    handler.lambda_handler(batch, FakeLambdaContext())
    handler.lambda_handler(batch, FakeLambdaContext())

    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}


def test_two_senders_racing_on_one_item_send_once(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given one pending item and two senders released at the same instant
    _, outbox_id = paid_order(world)
    start = threading.Barrier(2)
    results: list[SendResult] = []

    def race() -> None:
        racer = sender(world, clock, real_channels(sinks), serialized(boto3.client("dynamodb")))
        start.wait()
        results.append(racer.deliver(outbox_id, only_if_due=False).result)

    threads = [threading.Thread(target=race) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then one sent, the other found it claimed
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert sorted(results) == [SendResult.SENT, SendResult.SKIPPED]


def test_channel_failure_backs_off_and_a_later_attempt_sends_once(
    world: World,
    sinks: Sinks,
    stream: StreamReader,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given EventBridge failing once
    _, outbox_id = paid_order(world)
    failing = [FaultyChannel(real_channels(sinks)[0], fails=first(1)), real_channels(sinks)[1]]
    monkeypatch.setattr(handler, "outbox_sender", lambda: sender(world, clock, failing))
    records = stream.new_records()

    # When the stream delivers the item
    response = handler.lambda_handler(stream_event(records), FakeLambdaContext())

    # Then nothing was sent, the record is reported failed, and the item waits with backoff
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["attempts"], item["next_attempt_at"]) == (
        "pending",
        1,
        int(clock.now) + 30,
    )
    assert "unavailable" in item["last_error"]
    assert sinks.events_by_key() == {}
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [
        records[0]["dynamodb"]["SequenceNumber"]
    ]

    # When the sweeper runs before the item is due, and again after
    before_due = sweep(world, clock, failing)
    clock.advance(30 + SWEEP_GRACE)
    after_due = sweep(world, clock, failing)

    # Then it was sent exactly once, on the later run
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert outbox_item(world, outbox_id)["status"] == "sent"
    assert (before_due, after_due) == ({}, {"sent": 1})


def test_crash_after_claim_before_send_is_sent_once_after_the_lease(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a sender that dies right after claiming the item
    _, outbox_id = paid_order(world)
    with pytest.raises(SimulatedCrashError):
        sender(world, clock, real_channels(sinks), crashing_after(world.dynamodb, 1)).deliver(
            outbox_id, only_if_due=False
        )
    assert outbox_item(world, outbox_id)["status"] == "sending"

    # When the stream retries at once, and the sweeper runs after the lease ran out
    retried = sender(world, clock, real_channels(sinks)).deliver(outbox_id, only_if_due=False)
    clock.advance(POLICY.lease_seconds + SWEEP_GRACE)
    swept = sweep(world, clock, real_channels(sinks))

    # Then the lease kept the retry out, and the sweeper sent it once
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert outbox_item(world, outbox_id)["status"] == "sent"
    assert (retried.result, swept) == (SendResult.SKIPPED, {"sent": 1})


@pytest.mark.parametrize(
    ("crash_before_request", "events_seen", "emails_seen"),
    [(2, 2, 2)],
    ids=["after-both-sends-before-mark"],
)
def test_crash_after_a_send_before_it_is_recorded_resends_the_same_key(
    world: World,
    sinks: Sinks,
    clock: FakeClock,
    crash_before_request: int,
    events_seen: int,
    emails_seen: int,
) -> None:
    # Given a sender that dies after its sends, before recording them
    # (requests: 1 claim, 2 mark sent with the channels that took it)
    _, outbox_id = paid_order(world)
    crashing = crashing_before(world.dynamodb, crash_before_request)
    with pytest.raises(SimulatedCrashError):
        sender(world, clock, real_channels(sinks), crashing).deliver(outbox_id, only_if_due=False)

    # When the sweeper re-drives it after the lease
    clock.advance(POLICY.lease_seconds + SWEEP_GRACE)
    sweep(world, clock, real_channels(sinks))

    # Then the item ends sent; a sink saw the same key at most twice, never a second intent
    assert outbox_item(world, outbox_id)["status"] == "sent"
    assert sinks.events_by_key() == {outbox_id: events_seen}
    assert sinks.emails_by_key() == {outbox_id: emails_seen}


def test_item_that_keeps_failing_becomes_dead_and_is_counted(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a sink that never takes the notification
    _, outbox_id = paid_order(world)
    broken = [FaultyChannel(real_channels(sinks)[0], fails=lambda: True)]

    # When the stream tries, then the sweeper keeps re-driving it on schedule
    first = sender(world, clock, broken).deliver(outbox_id, only_if_due=False)
    runs = []
    for _ in range(POLICY.max_attempts):
        clock.advance(3600 + SWEEP_GRACE)
        runs.append(sweep(world, clock, broken))

    # Then after max attempts it is dead, out of the sweep, and was counted once as dead
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["attempts"]) == ("dead", POLICY.max_attempts)
    assert "due_bucket" not in item
    assert first.result is SendResult.RETRY_LATER
    assert runs == [{"retry_later": 1}, {"dead": 1}, {}]


def test_crash_during_the_last_attempt_is_buried_by_the_sweeper(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    _, outbox_id = paid_order(world)
    last_chance = OutboxSender(
        world.dynamodb, TABLES.outbox, real_channels(sinks), clock, SendPolicy(max_attempts=1)
    )
    with pytest.raises(SimulatedCrashError):
        OutboxSender(
            crashing_after(world.dynamodb, 1),
            TABLES.outbox,
            real_channels(sinks),
            clock,
            SendPolicy(max_attempts=1),
        ).deliver(outbox_id, only_if_due=False)
    clock.advance(60 + SWEEP_GRACE)

    swept = Sweeper(world.dynamodb, TABLES.outbox, last_chance, clock, SWEEP_GRACE).sweep()

    assert outbox_item(world, outbox_id)["status"] == "dead"
    assert dict(swept) == {"dead": 1}


def test_channels_that_took_an_item_before_another_failed_are_not_sent_again(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given e-mail failing once, after EventBridge took the item
    _, outbox_id = paid_order(world)
    channels = [real_channels(sinks)[0], FaultyChannel(real_channels(sinks)[1], fails=first(1))]
    first_try = sender(world, clock, channels).deliver(outbox_id, only_if_due=False)

    # When the sweeper retries it once it is due
    clock.advance(30 + SWEEP_GRACE)
    swept = sweep(world, clock, channels)

    # Then EventBridge got it once (recorded with the back-off), e-mail once on the retry
    assert first_try.result is SendResult.RETRY_LATER
    assert swept == {"sent": 1}
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert outbox_item(world, outbox_id)["channels_sent"] == {"eventbridge", "email"}
