"""The SQS metrics AWS publishes for every queue, published by the local server as well, so
that `umavez status` reads a queue's oldest message's age from CloudWatch on either stack.

AWS sends `ApproximateAgeOfOldestMessage` and `ApproximateNumberOfMessagesVisible` to the
`AWS/SQS` namespace once a minute per queue; the server does it every `PUBLISH_EVERY_SECONDS`
(shorter: a drill lasts a minute), from moto's queues, under the lock every request holds
(moto's backends take none of their own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Final

NAMESPACE: Final = "AWS/SQS"
OLDEST_AGE: Final = "ApproximateAgeOfOldestMessage"
VISIBLE: Final = "ApproximateNumberOfMessagesVisible"
PUBLISH_EVERY_SECONDS: Final = 10.0
# The queues' datapoints older than this are dropped (status reads the last 5 minutes).
KEPT_SECONDS: Final = 3600


def queue_datapoints(queue: Any, now_ms: int) -> list[dict[str, Any]]:
    """One queue's two datapoints: its visible messages, and the age in seconds of the oldest
    message still in it (in flight included, as AWS counts it; 0 when empty)."""
    sent = [m.sent_timestamp for m in queue._messages if m.sent_timestamp is not None]
    oldest = max(0, now_ms - min(sent)) // 1000 if sent else 0
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
            "Value": float(len(queue.messages)),
            "Unit": "Count",
            "Dimensions": dimensions,
            "Timestamp": timestamp,
        },
    ]


def publish_once(now_ms: int) -> int:
    """Every queue of every account and region: its datapoints into that region's CloudWatch.
    How many queues."""
    from moto.cloudwatch.models import cloudwatch_backends
    from moto.sqs.models import sqs_backends

    published = 0
    kept_since = datetime.fromtimestamp(now_ms / 1000 - KEPT_SECONDS, tz=UTC).replace(tzinfo=None)
    for account, regions in sqs_backends.items():
        for region, backend in regions.items():
            points = [p for q in backend.queues.values() for p in queue_datapoints(q, now_ms)]
            if points:
                cloudwatch = cloudwatch_backends[account][region]
                # moto keeps every datapoint: a long `serve` would scan ever more of them.
                cloudwatch.metric_data = [
                    m
                    for m in cloudwatch.metric_data
                    if m.namespace != NAMESPACE or m.timestamp >= kept_since
                ]
                cloudwatch.put_metric_data(NAMESPACE, points)
                published += len(points) // 2
    return published


def start_publishing(
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
                publish_once(int(clock() * 1000))
            if stopped.wait(every_seconds):
                return

    thread = threading.Thread(target=publish, name="sqs-metrics", daemon=True)
    thread.start()
    return thread
