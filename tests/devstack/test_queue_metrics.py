"""The local server publishes each queue's AWS/SQS metrics as AWS does, and keeps an hour."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from devstack.memory.sqs import MemorySqs, Queue
from devstack.queue_metrics import KEPT_SECONDS, NAMESPACE, OLDEST_AGE, publish_once


@pytest.fixture
def queue() -> Iterator[tuple[MemorySqs, Queue]]:
    """The server's queues (in memory) and one of them; CloudWatch is moto's."""
    with mock_aws():
        sqs = MemorySqs()
        yield sqs, sqs.create("umavez-webhooks", {})


def oldest_ages(since: datetime, until: datetime) -> list[float]:
    points = boto3.client("cloudwatch", region_name="us-east-1").get_metric_statistics(
        Namespace=NAMESPACE,
        MetricName=OLDEST_AGE,
        Dimensions=[{"Name": "QueueName", "Value": "umavez-webhooks"}],
        StartTime=since,
        EndTime=until,
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    return sorted(p["Maximum"] for p in points)


def test_the_oldest_message_age_is_published_and_old_datapoints_are_dropped(
    queue: tuple[MemorySqs, Queue],
) -> None:
    # Given a message sent to the queue now
    sqs, webhooks = queue
    sqs.send(webhooks, {"MessageBody": "{}"})
    now = time.time()

    # When the metrics are published 90 s later, then again two hours later
    publish_once(sqs, int((now + 90) * 1000))
    first = oldest_ages(
        datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(hours=3)
    )
    publish_once(sqs, int((now + 2 * 3600) * 1000))

    # Then the first says the message is 90 s old, and the second publication dropped it (an
    # hour is kept): only its own datapoint, the message two hours old, remains
    assert first == [90.0]
    kept = oldest_ages(
        datetime.now(UTC) - timedelta(hours=1), datetime.now(UTC) + timedelta(hours=3)
    )
    assert kept == [pytest.approx(2 * 3600, abs=1)]
    assert KEPT_SECONDS < 2 * 3600 - 90
