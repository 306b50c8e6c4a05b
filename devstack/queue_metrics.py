"""The SQS metrics AWS publishes for every queue, published by the local server as well, so
that `umavez status` reads a queue's oldest message's age from CloudWatch on either stack.

AWS sends `ApproximateAgeOfOldestMessage` and `ApproximateNumberOfMessagesVisible` to the
`AWS/SQS` namespace once a minute per queue; the server does it every `PUBLISH_EVERY_SECONDS`
(shorter: a drill lasts a minute), from the server's in-memory queues (`devstack/memory/sqs.py`)
into moto's CloudWatch, under the lock every request holds (moto's backends take none of their
own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Final

from devstack.memory.sqs import ACCOUNT, MemorySqs, Queue

NAMESPACE: Final = "AWS/SQS"
OLDEST_AGE: Final = "ApproximateAgeOfOldestMessage"
VISIBLE: Final = "ApproximateNumberOfMessagesVisible"
PUBLISH_EVERY_SECONDS: Final = 10.0
# The queues' datapoints older than this are dropped (status reads the last 5 minutes).
KEPT_SECONDS: Final = 3600


def queue_datapoints(queue: Queue, now_ms: int) -> list[dict[str, Any]]:
    """One queue's two datapoints: its visible messages, and the age in seconds of the oldest
    message still in it (in flight included, as AWS counts it; 0 when empty)."""
    # The queue keeps its messages oldest first.
    oldest_sent = next((m.sent_ms for m in queue.messages.values()), None)
    oldest = max(0, now_ms - oldest_sent) // 1000 if oldest_sent is not None else 0
    visible = sum(1 for m in queue.messages.values() if m.visible_at * 1000 <= now_ms)
    dimensions = [{"Name": "QueueName", "Value": queue.name}]
    # moto keeps metric times naive, in UTC (what it parses requests into): aware ones fail
    # its comparisons.
    timestamp = datetime.fromtimestamp(now_ms / 1000, tz=UTC).replace(tzinfo=None)
    return [
        {
            "MetricName": OLDEST_AGE,
            "Value": float(oldest),
            "Unit": "Seconds",
            "Dimensions": dimensions,
            "Timestamp": timestamp,
        },
        {
            "MetricName": VISIBLE,
            "Value": float(visible),
            "Unit": "Count",
            "Dimensions": dimensions,
            "Timestamp": timestamp,
        },
    ]


def publish_once(queues: MemorySqs, now_ms: int) -> int:
    """Every queue: its datapoints into moto's CloudWatch (the queues' account and region).
    How many queues."""
    from moto.cloudwatch.models import cloudwatch_backends

    kept_since = datetime.fromtimestamp(now_ms / 1000 - KEPT_SECONDS, tz=UTC).replace(tzinfo=None)
    points = [p for q in list(queues.queues.values()) for p in queue_datapoints(q, now_ms)]
    if points:
        cloudwatch = cloudwatch_backends[ACCOUNT][queues.region]
        # moto keeps every datapoint: a long `serve` would scan ever more of them.
        cloudwatch.metric_data = [
            m
            for m in cloudwatch.metric_data
            if m.namespace != NAMESPACE or m.timestamp >= kept_since
        ]
        cloudwatch.put_metric_data(NAMESPACE, points)
    return len(points) // 2


def start_publishing(
    queues: MemorySqs,
    lock: AbstractContextManager[Any],
    clock: Callable[[], float],
    stopped: threading.Event,
    every_seconds: float = PUBLISH_EVERY_SECONDS,
) -> threading.Thread:
    """A daemon thread publishing at once, then every `every_seconds` until `stopped` is set
    (at once: a stack just started already has its queues' first datapoints)."""

    def publish() -> None:
        while True:
            with lock:
                publish_once(queues, int(clock() * 1000))
            if stopped.wait(every_seconds):
                return

    thread = threading.Thread(target=publish, name="sqs-metrics", daemon=True)
    thread.start()
    return thread
