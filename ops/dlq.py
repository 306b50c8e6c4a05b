"""The dead-letter queue: what is in it, and moving messages back to the webhook queue.

A message lands in the DLQ after process failed it `maxReceiveCount` times (a malformed
payload, a refused API token, ...). Once the cause is fixed it goes back to the webhook queue,
body and attributes unchanged: processing is idempotent, so a redrive can only apply what was
not applied. SQS's own redrive (`StartMessageMoveTask`) moves everything and is not in moto;
this is receive, send, then delete -- the delete only after the send succeeded, so a failure
in between leaves the message in both queues (a duplicate, which changes nothing), never in
neither. Why a message failed: process records each failure's code and redacted message
under the message id (SQS keeps the id when it moves a message to the DLQ), and each letter
shows its last one (functions/shared/failures.py); the process logs have the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from functions.shared.errors import UmavezError
from functions.shared.failures import Failure
from functions.shared.redaction import redacted

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageAttributeValueTypeDef, MessageTypeDef

LOOK_SECONDS: Final = 60  # how long a listed message stays invisible to other readers
RECEIVE_BATCH: Final = 10
MAX_MESSAGES: Final = 1000  # per run; run again for more
NOTE_ATTRIBUTES: Final = ("reason", "replay", "redriven")
# The last recorded failure of each message id that has one (FailureRecords.last_failures).
LastFailures = Callable[[Iterable[str]], Mapping[str, Failure]]


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    provider: str | None
    event_id: str | None
    event_type: str | None
    receives: int  # by process, before it landed here (this look excluded)
    first_received_at: str | None
    sent_at: str | None
    note: str
    # Its last failure: code and redacted message, and the receive it happened on.
    reason: str | None
    body: str
    attributes: Mapping[str, MessageAttributeValueTypeDef]
    receipt_handle: str

    def describe(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "provider": self.provider,
            "event_id": self.event_id,
            "event_type": self.event_type,
            "receives": self.receives,
            "first_received_at": self.first_received_at,
            "sent_at": self.sent_at,
            "note": self.note,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Redriven:
    message_id: str
    event_id: str | None
    result: str  # moved | send failed: ... | moved; delete failed: ... | not found
    new_message_id: str | None = None


class DeadLetters:
    def __init__(
        self,
        sqs: SQSClient,
        dead_letter_url: str,
        queue_url: str,
        look_seconds: int = LOOK_SECONDS,
        wait_seconds: int = 1,
        max_messages: int = MAX_MESSAGES,
        last_failures: LastFailures | None = None,
    ) -> None:
        self._sqs = sqs
        self._dlq = dead_letter_url
        self._queue = queue_url
        self._look = look_seconds
        self._wait = wait_seconds
        self._max = max_messages
        self._last_failures = last_failures

    def letters(self) -> list[DeadLetter]:
        """Every message (up to `max_messages`), left in the DLQ and visible again."""
        letters = self._receive_all()
        self._release(letters)
        return letters

    def redrive(self, message_ids: Collection[str] | None = None) -> list[Redriven]:
        """Moves the messages named (all when None) back to the webhook queue, one by one."""
        letters = self._receive_all()
        chosen = [m for m in letters if message_ids is None or m.message_id in message_ids]
        results = [self._move(letter) for letter in chosen]
        self._release([m for m in letters if m not in chosen])
        self._release([m for m, r in zip(chosen, results, strict=True) if r.new_message_id is None])
        found = {m.message_id for m in letters}
        results += [Redriven(i, None, "not found") for i in message_ids or () if i not in found]
        return results

    def _move(self, letter: DeadLetter) -> Redriven:
        try:
            sent = self._sqs.send_message(
                QueueUrl=self._queue,
                MessageBody=letter.body,
                MessageAttributes=dict(letter.attributes),
            )
        except (ClientError, BotoCoreError) as exc:
            return Redriven(letter.message_id, letter.event_id, f"send failed: {exc}")
        new_id = sent["MessageId"]
        try:
            self._sqs.delete_message(QueueUrl=self._dlq, ReceiptHandle=letter.receipt_handle)
        except (ClientError, BotoCoreError) as exc:
            return Redriven(
                letter.message_id, letter.event_id, f"moved; delete failed: {exc}", new_id
            )
        return Redriven(letter.message_id, letter.event_id, "moved", new_id)

    def _receive_all(self) -> list[DeadLetter]:
        """Receives until the queue answers nothing; received messages stay invisible for
        `look_seconds`, so each is seen once (a second sighting keeps the newest handle)."""
        by_id: dict[str, DeadLetter] = {}
        while len(by_id) < self._max:
            messages = self._sqs.receive_message(
                QueueUrl=self._dlq,
                MaxNumberOfMessages=min(RECEIVE_BATCH, self._max - len(by_id)),
                VisibilityTimeout=self._look,
                WaitTimeSeconds=self._wait,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                break
            by_id |= {m["MessageId"]: _dead_letter(m) for m in messages}
        if self._last_failures is None or not by_id:
            return list(by_id.values())
        try:
            failures = self._last_failures(by_id)
        except (ClientError, BotoCoreError, UmavezError):
            # The letters matter more than their reasons: listed without them.
            failures = {}
        return [
            replace(letter, reason=_reason(failures[i])) if i in failures else letter
            for i, letter in by_id.items()
        ]

    def _release(self, letters: list[DeadLetter]) -> None:
        for letter in letters:
            try:
                self._sqs.change_message_visibility(
                    QueueUrl=self._dlq, ReceiptHandle=letter.receipt_handle, VisibilityTimeout=0
                )
            except ClientError:
                continue  # it becomes visible anyway when its look runs out


def _dead_letter(message: MessageTypeDef) -> DeadLetter:
    attributes = {
        name: _sendable(value) for name, value in message.get("MessageAttributes", {}).items()
    }
    system = message.get("Attributes", {})

    def text(name: str) -> str | None:
        value = attributes.get(name)
        return value.get("StringValue") if value else None

    note = ", ".join(f"{n}={text(n)}" for n in NOTE_ATTRIBUTES if text(n))
    return DeadLetter(
        message_id=message["MessageId"],
        provider=text("provider"),
        event_id=text("event_id"),
        event_type=text("event_type"),
        receives=max(int(system.get("ApproximateReceiveCount", 1)) - 1, 0),
        first_received_at=_iso(system.get("ApproximateFirstReceiveTimestamp")),
        sent_at=_iso(system.get("SentTimestamp")),
        note=note,
        reason=None,
        body=message["Body"],
        attributes=attributes,
        receipt_handle=message["ReceiptHandle"],
    )


def _reason(failure: Failure) -> str:
    # Redacted again: what was recorded before process redacted its errors.
    return f"{redacted(failure.reason)} (receive {failure.receive}, {failure.at})"


def _sendable(value: Mapping[str, Any]) -> MessageAttributeValueTypeDef:
    """A received attribute as SendMessage takes it: its type and its value, nothing else."""
    kept: Any = {
        part: value[part] for part in ("DataType", "StringValue", "BinaryValue") if part in value
    }
    return kept  # type: ignore[no-any-return]


def _iso(milliseconds: str | None) -> str | None:
    if not milliseconds:
        return None
    moment = datetime.fromtimestamp(int(milliseconds) / 1000, tz=UTC)
    return moment.isoformat(timespec="seconds")
