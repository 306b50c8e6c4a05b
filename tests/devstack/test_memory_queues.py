"""The in-memory SQS and EventBridge the local server answers with (`devstack/memory/sqs.py`,
`events.py`): visibility, delays, redrive, FIFO groups and deduplication, EventBridge rules
delivering to queues, and a deep queue drained in time proportional to its depth."""

from __future__ import annotations

import json
import time
from typing import Any

import boto3
import pytest
from moto import mock_aws

from devstack.memory import sqs_operations
from devstack.memory.sqs import MemorySqs, SqsError
from devstack.memory.wire import MemoryAws


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def call(sqs: MemorySqs, operation: str, **request: Any) -> dict[str, Any]:
    return sqs_operations.handle(sqs, operation, request)


def bodies(sqs: MemorySqs, url: str, most: int = 10, **extra: Any) -> list[str]:
    answer = call(sqs, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=most, **extra)
    return [m["Body"] for m in answer.get("Messages", [])]


def test_a_received_message_is_hidden_for_its_visibility_timeout_then_seen_again() -> None:
    # Given a queue whose messages stay hidden 30 s once received, one delayed 60 s
    clock = Clock()
    sqs = MemorySqs(clock=clock)
    url = call(sqs, "CreateQueue", QueueName="q", Attributes={"VisibilityTimeout": "30"})[
        "QueueUrl"
    ]
    call(sqs, "SendMessage", QueueUrl=url, MessageBody="now")
    call(sqs, "SendMessage", QueueUrl=url, MessageBody="later", DelaySeconds=60)

    # When received at once, 10 s later, 31 s later and 61 s later
    first = bodies(sqs, url)
    clock.now += 10
    hidden = bodies(sqs, url)
    clock.now += 21
    again = bodies(sqs, url, AttributeNames=["ApproximateReceiveCount"])
    clock.now += 30
    delayed = bodies(sqs, url, VisibilityTimeout=0)

    # Then each receive sees what is visible then, oldest first
    assert (first, hidden, again) == (["now"], [], ["now"])
    assert delayed == ["now", "later"]


def test_a_message_past_its_receives_moves_to_the_dead_letter_queue() -> None:
    # Given a queue redriving to a dead-letter queue after two receives
    sqs = MemorySqs()
    dead = call(sqs, "CreateQueue", QueueName="dead")["QueueUrl"]
    arn = call(sqs, "GetQueueAttributes", QueueUrl=dead, AttributeNames=["QueueArn"])
    policy = {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 2}
    url = call(
        sqs, "CreateQueue", QueueName="live", Attributes={"RedrivePolicy": json.dumps(policy)}
    )["QueueUrl"]
    call(sqs, "SendMessage", QueueUrl=url, MessageBody="poison")

    # When it is received (and let go at once) three times
    seen = [bodies(sqs, url, VisibilityTimeout=0) for _ in range(3)]

    # Then the third receive found it moved: it is in the dead-letter queue alone
    assert seen == [["poison"], ["poison"], []]
    assert bodies(sqs, dead) == ["poison"]


