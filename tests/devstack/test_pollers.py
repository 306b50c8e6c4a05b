"""The local event source mappings: the SQS one holds a batch for as long as it runs; the stream
one splits a shard's records into lanes as Lambda's parallelization factor does."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from devstack.local_aws import LocalAws
from devstack.queue_poller import SqsToLambda, event_id_of
from devstack.resources import client
from devstack.sink import SinkRecorder, create_sink_table, sink_counts
from devstack.stream_poller import by_partition_key
from infra.mappings import PROCESS_MAPPING
from tests.support.clients import queue_depth

# The process mapping, invoking with whatever a read returned (no batching window).
AT_ONCE = replace(PROCESS_MAPPING, max_batching_window_seconds=0)


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    server = LocalAws().start()
    yield server
    server.stop()


class HalfTimeouts(threading.Event):
    """The visibility keeper's clock: its waits between extensions end only when the test says
    half a visibility timeout has passed (`passes`), or when the batch is done. No real time
    passes, so nothing races the queue's own timeout."""

    def __init__(self) -> None:
        super().__init__()
        self._turn = threading.Condition()
        self._owed = 0
        self._waiting = False

    def set(self) -> None:
        with self._turn:
            super().set()
            self._turn.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        with self._turn:
            self._waiting = True
            self._turn.notify_all()
            self._turn.wait_for(lambda: self.is_set() or self._owed > 0)
            self._waiting = False
            if self.is_set():
                return True
            self._owed -= 1
            return False

    def passes(self) -> None:
        """Half a timeout passes; returns once the keeper has acted on it and waits again."""
        with self._turn:
            self._owed += 1
            self._turn.notify_all()
            self._turn.wait_for(lambda: self._owed == 0 and self._waiting)


class Keepers:
    """The clocks a poller's batches get, one per batch."""

    def __init__(self) -> None:
        self.made: list[HalfTimeouts] = []

    def __call__(self) -> threading.Event:
        self.made.append(HalfTimeouts())
        return self.made[-1]


def one_message(aws: LocalAws, name: str, body: str) -> tuple[Any, str]:
    """A queue with a 1 s visibility timeout holding one message."""
    sqs = client("sqs", aws.endpoint_url)
    url = sqs.create_queue(QueueName=name, Attributes={"VisibilityTimeout": "1"})["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=body)
    return sqs, url


def visibility_changes(sqs: Any) -> list[int]:
    """Records each visibility a client asks for (ChangeMessageVisibilityBatch)."""
    asked: list[int] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.ChangeMessageVisibilityBatch",
        lambda params, **_: asked.extend(e["VisibilityTimeout"] for e in params["Entries"]),
    )
    return asked


def test_a_batch_slower_than_the_visibility_timeout_is_never_received_twice(
    aws: LocalAws,
) -> None:
    # Given a queue with a 1 s visibility timeout, one message in it, and a handler during
    # which three half timeouts pass, looking into the queue after each
    sqs, url = one_message(aws, "local-slow", "slow")
    keepers = Keepers()
    seen_meanwhile: list[Any] = []

    def slow(event: dict[str, Any], context: Any) -> dict[str, Any]:
        for _ in range(3):
            keepers.made[-1].passes()
            seen_meanwhile.extend(sqs.receive_message(QueueUrl=url).get("Messages", []))
        return {"batchItemFailures": []}

    poller = SqsToLambda("process-test", aws.endpoint_url, url, slow, AT_ONCE, new_event=keepers)
    asked = visibility_changes(poller._sqs)

    # When the poller hands it the batch
    assert poller.poll_once()

    # Then each half timeout hid the message for four more, nobody else received it while the
    # handler held it, and it is gone
    assert asked == [4, 4, 4]
    assert poller.stats["visibility_extended"] == 3
    assert seen_meanwhile == []
    assert queue_depth(sqs, url) == (0, 0)


def test_a_failed_record_of_a_slow_batch_returns_after_the_queues_own_timeout(
    aws: LocalAws,
) -> None:
    # Given a handler that fails its one record after its visibility was extended
    sqs, url = one_message(aws, "local-slow-fail", "fails")
    keepers = Keepers()

    def slow_failure(event: dict[str, Any], context: Any) -> dict[str, Any]:
        keepers.made[-1].passes()
        return {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}

    poller = SqsToLambda(
        "process-test", aws.endpoint_url, url, slow_failure, AT_ONCE, new_event=keepers
    )
    asked = visibility_changes(poller._sqs)

    # When the poller hands it the batch
    assert poller.poll_once()

    # Then the failed record is given back the queue's own timeout (1 s), not the extension's
    # four: SQS returns it as it would have without the extension; it is still there
    assert asked == [4, 1]
    counts = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    assert counts == {"ApproximateNumberOfMessagesNotVisible": "1"}


