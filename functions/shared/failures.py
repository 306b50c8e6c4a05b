"""Why a delivery failed, kept where a dead letter's reader finds it.

A message reaches the DLQ after process failed it `maxReceiveCount` times; SQS moves it as it
is (a message attribute cannot be added on the way), keeping its message id. So process
records each failure of a record -- its code and redacted message, the receive it happened on
-- in the ledger under that message id, the last one overwriting the one before: what
`umavez dlq list` shows beside each dead letter is its last failure's reason. The record
expires (TTL) when the DLQ would have dropped the message anyway.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import ClientError

from functions.shared import tables
from functions.shared.dynamo import from_attributes, raise_unclassified, to_attributes
from functions.shared.outbox import iso_time
from functions.shared.redaction import error_text

FAILURE_SORT: Final = "FAILURE"
# The DLQ's retention (infra/constructs/queues.py): a reason outlives its message a little.
KEPT_SECONDS: Final = 15 * 86_400
BATCH_GET_LIMIT: Final = 100


def failure_pk(message_id: str) -> str:
    return f"FAILURE#{message_id}"


@dataclass(frozen=True)
class Failure:
    message_id: str
    reason: str
    receive: int
    at: str


class FailureRecords:
    def __init__(self, dynamodb: Any, ledger_table: str, clock: Callable[[], float]) -> None:
        self._db = dynamodb
        self._table = ledger_table
        self._clock = clock

    def remember(
        self, message_id: str, event_id: str | None, error: BaseException, receive: int
    ) -> None:
        """This receive's failure, over the one before (one unconditional write)."""
        now = self._clock()
        self._db.put_item(
            TableName=self._table,
            Item=to_attributes(
                {
                    tables.PARTITION_KEY: failure_pk(message_id),
                    tables.SORT_KEY: FAILURE_SORT,
                    "message_id": message_id,
                    "event_id": event_id,
                    "reason": error_text(error),
                    "receive": receive,
                    "at": iso_time(now),
                    tables.EXPIRES_AT: int(now) + KEPT_SECONDS,
                }
            ),
        )

    def last_failures(self, message_ids: Iterable[str]) -> Mapping[str, Failure]:
        """The last recorded failure of each message that has one."""
        wanted = sorted(set(message_ids))
        found: dict[str, Failure] = {}
        for start in range(0, len(wanted), BATCH_GET_LIMIT):
            keys = [
                to_attributes({tables.PARTITION_KEY: failure_pk(i), tables.SORT_KEY: FAILURE_SORT})
                for i in wanted[start : start + BATCH_GET_LIMIT]
            ]
            request: dict[str, Any] = {self._table: {"Keys": keys}}
            while request:
                try:
                    response = self._db.batch_get_item(RequestItems=request)
                except ClientError as exc:
                    raise_unclassified(exc, "BatchGetItem")
                for item in map(from_attributes, response["Responses"].get(self._table, [])):
                    found[str(item["message_id"])] = Failure(
                        str(item["message_id"]),
                        str(item.get("reason", "")),
                        int(item.get("receive", 0)),
                        str(item.get("at", "")),
                    )
                request = response.get("UnprocessedKeys") or {}
        return found
