"""The outbox sender on moto: DynamoDB Streams in, SES and EventBridge out, counted per key."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from devstack.faults import FaultyChannel, first
from devstack.stream_poller import on_failure_message
from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext
from functions.outbox import handler, sweeper_handler
from functions.outbox.budget import (
    DYNAMODB_CONNECT_TIMEOUT_SECONDS,
    DYNAMODB_MAX_ATTEMPTS,
    DYNAMODB_READ_TIMEOUT_SECONDS,
    HTTP_TIMEOUT_SECONDS,
    ITEM_RESERVE_MS,
    SEND_CONNECT_TIMEOUT_SECONDS,
    SEND_MAX_ATTEMPTS,
    SEND_READ_TIMEOUT_SECONDS,
    SEND_RETRY_WAIT_SECONDS,
    item_worst_case_seconds,
)
from functions.outbox.channels import Channel, EventBridgeChannel, SesEmailChannel
from functions.outbox.sender import OutboxSender, SendPolicy, SendResult
from functions.outbox.stranded import StrandedItems
from functions.outbox.sweeper import Sweeper
from functions.outbox.wiring import channels_from_env, policy_from_env, sender_from_env
from functions.shared import tables
from functions.shared.outbox import OutboxItem, outbox_id_for
from infra.settings import OUTBOX_RETRY_ATTEMPTS
from tests.support.clients import (
    RequestCounter,
    SimulatedCrashError,
    crashing_after,
    crashing_before,
    intercepted,
    serialized,
)
from tests.support.clock import FakeClock
from tests.support.outbox import in_bucket, one_id_per_shard, put_parked
from tests.support.sinks import EMAIL_SENDER, Sinks
from tests.support.streams import StreamReader, stream_event
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800
HOUR = 3600
GIVE_UP = 24 * HOUR
RETENTION = 90 * 86_400
POLICY = SendPolicy(
    lease_seconds=60,
    backoff_base_seconds=30,
    backoff_cap_seconds=HOUR,
    give_up_seconds=GIVE_UP,
    retention_seconds=RETENTION,
)
SWEEP_GRACE = 120
OLD_MAX_ATTEMPTS = 8  # what used to make an item dead, whatever its age


@pytest.fixture
def dynamodb(moto_dynamodb: DynamoDBClient) -> DynamoDBClient:
    """This module reads the outbox table's stream: its tables are on moto, which keeps one."""
    return moto_dynamodb


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
    policy: SendPolicy = POLICY,
) -> OutboxSender:
    return OutboxSender(client or world.dynamodb, TABLES.outbox, channels, clock, policy)