def test_a_shards_records_split_into_lanes_keep_each_keys_order() -> None:
    # Given 40 stream records of 12 keys, several records for some keys, in stream order
    records = [
        {"dynamodb": {"Keys": {"pk": {"S": f"item-{n % 12}"}}, "SequenceNumber": str(100 + n)}}
        for n in range(40)
    ]

    # When they are split for a parallelization factor of 4
    lanes = by_partition_key(records, 4)

    # Then every record is in exactly one lane, all of a key's records in the same lane in
    # stream order, and there are at most 4 lanes, none empty
    def sequence(lane: list[dict[str, Any]]) -> list[str]:
        return [r["dynamodb"]["SequenceNumber"] for r in lane]

    assert sorted(s for lane in lanes for s in sequence(lane)) == sequence(records)
    assert 1 < len(lanes) <= 4
    assert all(lanes)
    for lane in lanes:
        assert sequence(lane) == sorted(sequence(lane))
    lane_of = {r["dynamodb"]["Keys"]["pk"]["S"]: n for n, lane in enumerate(lanes) for r in lane}
    for n, lane in enumerate(lanes):
        assert all(lane_of[r["dynamodb"]["Keys"]["pk"]["S"]] == n for r in lane)


def test_the_sink_recorder_polls_again_at_once_only_after_a_full_receive(aws: LocalAws) -> None:
    # Given twelve events from the bus's rule in the sink queue
    sqs = client("sqs", aws.endpoint_url)
    url = sqs.create_queue(QueueName="local-sink-batches")["QueueUrl"]
    create_sink_table(aws.endpoint_url)
    keys = [f"obx_{n:064x}" for n in range(12)]
    for key in keys:
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"detail": {"idempotency_key": key}}))
    recorder = SinkRecorder(aws.endpoint_url, url)

    # When it polls until the queue reads empty
    again = [recorder.poll_once(), recorder.poll_once()]
    settled_before_writing = recorder.settled()
    again.append(recorder.poll_once())

    # Then a full receive (ten) asks for another at once, a partial one and an empty one wait
    # (the poller's back-off: more events arrive meanwhile), every event is counted once and
    # written to the sink table, and the queue is empty
    assert again == [True, False, False]
    assert not settled_before_writing  # the queue was empty, the counts not written yet
    assert {k: c["eventbridge"] for k, c in recorder.counts.items()} == dict.fromkeys(keys, 1)
    assert {k: c["eventbridge"] for k, c in sink_counts(aws.endpoint_url).items()} == (
        dict.fromkeys(keys, 1)
    )
    assert recorder.settled()


def test_a_batch_fills_for_up_to_its_mappings_window_before_the_function_runs(
    aws: LocalAws,
) -> None:
    # Given three messages in a queue, the process mapping (a batch of 10, a 1 s window), and
    # time that passes only when the poller pauses: two more messages arrive during its first
    # pause, none after
    sqs, url = one_message(aws, "local-window", "first")
    for body in ("second", "third"):
        sqs.send_message(QueueUrl=url, MessageBody=body)
    now = [0.0]
    pauses: list[float] = []

    def pause(seconds: float) -> None:
        if not pauses:
            for body in ("fourth", "fifth"):
                sqs.send_message(QueueUrl=url, MessageBody=body)
        pauses.append(seconds)
        now[0] += seconds

    batches: list[list[str]] = []

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        batches.append([r["body"] for r in event["Records"]])
        return {"batchItemFailures": []}

    poller = SqsToLambda(
        "process-test",
        aws.endpoint_url,
        url,
        handler,
        PROCESS_MAPPING,
        clock=lambda: now[0],
        pause=pause,
    )

    # When it polls once
    assert poller.poll_once()

    # Then the function ran once, with all five, once the window had passed
    assert len(batches) == 1
    assert sorted(batches[0]) == sorted(["first", "second", "third", "fourth", "fifth"])
    assert sum(pauses) == pytest.approx(PROCESS_MAPPING.max_batching_window_seconds)


def test_a_message_names_its_event_by_ingests_attribute_or_by_the_stripe_event_it_carries() -> None:
    # Given a message ingest sent, one Stripe's EventBridge rule sent (no attributes), and one
    # that is neither
    from_ingest = {"Body": "{}", "MessageAttributes": {"event_id": {"StringValue": "evt_in"}}}
    envelope = {
        "source": "aws.partner/stripe.com/ed_test_1",
        "detail-type": "v1.refund.created",
        "detail": {"id": "evt_bus", "object": "v2.core.event", "type": "v1.refund.created"},
    }
    from_the_bus = {"Body": json.dumps(envelope)}
    # When each is named, Then the poller counts the event it carries, "?" for the stray one
    assert event_id_of(from_ingest) == "evt_in"
    assert event_id_of(from_the_bus) == "evt_bus"
    assert event_id_of({"Body": "not json"}) == "?"
