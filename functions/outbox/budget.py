"""How long one outbox item can take at worst, and what a batch or a sweep does with that.

A Lambda timeout in the middle of an item loses what that item sent: the sends are recorded
with the item's next state, in one write after the last channel, so the stream's retry (or the
lease's end) sends them again. Every send is therefore bounded (these timeouts and retries are
the clients'), and an invocation starts an item only while that item's worst case still fits
in the time it has left; the rest are handed back unstarted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from botocore.config import Config

from functions.shared.errors import RetryableError

SEND_CONNECT_TIMEOUT_SECONDS: Final = 2
SEND_READ_TIMEOUT_SECONDS: Final = 5
# botocore's standard mode: the first try and one retry, after a jittered wait of at most 1 s.
SEND_MAX_ATTEMPTS: Final = 2
SEND_RETRY_WAIT_SECONDS: Final = 1
HTTP_TIMEOUT_SECONDS: Final = 5.0
# The senders' DynamoDB calls, bounded too (DynamoDB answers in milliseconds; the client's
# defaults, 60 s timeouts and up to ten attempts, would make any budget meaningless). An item
# makes at most three: the sweeper's claim, the read of its order, the one write of its outcome.
DYNAMODB_CONNECT_TIMEOUT_SECONDS: Final = 1
DYNAMODB_READ_TIMEOUT_SECONDS: Final = 1
DYNAMODB_MAX_ATTEMPTS: Final = 2
DYNAMODB_CALLS_PER_ITEM: Final = 3

# The SES and EventBridge clients the senders use.
SEND_CLIENT_CONFIG: Final = Config(
    connect_timeout=SEND_CONNECT_TIMEOUT_SECONDS,
    read_timeout=SEND_READ_TIMEOUT_SECONDS,
    retries={"total_max_attempts": SEND_MAX_ATTEMPTS, "mode": "standard"},
)
# Their DynamoDB client.
DYNAMODB_CLIENT_CONFIG: Final = Config(
    connect_timeout=DYNAMODB_CONNECT_TIMEOUT_SECONDS,
    read_timeout=DYNAMODB_READ_TIMEOUT_SECONDS,
    retries={"total_max_attempts": DYNAMODB_MAX_ATTEMPTS, "mode": "standard"},
)


def _call_worst_case(connect: int, read: int, attempts: int) -> int:
    """Every attempt connecting and reading to its timeout, with the waits between them."""
    return attempts * (connect + read) + (attempts - 1) * SEND_RETRY_WAIT_SECONDS


def item_worst_case_seconds() -> float:
    """EventBridge and SES each at their slowest, the HTTP sink's connect and read each to
    their timeout, and the item's DynamoDB calls at theirs."""
    aws_send = _call_worst_case(
        SEND_CONNECT_TIMEOUT_SECONDS, SEND_READ_TIMEOUT_SECONDS, SEND_MAX_ATTEMPTS
    )
    dynamodb = _call_worst_case(
        DYNAMODB_CONNECT_TIMEOUT_SECONDS, DYNAMODB_READ_TIMEOUT_SECONDS, DYNAMODB_MAX_ATTEMPTS
    )
    return 2 * aws_send + 2 * HTTP_TIMEOUT_SECONDS + DYNAMODB_CALLS_PER_ITEM * dynamodb


ITEM_RESERVE_MS: Final = int(item_worst_case_seconds() * 1000)


class OutOfTimeError(RetryableError):
    """Too little time was left to start an item: handed back unstarted."""


R = TypeVar("R")
T = TypeVar("T")


def has_time_for_an_item(remaining_ms: Callable[[], int]) -> bool:
    return remaining_ms() >= ITEM_RESERVE_MS


def only_within_budget(
    handle: Callable[[R], T], remaining_ms: Callable[[], int], on_cut: Callable[[R, int], None]
) -> Callable[[R], T]:
    """`handle`, started only while an item's worst case fits in the time left; otherwise
    `on_cut` is told (record, ms left) and the record fails unstarted with OutOfTimeError."""

    def handle_within_budget(record: R) -> T:
        left = remaining_ms()
        if left < ITEM_RESERVE_MS:
            on_cut(record, left)
            raise OutOfTimeError(f"{left} ms left, {ITEM_RESERVE_MS} needed for an item")
        return handle(record)

    return handle_within_budget
