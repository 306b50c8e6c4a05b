"""The event source mappings, one typed definition each: the CDK stack synthesizes them
(`infra/constructs/triggers.py`) and the embedded stack's pollers run them
(`devstack/pollers.py`), so that local and deployed cannot drift
(`tests/infra/test_local_mappings_match_stack.py` reads both back).

No aws_cdk import here: the local stack reads these without paying for CDK.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from infra.settings import (
    OUTBOX_BATCH_SIZE,
    OUTBOX_PARALLELIZATION_FACTOR,
    OUTBOX_RETRY_ATTEMPTS,
    OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS,
    PROCESS_BATCH_SIZE,
)

# What the stack's `processMaxConcurrency` defaults to: the most process invocations at once.
DEFAULT_PROCESS_MAX_CONCURRENCY: Final = 5


@dataclass(frozen=True)
class QueueMapping:
    """An SQS queue feeding a function."""

    function: str  # a key of infra.settings.LAMBDA_PACKAGES
    batch_size: int
    max_batching_window_seconds: int
    report_batch_item_failures: bool
    max_concurrency: int


@dataclass(frozen=True)
class StreamMapping:
    """A DynamoDB stream feeding a function; what it gives up on goes to its on-failure queue."""

    function: str
    starting_position: str  # TRIM_HORIZON or LATEST
    batch_size: int
    parallelization_factor: int
    bisect_batch_on_error: bool
    retry_attempts: int
    max_record_age_seconds: int
    report_batch_item_failures: bool
    # Lambda's filter pattern: only the records it matches invoke the function.
    filter_pattern: Mapping[str, Any] = field(default_factory=dict)

    def matches(self, record: Mapping[str, Any]) -> bool:
        return matches_pattern(self.filter_pattern, record)


PROCESS_MAPPING: Final = QueueMapping(
    function="process",
    batch_size=PROCESS_BATCH_SIZE,
    # Up to a second to fill a batch: fewer invocations when deliveries trickle in.
    max_batching_window_seconds=1,
    report_batch_item_failures=True,
    max_concurrency=DEFAULT_PROCESS_MAX_CONCURRENCY,
)

OUTBOX_MAPPING: Final = StreamMapping(
    function="outbox",
    starting_position="TRIM_HORIZON",
    batch_size=OUTBOX_BATCH_SIZE,
    parallelization_factor=OUTBOX_PARALLELIZATION_FACTOR,
    bisect_batch_on_error=True,
    retry_attempts=OUTBOX_RETRY_ATTEMPTS,
    # A record older than this is given up (to the on-failure queue, whence the sweeper
    # parks its item): stream records live 24 hours.
    max_record_age_seconds=OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS,
    report_batch_item_failures=True,
    # New outbox items only, which are always pending.
    filter_pattern={
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {"status": {"S": ["pending"]}}},
    },
)


def matches_pattern(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """What Lambda's event filtering does with a pattern of exact values: every key of the
    pattern must be in the event, a nested pattern matching its nested object, a list naming
    the value. Anything else in a pattern (prefix, numeric, exists...) is refused."""
    for key, wanted in pattern.items():
        if key not in event:
            return False
        value = event[key]
        if isinstance(wanted, Mapping):
            if not isinstance(value, Mapping) or not matches_pattern(wanted, value):
                return False
        elif isinstance(wanted, list) and all(isinstance(w, str | int | float) for w in wanted):
            if value not in wanted:
                return False
        else:
            raise ValueError(f"filter rule not matched locally: {key}: {wanted!r}")
    return True
