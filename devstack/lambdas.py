"""What the Lambda runtime gives a handler: a context object."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Final

from infra.settings import (
    OUTBOX_TIMEOUT_SECONDS,
    STATEMENT_TIMEOUT_SECONDS,
    SWEEPER_TIMEOUT_SECONDS,
)


@dataclass
class LambdaContext:
    function_name: str
    memory_limit_in_mb: int = 256
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    @property
    def invoked_function_arn(self) -> str:
        return f"arn:aws:lambda:us-east-1:000000000000:function:{self.function_name}"

    def get_remaining_time_in_millis(self) -> int:
        """The function's whole timeout, as at an invocation's start (local runs never near
        it): the senders start an item only while its worst case fits."""
        return LOCAL_TIMEOUTS_MS.get(self.function_name, 30_000)


LOCAL_TIMEOUTS_MS: Final = {
    "umavez-outbox": OUTBOX_TIMEOUT_SECONDS * 1000,
    "umavez-sweeper": SWEEPER_TIMEOUT_SECONDS * 1000,
    "umavez-statement": STATEMENT_TIMEOUT_SECONDS * 1000,
}