def sweep(
    world: World,
    clock: FakeClock,
    channels: Sequence[Channel],
    policy: SendPolicy = POLICY,
    on_error: Callable[[str, Exception], None] | None = None,
) -> dict[str, int]:
    swept = sender(world, clock, channels, policy=policy)
    if on_error is None:
        return dict(Sweeper(world.dynamodb, TABLES.outbox, swept, clock, SWEEP_GRACE).sweep())
    return dict(
        Sweeper(world.dynamodb, TABLES.outbox, swept, clock, SWEEP_GRACE, on_error=on_error).sweep()
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


def test_a_first_try_that_succeeds_is_one_read_and_one_write_and_never_enters_the_due_index(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a new item, and a client that counts the sender's requests
    order, outbox_id = paid_order(world)
    client = boto3.client("dynamodb")
    counter = RequestCounter(client)

    # When the stream's first try sends it
    sent = OutboxSender(
        client, TABLES.outbox, real_channels(sinks), clock, POLICY, ledger_table=TABLES.ledger
    ).first_try(outbox_id, order)

    # Then it was sent once, with the order read in the same request as the item, recorded
    # sent in one write, and the due index never held it
    assert (sent.result, sent.attempts) == (SendResult.SENT, 1)
    assert dict(counter.by_operation) == {"BatchGetItem": 1, "UpdateItem": 1}
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["attempts"], tables.OUTBOX_DUE_BUCKET in item) == (
        "sent",
        1,
        False,
    )
    assert all(in_bucket(world.dynamodb, TABLES.outbox, b) == [] for b in tables.due_buckets())


def test_a_crash_in_the_first_try_after_the_send_is_resent_by_the_stream_with_its_key(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a first try that dies after its sends, before recording them (request 2)
    order, outbox_id = paid_order(world)
    with pytest.raises(SimulatedCrashError):
        sender(world, clock, real_channels(sinks), crashing_before(world.dynamodb, 2)).first_try(
            outbox_id, order
        )

    # When the stream retries the record
    retried = sender(world, clock, real_channels(sinks)).first_try(outbox_id, order)

    # Then the retry sent the same key again and recorded it: at-least-once, one intent
    assert retried.result is SendResult.SENT
    assert sinks.events_by_key() == {outbox_id: 2}
    assert outbox_item(world, outbox_id)["status"] == "sent"


def test_an_error_the_first_try_did_not_handle_parks_the_item_for_the_sweeper(
    world: World,
    sinks: Sinks,
    stream: StreamReader,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a channel with a bug (it raises what no channel failure is)
    _, outbox_id = paid_order(world)
    channel = PoisonedFor(real_channels(sinks)[0], outbox_id)
    monkeypatch.setattr(handler, "outbox_sender", lambda: sender(world, clock, [channel]))

    # When the stream delivers the item
    response = handler.lambda_handler(stream_event(stream.new_records()), FakeLambdaContext())

    # Then the record succeeded and the item waits in its shard of the due index with the
    # error; once the bug is fixed, the sweeper sends it once
    assert response["batchItemFailures"] == []
    item = outbox_item(world, outbox_id)
    assert item["status"] == "pending"
    assert "a template bug" in item["last_error"]
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.due_bucket(outbox_id)) == [outbox_id]
    channel.broken = False
    clock.advance(POLICY.backoff(1) + SWEEP_GRACE)
    assert sweep(world, clock, [channel]) == {"sent": 1}
    assert sinks.events_by_key() == {outbox_id: 1}


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


def test_a_failed_send_is_backed_off_in_the_due_index_and_its_stream_record_succeeds(
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

    # Then nothing was sent, the item waits with backoff in its shard of the due index, and
    # the record succeeded: the sweeper owns the schedule, the stream does not retry it now
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["attempts"], item["next_attempt_at"]) == (
        "pending",
        1,
        int(clock.now) + 30,
    )
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.due_bucket(outbox_id)) == [outbox_id]
    assert "unavailable" in item["last_error"]
    assert tables.EXPIRES_AT not in item
    assert sinks.events_by_key() == {}
    assert response["batchItemFailures"] == []

    # When the sweeper runs before the item is due, and again after
    before_due = sweep(world, clock, failing)
    clock.advance(30 + SWEEP_GRACE)
    after_due = sweep(world, clock, failing)

    # Then it was sent exactly once, on the later run
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}
    assert outbox_item(world, outbox_id)["status"] == "sent"
    assert (before_due, after_due) == ({}, {"sent": 1})


