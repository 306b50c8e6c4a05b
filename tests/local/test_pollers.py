"""The SQS event source mapping of the local stack holds a batch for as long as it runs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from local_stack.pollers import SqsToLambda
from local_stack.resources import client
from local_stack.server import LocalAws


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