def test_a_fifo_group_waits_for_its_message_in_flight_and_duplicates_are_dropped() -> None:
    # Given a FIFO queue deduplicating by content, two groups
    sqs = MemorySqs()
    url = call(
        sqs,
        "CreateQueue",
        QueueName="q.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]
    for body, group in (("a1", "a"), ("a2", "a"), ("a1", "a"), ("b1", "b")):
        call(sqs, "SendMessage", QueueUrl=url, MessageBody=body, MessageGroupId=group)

    # When one message is received, then the rest
    first = bodies(sqs, url, most=1)
    rest = bodies(sqs, url)

    # Then group a's second waits for its first; the duplicate was never queued
    assert first == ["a1"]
    assert rest == ["b1"]


def test_batches_answer_by_entry_and_an_unknown_handle_fails_alone() -> None:
    # Given two messages received
    sqs = MemorySqs()
    url = call(sqs, "CreateQueue", QueueName="q")["QueueUrl"]
    sent = call(
        sqs,
        "SendMessageBatch",
        QueueUrl=url,
        Entries=[{"Id": "1", "MessageBody": "x"}, {"Id": "2", "MessageBody": "y"}],
    )
    handles = [
        m["ReceiptHandle"]
        for m in call(sqs, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    ]

    # When a batch deletes both, one twice, and a handle no message had
    deleted = call(
        sqs,
        "DeleteMessageBatch",
        QueueUrl=url,
        Entries=[
            {"Id": "a", "ReceiptHandle": handles[0]},
            {"Id": "b", "ReceiptHandle": handles[1]},
            {"Id": "again", "ReceiptHandle": handles[0]},
            {"Id": "bogus", "ReceiptHandle": "nope"},
        ],
    )

    # Then the real handles succeed, the bogus one fails alone, and the queue is empty
    assert [e["Id"] for e in sent["Successful"]] == ["1", "2"]
    assert [e["Id"] for e in deleted["Successful"]] == ["a", "b", "again"]
    assert [(e["Id"], e["Code"]) for e in deleted["Failed"]] == [
        ("bogus", "ReceiptHandleIsInvalid")
    ]
    counts = call(sqs, "GetQueueAttributes", QueueUrl=url, AttributeNames=["All"])["Attributes"]
    assert counts["ApproximateNumberOfMessages"] == counts["ApproximateNumberOfMessagesNotVisible"]
    assert counts["ApproximateNumberOfMessages"] == "0"
    with pytest.raises(SqsError, match="QueueDoesNotExist"):
        call(sqs, "GetQueueUrl", QueueName="missing")


def test_the_md5s_of_a_message_are_the_ones_sqs_computes() -> None:
    # Given a message with string, number and binary attributes
    attributes: dict[str, Any] = {
        "event_id": {"DataType": "String", "StringValue": "evt_1"},
        "tries": {"DataType": "Number", "StringValue": "3"},
        "raw": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
    }

    # When sent to moto's SQS and to the memory one (which gets the binary as the wire's base64)
    with mock_aws():
        moto = boto3.client("sqs", region_name="us-east-1")
        url = moto.create_queue(QueueName="q")["QueueUrl"]
        expected = moto.send_message(QueueUrl=url, MessageBody="b", MessageAttributes=attributes)
    sqs = MemorySqs()
    url = call(sqs, "CreateQueue", QueueName="q")["QueueUrl"]
    wire = {**attributes, "raw": {"DataType": "Binary", "BinaryValue": "AAE="}}
    sent = call(sqs, "SendMessage", QueueUrl=url, MessageBody="b", MessageAttributes=wire)

    # Then both digests are the same
    assert sent["MD5OfMessageBody"] == expected["MD5OfMessageBody"]
    assert sent["MD5OfMessageAttributes"] == expected["MD5OfMessageAttributes"]


def test_an_event_matching_a_rule_is_delivered_to_its_queue_and_others_are_not() -> None:
    # Given a bus whose rule sends the events of one source to a queue
    aws = MemoryAws()
    url = call(aws.sqs, "CreateQueue", QueueName="sink")["QueueUrl"]
    arn = aws.sqs.queue(url).arn
    aws.events.handle("CreateEventBus", {"Name": "bus"})
    aws.events.handle(
        "PutRule", {"Name": "r", "EventBusName": "bus", "EventPattern": '{"source": ["umavez"]}'}
    )
    aws.events.handle(
        "PutTargets", {"Rule": "r", "EventBusName": "bus", "Targets": [{"Id": "q", "Arn": arn}]}
    )

    # When two events are put, of that source and of another
    answer = aws.events.handle(
        "PutEvents",
        {
            "Entries": [
                {"Source": s, "DetailType": "t", "Detail": '{"n": 1}', "EventBusName": "bus"}
                for s in ("umavez", "other")
            ]
        },
    )

    # Then only the first is in the queue, in EventBridge's envelope
    [body] = bodies(aws.sqs, url)
    event = json.loads(body)
    assert answer["FailedEntryCount"] == 0
    assert event["id"] == answer["Entries"][0]["EventId"]
    assert (event["source"], event["detail-type"], event["detail"]) == ("umavez", "t", {"n": 1})
    with pytest.raises(SqsError, match="InvalidEventPattern"):
        aws.events.handle(
            "PutRule",
            {"Name": "p", "EventBusName": "bus", "EventPattern": '{"source": [{"prefix": "u"}]}'},
        )


def test_a_deep_queue_drains_in_time_proportional_to_its_depth() -> None:
    # Given 20,000 messages queued at once (a burst's backlog)
    sqs = MemorySqs()
    url = call(sqs, "CreateQueue", QueueName="deep")["QueueUrl"]
    for n in range(0, 20_000, 10):
        call(
            sqs,
            "SendMessageBatch",
            QueueUrl=url,
            Entries=[{"Id": str(i), "MessageBody": str(n + i)} for i in range(10)],
        )

    # When it is drained ten at a time, each batch deleted
    started, drained = time.perf_counter(), 0
    while messages := call(sqs, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=10).get(
        "Messages"
    ):
        call(
            sqs,
            "DeleteMessageBatch",
            QueueUrl=url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )
        drained += len(messages)
    elapsed = time.perf_counter() - started

    # Then every message came out, in seconds (moto took ~1 s a receive at 2,000 deep)
    assert drained == 20_000
    assert elapsed < 30