def test_a_record_the_stream_gives_up_on_is_parked_from_the_on_failure_queue_and_sent_once(
    world: World,
    sinks: Sinks,
    stream: StreamReader,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given EventBridge failing, and DynamoDB refusing every update meanwhile (neither the
    # back-off nor the parking of the item can be recorded)
    _, outbox_id = paid_order(world)
    tries = 1 + OUTBOX_RETRY_ATTEMPTS
    failing = [FaultyChannel(real_channels(sinks)[0], fails=first(tries)), real_channels(sinks)[1]]
    refusing = True

    def refuse_updates(operation: str, call: Callable[[], Any]) -> Any:
        if refusing and operation == "update_item":
            raise ClientError(
                {"Error": {"Code": "ValidationException", "Message": "injected"}}, "UpdateItem"
            )
        return call()

    refused = intercepted(world.dynamodb, refuse_updates)
    monkeypatch.setattr(handler, "outbox_sender", lambda: sender(world, clock, failing, refused))
    records = stream.new_records()

    # When the stream delivers the record, retries it, and gives up on it
    responses = [
        handler.lambda_handler(stream_event(records), FakeLambdaContext()) for _ in range(tries)
    ]

    # Then each try failed the record, and the item is still new: pending, in no index
    sequence = records[0]["dynamodb"]["SequenceNumber"]
    assert [r["batchItemFailures"] for r in responses] == [[{"itemIdentifier": sequence}]] * tries
    item = outbox_item(world, outbox_id)
    assert (item["status"], tables.OUTBOX_DUE_BUCKET in item) == ("pending", False)

    # When Lambda puts the batch's coordinates on the on-failure queue, DynamoDB recovers,
    # and the sweeper runs (twice)
    refusing = False
    stranded = on_failure_queue(world, clock, on_failure_message(records))
    parked = [dict(stranded.park_all()) for _ in range(2)]
    clock.advance(POLICY.backoff(1) + SWEEP_GRACE)
    swept = sweep(world, clock, real_channels(sinks))

    # Then the item was parked once, the message is gone, and the sweep sent it once
    assert parked == [{"parked": 1}, {}]
    assert messages_held(stranded) == 0
    assert swept == {"sent": 1}
    assert sinks.events_by_key() == {outbox_id: 1}
    assert sinks.emails_by_key() == {outbox_id: 1}


def on_failure_queue(world: World, clock: FakeClock, body: dict[str, Any]) -> StrandedItems:
    """The stream's on-failure queue holding one message, and the sweeper's reader of it."""
    sqs = boto3.client("sqs")
    failures = sqs.create_queue(QueueName="outbox-stream-failures")["QueueUrl"]
    sqs.send_message(QueueUrl=failures, MessageBody=json.dumps(body))
    return StrandedItems(sqs, boto3.client("dynamodbstreams"), failures, sender(world, clock, []))


def messages_held(stranded: StrandedItems) -> int:
    attributes = boto3.client("sqs").get_queue_attributes(
        QueueUrl=stranded.queue_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return sum(int(v) for v in attributes.values())


def _not_coordinates(_records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"version": "1.0"}


def _range_never_ending(records: list[dict[str, Any]]) -> dict[str, Any]:
    message = on_failure_message(records)
    info = message["DDBStreamBatchInfo"]
    info["endSequenceNumber"] = str(int(info["endSequenceNumber"]) + 10**6)
    return message


@pytest.mark.parametrize(
    "message", [_not_coordinates, _range_never_ending], ids=["not-coordinates", "partial-range"]
)
def test_a_message_whose_records_cannot_all_be_read_back_stays_on_the_queue(
    world: World,
    clock: FakeClock,
    stream: StreamReader,
    message: Callable[[list[dict[str, Any]]], dict[str, Any]],
) -> None:
    # Given an on-failure message that names no stream batch, or one whose end the stream
    # never reaches (its records are not all there)
    _, outbox_id = paid_order(world)
    stranded = on_failure_queue(world, clock, message(stream.new_records()))

    # When the sweeper reads it back
    parked = dict(stranded.park_all())

    # Then nothing is parked from it, it is counted unreadable, and it stays for the next sweep
    # and for a person (the queue is alarmed)
    assert parked == {"unreadable": 1}
    assert messages_held(stranded) == 1
    assert tables.OUTBOX_DUE_BUCKET not in outbox_item(world, outbox_id)


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


def test_an_item_is_given_up_by_age_not_by_its_number_of_attempts(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a sink that never takes the notification
    _, outbox_id = paid_order(world)
    created = clock.now
    broken = [FaultyChannel(real_channels(sinks)[0], fails=lambda: True)]

    # When the stream tries, then the sweeper re-drives it every hour for a day
    first_try = sender(world, clock, broken).deliver(outbox_id, only_if_due=False)
    runs = []
    while clock.now - created < GIVE_UP:
        clock.advance(HOUR + SWEEP_GRACE)
        runs.append(sweep(world, clock, broken))
    died_at = int(clock.now)
    clock.advance(HOUR + SWEEP_GRACE)
    after_death = sweep(world, clock, broken)

    # Then it backed off at every failure younger than the give-up age, far past the old
    # attempt limit, and died on the first failure past it: counted once as dead
    assert first_try.result is SendResult.RETRY_LATER
    assert len(runs) > OLD_MAX_ATTEMPTS
    assert runs[:-1] == [{"retry_later": 1}] * (len(runs) - 1)
    assert (runs[-1], after_death) == ({"dead": 1}, {})

    # And it is listed in the due index's dead bucket, sorted by when it died, never expiring
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["attempts"]) == ("dead", len(runs) + 1)
    assert (item["due_bucket"], item["next_attempt_at"]) == (tables.OUTBOX_DEAD_BUCKET, died_at)
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.OUTBOX_DEAD_BUCKET) == [outbox_id]
    assert in_bucket(world.dynamodb, TABLES.outbox, tables.due_bucket(outbox_id)) == []
    assert tables.EXPIRES_AT not in item
    assert sinks.events_by_key() == {}


@dataclass
class DyingChannel:
    """The sender process dies in the middle of this send, every time (a crash loop)."""

    name: str = "eventbridge"
    calls: int = 0

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        self.calls += 1
        raise SimulatedCrashError("the sender died mid-send (injected)")


def test_a_crash_loop_ends_buried_once_the_item_is_past_the_give_up_age(
    world: World, clock: FakeClock
) -> None:
    # Given an item whose every send kills its sender, and a three-hour give-up age
    policy = SendPolicy(lease_seconds=60, give_up_seconds=3 * HOUR)
    _, outbox_id = paid_order(world)
    created = clock.now
    dying = DyingChannel()
    with pytest.raises(SimulatedCrashError):
        sender(world, clock, [dying], policy=policy).deliver(outbox_id, only_if_due=False)

    # When the sweeper finds its lease run out, every hour
    runs = []
    while clock.now - created < policy.give_up_seconds:
        clock.advance(HOUR)
        runs.append(sweep(world, clock, [dying], policy))

    # Then it was re-driven while younger than the give-up age (no attempt limit), and the
    # first lease found run out past that age buried it without trying again
    assert runs == [{"error": 1}] * (len(runs) - 1) + [{"dead": 1}]
    assert dying.calls == len(runs)
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["due_bucket"]) == ("dead", tables.OUTBOX_DEAD_BUCKET)
    assert "lease expired" in item["last_error"]
    assert "claim_token" not in item


def test_a_sent_item_expires_after_the_retention(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a pending item
    _, outbox_id = paid_order(world)
    assert tables.EXPIRES_AT not in outbox_item(world, outbox_id)

    # When it is sent
    sent = sender(world, clock, real_channels(sinks)).deliver(outbox_id, only_if_due=False)

    # Then it left the due index and carries the TTL attribute: sent time plus the retention
    item = outbox_item(world, outbox_id)
    assert sent.result is SendResult.SENT
    assert (item["status"], item[tables.EXPIRES_AT]) == ("sent", int(clock.now) + RETENTION)
    assert "due_bucket" not in item


def test_the_policy_reads_the_give_up_age_and_retention_the_stack_passes() -> None:
    policy = policy_from_env({"OUTBOX_GIVE_UP_HOURS": "6", "RETENTION_DAYS": "7"})

    assert (policy.give_up_seconds, policy.retention_seconds) == (6 * HOUR, 7 * 86_400)
    assert (SendPolicy().give_up_seconds, SendPolicy().retention_seconds) == (GIVE_UP, RETENTION)


def test_an_item_due_in_any_shard_of_the_due_index_is_swept(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given one new item in each shard (`due#0` .. `due#7`) that the stream never sent
    ids = one_id_per_shard()
    for outbox_id in ids:
        put_parked(world.dynamodb, TABLES.outbox, outbox_id, clock.now)

    # When the sweeper runs after the grace
    clock.advance(SWEEP_GRACE)
    swept = sweep(world, clock, real_channels(sinks))

    # Then every one was sent once, each with its own key
    assert swept == {"sent": tables.OUTBOX_DUE_SHARDS}
    assert sinks.events_by_key() == dict.fromkeys(ids, 1)
    assert {outbox_item(world, i)["status"] for i in ids} == {"sent"}


@dataclass
class PoisonedFor:
    """A channel with a bug that raises (not a ChannelError) for one item only."""

    inner: Channel
    poisoned: str
    broken: bool = True

    @property
    def name(self) -> str:
        return self.inner.name

    def applies_to(self, item: OutboxItem) -> bool:
        return self.inner.applies_to(item)

    def send(self, item: OutboxItem) -> None:
        if self.broken and item.outbox_id == self.poisoned:
            raise KeyError("a template bug")
        self.inner.send(item)


def test_one_poisoned_item_never_stops_a_sweep(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given three items whose first try failed (parked in the due index), and a channel that
    # raises for the first one the sweep meets (lowest shard)
    ids = []
    for _ in range(3):
        ids.append(paid_order(world)[1])
        assert sender(world, clock, []).park(ids[-1], "the first try failed")
        clock.advance(1)
    poisoned = min(
        ids, key=lambda i: (tables.due_buckets().index(tables.due_bucket(i)), ids.index(i))
    )
    channel = PoisonedFor(real_channels(sinks)[0], poisoned)
    reported: list[tuple[str, str]] = []

    # When the sweeper runs once they are due
    clock.advance(POLICY.backoff(1) + SWEEP_GRACE)
    swept = sweep(world, clock, [channel], on_error=lambda i, e: reported.append((i, repr(e))))

    # Then the others were sent, the poisoned one reported and counted, and left claimed
    assert swept == {"sent": 2, "error": 1}
    assert reported == [(poisoned, "KeyError('a template bug')")]
    assert sinks.events_by_key() == {i: 1 for i in ids if i != poisoned}
    assert outbox_item(world, poisoned)["status"] == "sending"

    # When the bug is fixed and its lease has run out
    channel.broken = False
    clock.advance(POLICY.lease_seconds + SWEEP_GRACE)
    again = sweep(world, clock, [channel])

    # Then the next sweep re-drives it: every item sent once
    assert again == {"sent": 1}
    assert sinks.events_by_key() == dict.fromkeys(ids, 1)


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


def test_the_sweep_goes_on_when_the_on_failure_queue_cannot_be_read(
    world: World, sinks: Sinks, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an item the sweeper owns, due, and an on-failure queue that cannot be read
    _, outbox_id = paid_order(world)
    assert sender(world, clock, []).park(outbox_id, "the first try failed")

    class UnreadableQueue:
        def park_all(self) -> None:
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "Receive")

    swept = Sweeper(
        world.dynamodb, TABLES.outbox, sender(world, clock, real_channels(sinks)), clock, 0
    )
    monkeypatch.setattr(sweeper_handler, "stranded_items", lambda: UnreadableQueue())
    monkeypatch.setattr(sweeper_handler, "sweeper", lambda: swept)
    clock.advance(POLICY.backoff(1))

    # When the scheduled sweeper runs
    results = sweeper_handler.lambda_handler({}, FakeLambdaContext())

    # Then the due item was still sent, once
    assert results["sent"] == 1
    assert sinks.events_by_key() == {outbox_id: 1}


def time_left(*answers: int) -> Callable[[], int]:
    """What the Lambda context says is left, call after call (the last answer repeats)."""
    remaining = list(answers)
    return lambda: remaining.pop(0) if len(remaining) > 1 else remaining[0]


@pytest.mark.usefixtures("deployed_sender")
def test_a_batch_starts_no_item_it_could_not_finish_and_the_stream_retry_sends_each_once(
    world: World, sinks: Sinks, stream: StreamReader
) -> None:
    # Given three new items on the stream, and an invocation with room for one item only
    ids = [paid_order(world)[1] for _ in range(3)]
    records = [r for r in stream.new_records() if r["eventName"] == "INSERT"]
    short = FakeLambdaContext(remaining_ms=time_left(ITEM_RESERVE_MS, ITEM_RESERVE_MS - 1))

    # When the outbox Lambda runs the batch
    response = handler.lambda_handler(stream_event(records), short)

    # Then the first item was sent and the others handed back unstarted: nothing of them was
    # sent, so a timeout could not have left a send unrecorded
    failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
    sent_first = [i for i in ids if outbox_item(world, i)["status"] == "sent"]
    assert len(sent_first) == 1
    assert sinks.events_by_key() == {sent_first[0]: 1}
    assert len(failed) == 2
    assert all(outbox_item(world, i)["status"] == "pending" for i in ids if i not in sent_first)

    # When the stream retries from the first record handed back, with time to spare
    first_failed = min(
        n for n, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] in failed
    )
    retried = handler.lambda_handler(stream_event(records[first_failed:]), FakeLambdaContext())

    # Then every item reached each sink exactly once
    assert retried["batchItemFailures"] == []
    assert sinks.events_by_key() == dict.fromkeys(ids, 1)
    assert sinks.emails_by_key() == dict.fromkeys(ids, 1)


def test_a_sweep_stops_before_an_item_it_could_not_finish_and_the_next_sends_the_rest(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given three items the sweeper owns, due
    ids = [paid_order(world)[1] for _ in range(3)]
    for outbox_id in ids:
        assert sender(world, clock, []).park(outbox_id, "the first try failed")
    clock.advance(POLICY.backoff(1) + SWEEP_GRACE)
    swept_sender = sender(world, clock, real_channels(sinks))
    sweeper = Sweeper(world.dynamodb, TABLES.outbox, swept_sender, clock, SWEEP_GRACE)
    answers = iter([True])

    # When a sweep has time for one item only
    first = sweeper.sweep(has_time=lambda: next(answers, False))

    # Then it sent one, said it stopped, and left the others due and untouched
    assert dict(first) == {"sent": 1, "cut_short": 1}
    assert sum(sinks.events_by_key().values()) == 1
    assert sorted(outbox_item(world, i)["status"] for i in ids) == ["pending", "pending", "sent"]

    # When the next sweep runs with time enough
    second = sweeper.sweep()

    # Then the rest are sent: each item exactly once
    assert dict(second) == {"sent": 2}
    assert sinks.events_by_key() == dict.fromkeys(ids, 1)


def test_an_items_reserve_is_its_sends_and_each_of_its_dynamodb_calls_at_their_worst(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given an item the sweeper owns, due, and a client that counts the sweep's requests
    _, outbox_id = paid_order(world)
    assert sender(world, clock, []).park(outbox_id, "the first try failed")
    clock.advance(POLICY.backoff(1) + SWEEP_GRACE)
    client = boto3.client("dynamodb")
    counter = RequestCounter(client)
    swept = OutboxSender(
        client, TABLES.outbox, real_channels(sinks), clock, POLICY, ledger_table=TABLES.ledger
    )

    # When a sweep sends it
    assert dict(Sweeper(client, TABLES.outbox, swept, clock, SWEEP_GRACE).sweep()) == {"sent": 1}

    # Then the item made three DynamoDB calls (its claim, the read of its order, the write of
    # its outcome; the queries list the due index, before any item starts), and the time an
    # invocation reserves for an item is those calls, two AWS sends and the HTTP sink's
    # connect and read, each at its worst
    per_item = {op: n for op, n in counter.by_operation.items() if op != "Query"}
    assert per_item == {"UpdateItem": 2, "GetItem": 1}

    def worst(connect: float, read: float, attempts: int) -> float:
        return attempts * (connect + read) + (attempts - 1) * SEND_RETRY_WAIT_SECONDS

    aws_send = worst(SEND_CONNECT_TIMEOUT_SECONDS, SEND_READ_TIMEOUT_SECONDS, SEND_MAX_ATTEMPTS)
    dynamodb_call = worst(
        DYNAMODB_CONNECT_TIMEOUT_SECONDS, DYNAMODB_READ_TIMEOUT_SECONDS, DYNAMODB_MAX_ATTEMPTS
    )
    derived = 2 * aws_send + 2 * HTTP_TIMEOUT_SECONDS + sum(per_item.values()) * dynamodb_call
    assert int(derived * 1000) == ITEM_RESERVE_MS
    assert outbox_item(world, outbox_id)["status"] == "sent"


def test_every_send_is_bounded_so_an_items_worst_case_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given the senders' channels as the stack configures them
    monkeypatch.setenv("EVENT_BUS_NAME", "umavez-bus")
    monkeypatch.setenv("EMAIL_SENDER", EMAIL_SENDER)
    monkeypatch.setenv("NOTIFY_URL", "http://127.0.0.1:9/notify")
    channels = channels_from_env()

    # Then the AWS clients time out and retry within the budget's figures, and the HTTP sink too
    for channel in channels:
        client = getattr(channel, "_client", None)
        if client is not None:
            config = client.meta.config
            assert config.connect_timeout == SEND_CONNECT_TIMEOUT_SECONDS
            assert config.read_timeout == SEND_READ_TIMEOUT_SECONDS
            assert config.retries == {"total_max_attempts": SEND_MAX_ATTEMPTS, "mode": "standard"}
    assert [c.name for c in channels] == ["eventbridge", "email", "http"]
    assert getattr(channels[2], "_timeout") == HTTP_TIMEOUT_SECONDS  # noqa: B009
    # And the senders' DynamoDB client is bounded the same way (its defaults: 60 s, ten tries)
    monkeypatch.setenv("OUTBOX_TABLE", TABLES.outbox)
    monkeypatch.setenv("LEDGER_TABLE", TABLES.ledger)
    dynamodb: Any = sender_from_env()._db.meta.config
    assert (dynamodb.connect_timeout, dynamodb.read_timeout) == (
        DYNAMODB_CONNECT_TIMEOUT_SECONDS,
        DYNAMODB_READ_TIMEOUT_SECONDS,
    )
    assert dynamodb.retries == {"total_max_attempts": DYNAMODB_MAX_ATTEMPTS, "mode": "standard"}
    # And a sweeper's lease outlasts an item's worst case: no second sender takes it mid-send
    assert policy_from_env({}).lease_seconds > item_worst_case_seconds()
