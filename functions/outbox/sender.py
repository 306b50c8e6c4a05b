"""Send each outbox item through its channels: claimed, sent with its key, marked sent.

The claim is a conditional update (`pending -> sending`, or a `sending` whose lease ran out)
with a fresh claim token, so two invocations never send the same item at once; every later
write requires that token. A crash after the send but before `sent` leaves the lease to run
out and the sweeper re-drives it: the sink sees the same key again (at-least-once, one intent).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from functions.outbox.channels import Channel, ChannelError
from functions.shared import tables
from functions.shared.domain import financial_status
from functions.shared.dynamo import (
    from_attributes,
    is_condition_failure,
    raise_unclassified,
    to_attributes,
)
from functions.shared.errors import UmavezError
from functions.shared.outbox import OutboxItem, OutboxStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


class SendResult(StrEnum):
    SENT = "sent"
    SKIPPED = "skipped"  # already sent, dead, leased by another sender, or not due yet
    RETRY_LATER = "retry_later"
    DEAD = "dead"


@dataclass(frozen=True)
class SendPolicy:
    lease_seconds: int = 60
    max_attempts: int = 8
    backoff_base_seconds: int = 30
    backoff_cap_seconds: int = 3600

    def backoff(self, attempts: int) -> int:
        """Exponential: 30 s, 60 s, 120 s ... capped at an hour."""
        return int(
            min(self.backoff_cap_seconds, self.backoff_base_seconds * 2 ** max(0, attempts - 1))
        )


@dataclass(frozen=True)
class Sent:
    outbox_id: str
    result: SendResult
    attempts: int = 0
    detail: str = ""


class LeaseLostError(Exception):
    """Our lease ran out and another sender claimed the item; it carries on from here."""


class OutboxSender:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_name: str,
        channels: Sequence[Channel],
        clock: Callable[[], float],
        policy: SendPolicy | None = None,
        ledger_table: str | None = None,
    ) -> None:
        self._db = dynamodb
        self._table = table_name
        self._channels = channels
        self._clock = clock
        self._policy = policy or SendPolicy()
        self._ledger = ledger_table

    def deliver(self, outbox_id: str, *, only_if_due: bool) -> Sent:
        """Claim, send through each channel not yet done, mark sent; on failure back off.

        The stream path passes only_if_due=False: its own retries are the first, immediate
        tier. The sweeper passes True and respects the backoff schedule.
        """
        token = uuid.uuid4().hex
        claimed = self._claim(outbox_id, token, only_if_due)
        if claimed is None:
            return Sent(outbox_id, SendResult.SKIPPED)
        item = OutboxItem.model_validate(claimed)
        try:
            try:
                item = self._as_of_now(item)
            except UmavezError as exc:
                # Nothing was sent: back off like a sink failure, never leave it `sending`.
                return self._back_off(item.outbox_id, token, item.attempts, f"order read: {exc}")
            return self._send_claimed(item, token, set(claimed.get("channels_sent", set())))
        except LeaseLostError:
            # Another sender holds the item now and finishes it, with the same key.
            return Sent(outbox_id, SendResult.SKIPPED, item.attempts, "lease lost")

    def _send_claimed(self, item: OutboxItem, token: str, done: set[str]) -> Sent:
        """Channels taken are recorded with the item's next state, not one write each: a crash
        in between resends them with the same key (at-least-once), and a failure records the
        ones that took it so the retry skips them."""
        sent_now: set[str] = set()
        try:
            for channel in self._channels:
                if channel.name not in done and channel.applies_to(item):
                    channel.send(item)
                    sent_now.add(channel.name)
        except ChannelError as exc:
            return self._back_off(item.outbox_id, token, item.attempts, str(exc), sent_now)
        self._update(
            item.outbox_id,
            token,
            "SET #status = :sent, sent_at = :now REMOVE #bucket, claim_token"
            + (" ADD channels_sent :channels" if sent_now else ""),
            {
                ":sent": OutboxStatus.SENT.value,
                ":now": int(self._clock()),
                ":channels": sent_now or None,
            },
        )
        return Sent(item.outbox_id, SendResult.SENT, item.attempts)

    def _as_of_now(self, item: OutboxItem) -> OutboxItem:
        """The order's financial status as of sending, and the recipient learned at payment
        time for items (refunds, disputes) whose own provider object names none."""
        if self._ledger is None:
            return item
        try:
            response = self._db.get_item(
                TableName=self._ledger,
                Key=to_attributes(
                    {
                        tables.PARTITION_KEY: tables.order_pk(item.order_id),
                        tables.SORT_KEY: tables.ORDER_SORT,
                    }
                ),
                ConsistentRead=True,
            )
        except ClientError as exc:
            raise_unclassified(exc, "GetItem")
        order = from_attributes(response.get("Item", {}))
        return item.model_copy(
            update={
                "financial_status": financial_status(order).value,
                "recipient": item.recipient or order.get("recipient"),
            }
        )

    def bury_if_exhausted(self, outbox_id: str) -> bool:
        """An item out of attempts (e.g. a crash during its last one) becomes dead, visibly."""
        try:
            self._db.update_item(
                TableName=self._table,
                Key=to_attributes({tables.OUTBOX_KEY: outbox_id}),
                UpdateExpression="SET #status = :dead REMOVE #bucket, claim_token",
                ConditionExpression=(
                    "attempts >= :max AND #due <= :now AND #status IN (:pending, :sending)"
                ),
                ExpressionAttributeNames={
                    "#status": "status",
                    "#bucket": tables.OUTBOX_DUE_BUCKET,
                    "#due": tables.OUTBOX_DUE_AT,
                },
                ExpressionAttributeValues=to_attributes(
                    {
                        ":dead": OutboxStatus.DEAD.value,
                        ":max": self._policy.max_attempts,
                        ":now": int(self._clock()),
                        ":pending": OutboxStatus.PENDING.value,
                        ":sending": OutboxStatus.SENDING.value,
                    }
                ),
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return False
            raise_unclassified(exc, "UpdateItem")
        return True

    def _claim(self, outbox_id: str, token: str, only_if_due: bool) -> dict[str, Any] | None:
        now = int(self._clock())
        pending = "#status = :pending" + (" AND #due <= :now" if only_if_due else "")
        try:
            response = self._db.update_item(
                TableName=self._table,
                Key=to_attributes({tables.OUTBOX_KEY: outbox_id}),
                UpdateExpression=(
                    "SET #status = :sending, claim_token = :token, #due = :lease_end "
                    "ADD attempts :one"
                ),
                ConditionExpression=(
                    f"attribute_exists(#id) AND attempts < :max AND "
                    f"(({pending}) OR (#status = :sending AND #due <= :now))"
                ),
                ExpressionAttributeNames={
                    "#id": tables.OUTBOX_KEY,
                    "#status": "status",
                    "#due": tables.OUTBOX_DUE_AT,
                },
                ExpressionAttributeValues=to_attributes(
                    {
                        ":sending": OutboxStatus.SENDING.value,
                        ":pending": OutboxStatus.PENDING.value,
                        ":token": token,
                        ":lease_end": now + self._policy.lease_seconds,
                        ":now": now,
                        ":one": 1,
                        ":max": self._policy.max_attempts,
                    }
                ),
                ReturnValues="ALL_NEW",
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                return None
            raise_unclassified(exc, "UpdateItem")
        return from_attributes(response["Attributes"])

    def _back_off(
        self,
        outbox_id: str,
        token: str,
        attempts: int,
        error: str,
        sent_now: set[str] | None = None,
    ) -> Sent:
        record = " ADD channels_sent :channels" if sent_now else ""
        values: dict[str, object] = {":error": error[:500], ":channels": sent_now or None}
        if attempts >= self._policy.max_attempts:
            self._update(
                outbox_id,
                token,
                "SET #status = :dead, last_error = :error REMOVE #bucket, claim_token" + record,
                {**values, ":dead": OutboxStatus.DEAD.value},
            )
            return Sent(outbox_id, SendResult.DEAD, attempts, error)
        retry_at = int(self._clock()) + self._policy.backoff(attempts)
        self._update(
            outbox_id,
            token,
            "SET #status = :pending, #due = :retry_at, last_error = :error REMOVE claim_token"
            + record,
            {**values, ":pending": OutboxStatus.PENDING.value, ":retry_at": retry_at},
        )
        return Sent(outbox_id, SendResult.RETRY_LATER, attempts, error)

    def _update(
        self, outbox_id: str, token: str, expression: str, values: dict[str, object]
    ) -> None:
        """An update that only the current claim holder may make."""
        names = {
            "#status": "status",
            "#bucket": tables.OUTBOX_DUE_BUCKET,
            "#due": tables.OUTBOX_DUE_AT,
        }
        try:
            self._db.update_item(
                TableName=self._table,
                Key=to_attributes({tables.OUTBOX_KEY: outbox_id}),
                UpdateExpression=expression,
                ConditionExpression="claim_token = :token",
                ExpressionAttributeNames={k: v for k, v in names.items() if k in expression},
                ExpressionAttributeValues=to_attributes({**values, ":token": token}),
            )
        except ClientError as exc:
            if is_condition_failure(exc):
                raise LeaseLostError(outbox_id) from exc
            raise_unclassified(exc, "UpdateItem")
