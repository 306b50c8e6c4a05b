"""The local event source mappings: the SQS one holds a batch for as long as it runs; the stream
one splits a shard's records into lanes as Lambda's parallelization factor does."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.pollers import SqsToLambda, by_partition_key
from devstack.resources import client
from devstack.server import LocalAws
from devstack.sink import SinkRecorder, create_sink_table, sink_counts


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    server = LocalAws().start()
    yield server
    server.stop()


def test_a_batch_slower_than_the_visibility_timeout_is_never_received_twice(
    aws: LocalAws,
) -> None:
    # Given a queue with a 1 s visibility timeout, one message in it, and a handler that takes
    # three times as long, looking into the queue while it runs
    sqs = client("sqs", aws.endpoint_url)
    url = sqs.create_queue(QueueName="local-slow", Attributes={"VisibilityTimeout": "1"})[
        "QueueUrl"
    ]
    sqs.send_message(QueueUrl=url, MessageBody="slow")
    seen_meanwhile: list[Any] = []

    def slow(event: dict[str, Any], context: Any) -> dict[str, Any]:
        time.sleep(3)
        seen_meanwhile.extend(sqs.receive_message(QueueUrl=url).get("Messages", []))
        return {"batchItemFailures": []}

    poller = SqsToLambda("process-test", aws.endpoint_url, url, slow)

    # When the poller hands it the batch
    assert poller.poll_once()

    # Then nobody else received the message while the handler held it, and it is gone
    assert seen_meanwhile == []
    assert poller.stats["visibility_extended"] >= 1
    counts = sqs.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    assert counts == {
        "ApproximateNumberOfMessages": "0",
        "ApproximateNumberOfMessagesNotVisible": "0",
    }


def test_a_failed_record_of_a_slow_batch_returns_after_the_queues_own_timeout(
    aws: LocalAws,
) -> None:
    # Given a slow handler that fails its one record
    sqs = client("sqs", aws.endpoint_url)
    url = sqs.create_queue(QueueName="local-slow-fail", Attributes={"VisibilityTimeout": "1"})[
        "QueueUrl"
    ]
    sqs.send_message(QueueUrl=url, MessageBody="fails")

    def slow_failure(event: dict[str, Any], context: Any) -> dict[str, Any]:
        time.sleep(2)
        return {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}

    poller = SqsToLambda("process-test", aws.endpoint_url, url, slow_failure)

    # When the poller hands it the batch, and the queue is read again
    assert poller.poll_once()
    time.sleep(1.5)  # the queue's own timeout, not the extension of four
    again = sqs.receive_message(QueueUrl=url, AttributeNames=["ApproximateReceiveCount"])

    # Then the record is back, on its second receive
    [message] = again["Messages"]
    assert message["Body"] == "fails"
    assert message["Attributes"]["ApproximateReceiveCount"] == "2"


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
