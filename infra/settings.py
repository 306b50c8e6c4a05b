"""Deployment settings shared by the CDK stack and the embedded local stack.

No aws_cdk import here: the local stack reads these without paying for CDK.
"""

from __future__ import annotations

from typing import Any, Final

# Each Lambda: its handler and the packages its asset holds besides `functions/__init__.py`.
LAMBDA_PACKAGES: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "ingest": ("functions.ingest.handler.lambda_handler", ("shared", "ingest")),
    "process": ("functions.process.handler.lambda_handler", ("shared", "process")),
    "waiting": ("functions.process.waiting_handler.lambda_handler", ("shared", "process")),
    "outbox": ("functions.outbox.handler.lambda_handler", ("shared", "outbox")),
    "sweeper": ("functions.outbox.sweeper_handler.lambda_handler", ("shared", "outbox")),
    "reconciliation": ("functions.reconcile.handler.lambda_handler", ("shared", "reconcile")),
}
MAX_RECEIVE_COUNT: Final = 5
# SQS's largest (1 MiB). A message's size counts its attributes too: at the old 256 KiB default,
# a body ingest accepts (up to 256 KiB) with its attributes was refused, and ingest answered 503
# to every retry of it. The dead-letter queue takes the same, or a redrive into it would fail.
WEBHOOK_MESSAGE_MAX_BYTES: Final = 1024 * 1024
PROCESS_TIMEOUT_SECONDS: Final = 30
# The senders start an item only while its worst case (functions/outbox/budget.py, ~40 s with
# every sink at its timeouts) fits in what is left: these leave room for many items and one
# slow one. The sweeper's run ends before the next is due (every 5 minutes).
OUTBOX_TIMEOUT_SECONDS: Final = 120
SWEEPER_TIMEOUT_SECONDS: Final = 240
PROCESS_BATCH_SIZE: Final = 10
OUTBOX_BATCH_SIZE: Final = 10
OUTBOX_RETRY_ATTEMPTS: Final = 3
# Concurrent batches per stream shard. Every outbox item has a key of its own (Lambda keeps the
# order of records of one key only), so a burst of notifications is sent by this many
# invocations at once instead of one batch after another.
OUTBOX_PARALLELIZATION_FACTOR: Final = 4
# The outbox event source mapping's filter: new outbox items only, which are always pending.
OUTBOX_STREAM_FILTER: Final[dict[str, Any]] = {
    "eventName": ["INSERT"],
    "dynamodb": {"NewImage": {"status": {"S": ["pending"]}}},
}


def matches_outbox_filter(record: dict[str, Any]) -> bool:
    """What Lambda's filter does with OUTBOX_STREAM_FILTER, for the local stream poller."""
    image = record.get("dynamodb", {}).get("NewImage", {})
    return bool(
        record.get("eventName") in OUTBOX_STREAM_FILTER["eventName"]
        and image.get("status", {}).get("S")
        in OUTBOX_STREAM_FILTER["dynamodb"]["NewImage"]["status"]["S"]
    )
