"""What becomes of a record that raised: a plain function of the error and how often SQS has
delivered the record, so the policy is read and tested without a queue.

- an entry whose order is not bound yet is redelivered by SQS (its visibility timeout is the
  pause) until `park_after` receives, then parked in the waiting room: waiting is not failing,
  so neither is recorded as a failure, and a parked record never reaches the dead-letter queue;
- a transient error (a provider API or DynamoDB that cannot answer now) is redelivered;
- anything else is a failure: redelivered too, and after the queue's receive limit the DLQ
  holds it. Both record their reason, which is what a dead letter shows.
"""

from __future__ import annotations

from enum import Enum

from functions.shared.domain import Outcome
from functions.shared.errors import OrderNotYetKnownError, RetryableError


class Disposition(Enum):
    AWAIT_BINDING = "await_binding"
    PARK = "park"
    RETRY = "retry"
    FAIL = "fail"

    @property
    def outcome(self) -> Outcome:
        """The outcome counted and logged for it."""
        return _OUTCOMES[self]

    @property
    def is_failure(self) -> bool:
        """Its reason is recorded for the dead letter it may become."""
        return self in (Disposition.RETRY, Disposition.FAIL)


_OUTCOMES = {
    Disposition.AWAIT_BINDING: Outcome.RETRIED,
    Disposition.PARK: Outcome.WAITING,
    Disposition.RETRY: Outcome.RETRIED,
    Disposition.FAIL: Outcome.FAILED,
}


def disposition(error: BaseException, receives: int, park_after: int | None) -> Disposition:
    """`park_after`: the receives from which an unbound entry is parked (None: no waiting
    room, SQS alone redelivers it)."""
    if isinstance(error, OrderNotYetKnownError):
        parks = park_after is not None and receives >= park_after
        return Disposition.PARK if parks else Disposition.AWAIT_BINDING
    if isinstance(error, RetryableError):
        return Disposition.RETRY
    return Disposition.FAIL
