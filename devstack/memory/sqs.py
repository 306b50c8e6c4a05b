"""SQS in memory, request and answer in the JSON protocol's shape (what boto3 sends with
`X-Amz-Target: AmazonSQS.<Operation>` and parses back): the queues the local stack makes,
standard and FIFO, with visibility timeouts, delays, receive counts and redrive to a
dead-letter queue, message and system attributes, and the batches.

Every cost is of the messages a request touches, not of the queue's depth: a receive walks
the queue from its oldest message and stops once it has its messages (in-flight and delayed
ones are passed over), a delete finds its message by receipt handle. A burst leaves tens of
thousands of messages queued at once (`make burst`).

Not kept: retention (a local stack lives minutes), long polling (a receive that finds nothing
answers at once: the server serializes every request, and a wait would hold the others).
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

Request = Mapping[str, Any]
Answer = dict[str, Any]
ACCOUNT = "123456789012"
DEFAULT_VISIBILITY = 30
MAX_BATCH = 10
_SYSTEM = ("ApproximateReceiveCount", "SentTimestamp", "ApproximateFirstReceiveTimestamp")


class SqsError(Exception):
    """What SQS answers with an error: its JSON code and the query protocol's code."""

    def __init__(self, code: str, message: str, query_code: str | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.query_code = query_code or code


def _no_queue() -> SqsError:
    return SqsError(
        "QueueDoesNotExist",
        "The specified queue does not exist.",
        "AWS.SimpleQueueService.NonExistentQueue",
    )


def _md5(text: str) -> str:
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


def attributes_md5(attributes: Mapping[str, Any]) -> str:
    """SQS's MD5 of message attributes: each, by name, as length-prefixed name, type, a
    transport byte and length-prefixed value."""
    digest = hashlib.md5(usedforsecurity=False)
    for name in sorted(attributes):
        value = attributes[name]
        kind = str(value["DataType"])
        digest.update(struct.pack(">I", len(name.encode())) + name.encode())
        digest.update(struct.pack(">I", len(kind.encode())) + kind.encode())
        if "BinaryValue" in value:
            raw = value["BinaryValue"]
            # The JSON protocol carries binary values in base64.
            data = base64.b64decode(raw) if isinstance(raw, str) else bytes(raw)
            digest.update(b"\x02" + struct.pack(">I", len(data)) + data)
        else:
            data = str(value["StringValue"]).encode()
            digest.update(b"\x01" + struct.pack(">I", len(data)) + data)
    return digest.hexdigest()


def _named(name: str, named: set[str]) -> bool:
    """Whether a receive asked for the message attribute `name` (All, .*, a prefix.*)."""
    if named & {"All", ".*"} or name in named:
        return True
    return any(name.startswith(n[:-1]) for n in named if n.endswith(".*"))


@dataclass
class Message:
    id: str
    body: str
    attributes: dict[str, Any]
    sent_ms: int
    visible_at: float
    group_id: str | None = None
    dedup_id: str | None = None
    sequence: str | None = None
    receive_count: int = 0
    first_receive_ms: int | None = None
    handles: list[str] = field(default_factory=list)

    def answer(self, handle: str, system: set[str], named: set[str]) -> Answer:
        """As a receive returns it, with the system and message attributes asked for."""
        values = {
            "ApproximateReceiveCount": str(self.receive_count),
            "SentTimestamp": str(self.sent_ms),
            "ApproximateFirstReceiveTimestamp": str(self.first_receive_ms or self.sent_ms),
            "SenderId": ACCOUNT,
            **({"MessageGroupId": self.group_id} if self.group_id else {}),
            **({"MessageDeduplicationId": self.dedup_id} if self.dedup_id else {}),
            **({"SequenceNumber": self.sequence} if self.sequence else {}),
        }
        answer: Answer = {
            "MessageId": self.id,
            "ReceiptHandle": handle,
            "MD5OfBody": _md5(self.body),
            "Body": self.body,
        }
        every = "All" in system
        attributes = {k: v for k, v in values.items() if every or k in system}
        if attributes:
            answer["Attributes"] = attributes
        kept = {k: v for k, v in self.attributes.items() if _named(k, named)}
        if kept:
            answer["MessageAttributes"] = kept
            answer["MD5OfMessageAttributes"] = attributes_md5(kept)
        return answer


@dataclass
class Queue:
    name: str
    url: str
    arn: str
    attributes: dict[str, str]
    # Oldest first: a dict keeps its insertion order and deletes by id in O(1).
    messages: dict[str, Message] = field(default_factory=dict)
    dead_letter: Queue | None = None
    max_receives: int = 0
    deduplicated: dict[str, float] = field(default_factory=dict)
    sequence: int = 0

    @property
    def fifo(self) -> bool:
        return self.attributes.get("FifoQueue") == "true"

    def visibility(self) -> int:
        return int(self.attributes.get("VisibilityTimeout", DEFAULT_VISIBILITY))

    def counts(self, now: float) -> dict[str, str]:
        visible = in_flight = delayed = 0
        for message in self.messages.values():
            if message.visible_at <= now:
                visible += 1
            elif message.receive_count:
                in_flight += 1
            else:
                delayed += 1
        return {
            "ApproximateNumberOfMessages": str(visible),
            "ApproximateNumberOfMessagesNotVisible": str(in_flight),
            "ApproximateNumberOfMessagesDelayed": str(delayed),
        }


class MemorySqs:
    """Every queue of one account and region, in memory. One lock around each request."""

    def __init__(self, region: str = "us-east-1", clock: Callable[[], float] = time.time) -> None:
        self.region = region
        self._clock = clock
        self.queues: dict[str, Queue] = {}
        self._by_handle: dict[str, tuple[Queue, str]] = {}
        self.lock = threading.Lock()
        self.base_url = "http://localhost"

    def now(self) -> float:
        return self._clock()

    # -- queues -----------------------------------------------------------------------------

    def queue(self, url_or_name: str) -> Queue:
        found = self.queues.get(str(url_or_name).rstrip("/").rsplit("/", 1)[-1])
        if found is None:
            raise _no_queue()
        return found

    def by_arn(self, arn: str) -> Queue | None:
        return self.queues.get(arn.rsplit(":", 1)[-1])

    def create(self, name: str, attributes: Mapping[str, str]) -> Queue:
        if name in self.queues:
            return self.queues[name]
        arn = f"arn:aws:sqs:{self.region}:{ACCOUNT}:{name}"
        queue = Queue(name, f"{self.base_url}/{ACCOUNT}/{name}", arn, dict(attributes))
        queue.attributes.setdefault("VisibilityTimeout", str(DEFAULT_VISIBILITY))
        queue.attributes.setdefault("DelaySeconds", "0")
        queue.attributes.setdefault("MessageRetentionPeriod", "345600")
        queue.attributes.setdefault("MaximumMessageSize", "262144")
        queue.attributes.setdefault("ReceiveMessageWaitTimeSeconds", "0")
        queue.attributes.setdefault("SqsManagedSseEnabled", "true")
        self._redrive(queue)
        self.queues[name] = queue
        return queue

    def _redrive(self, queue: Queue) -> None:
        if "RedrivePolicy" in queue.attributes:
            policy = json.loads(queue.attributes["RedrivePolicy"])
            queue.dead_letter = self.by_arn(str(policy["deadLetterTargetArn"]))
            if queue.dead_letter is None:
                raise SqsError("InvalidParameterValue", "Dead letter target does not exist")
            queue.max_receives = int(policy["maxReceiveCount"])

    def attributes(self, queue: Queue, names: list[str]) -> dict[str, str]:
        now = self.now()
        every = {
            **queue.attributes,
            "QueueArn": queue.arn,
            **queue.counts(now),
            "CreatedTimestamp": "0",
            "LastModifiedTimestamp": "0",
        }
        if "All" in names:
            return every
        unknown = [n for n in names if n not in every and n not in _OPTIONAL_ATTRIBUTES]
        if unknown:
            raise SqsError("InvalidAttributeName", f"Unknown Attribute {unknown[0]}.")
        return {name: every[name] for name in names if name in every}

    # -- messages ---------------------------------------------------------------------------

    def send(self, queue: Queue, entry: Request) -> Answer:
        now = self.now()
        body = str(entry["MessageBody"])
        if queue.fifo:
            if "MessageGroupId" not in entry:
                raise SqsError("MissingParameter", "The request must contain MessageGroupId.")
            dedup = entry.get("MessageDeduplicationId")
            if dedup is None and queue.attributes.get("ContentBasedDeduplication") == "true":
                dedup = hashlib.sha256(body.encode()).hexdigest()
            if dedup is None:
                raise SqsError(
                    "InvalidParameterValue",
                    "The queue should either have "
                    "ContentBasedDeduplication enabled or MessageDeduplicationId "
                    "provided explicitly",
                )
            if queue.deduplicated.get(dedup, 0) > now:
                return {"MessageId": str(uuid.uuid4()), "MD5OfMessageBody": _md5(body)}
            queue.deduplicated[dedup] = now + 300
        delay = int(entry.get("DelaySeconds", queue.attributes.get("DelaySeconds", 0)))
        message = Message(
            str(uuid.uuid4()),
            body,
            dict(entry.get("MessageAttributes") or {}),
            int(now * 1000),
            now + delay,
            entry.get("MessageGroupId"),
            dedup if queue.fifo else None,
        )
        if queue.fifo:
            queue.sequence += 1
            message.sequence = f"{queue.sequence:020d}"
        queue.messages[message.id] = message
        answer: Answer = {"MessageId": message.id, "MD5OfMessageBody": _md5(body)}
        if message.attributes:
            answer["MD5OfMessageAttributes"] = attributes_md5(message.attributes)
        if message.sequence:
            answer["SequenceNumber"] = message.sequence
        return answer

    def receive(self, queue: Queue, request: Request) -> list[Answer]:
        """The oldest visible messages, up to MaxNumberOfMessages (a FIFO queue's groups with a
        message in flight passed over); each past its redrive's receives moved to the
        dead-letter queue instead."""
        wanted = int(request.get("MaxNumberOfMessages", 1))
        timeout = int(request.get("VisibilityTimeout", queue.visibility()))
        system = set(request.get("AttributeNames", [])) | set(
            request.get("MessageSystemAttributeNames", [])
        )
        named = set(request.get("MessageAttributeNames", []))
        now = self.now()
        busy = (
            {m.group_id for m in queue.messages.values() if m.visible_at > now}
            if queue.fifo
            else set()
        )
        taken: list[Answer] = []
        moved: list[Message] = []
        dead = queue.dead_letter
        for message in queue.messages.values():
            if len(taken) >= wanted:
                break
            if message.visible_at > now or (queue.fifo and message.group_id in busy):
                continue
            if dead is not None and message.receive_count >= queue.max_receives:
                moved.append(message)
                continue
            message.receive_count += 1
            message.first_receive_ms = message.first_receive_ms or int(now * 1000)
            message.visible_at = now + timeout
            handle = uuid.uuid4().hex + uuid.uuid4().hex
            message.handles.append(handle)
            self._by_handle[handle] = (queue, message.id)
            taken.append(message.answer(handle, system, named))
        for message in moved:
            del queue.messages[message.id]
            message.visible_at = now
            if dead is not None:
                dead.messages[message.id] = message
        return taken

    def message_of(self, queue: Queue, handle: str) -> Message | None:
        """The message a receipt handle was given for (None: deleted already); an unknown
        handle is refused."""
        found = self._by_handle.get(handle)
        if found is None or found[0] is not queue:
            raise SqsError(
                "ReceiptHandleIsInvalid",
                f'The input receipt handle "{handle}" is not a valid receipt handle.',
            )
        return queue.messages.get(found[1])

    def delete(self, queue: Queue, handle: str) -> None:
        message = self.message_of(queue, handle)
        if message is not None:
            del queue.messages[message.id]

    def change_visibility(self, queue: Queue, handle: str, timeout: int) -> None:
        message = self.message_of(queue, handle)
        if message is not None:
            message.visible_at = self.now() + timeout


_OPTIONAL_ATTRIBUTES = frozenset(
    {
        "RedrivePolicy",
        "RedriveAllowPolicy",
        "Policy",
        "FifoQueue",
        "ContentBasedDeduplication",
        "KmsMasterKeyId",
        "KmsDataKeyReusePeriodSeconds",
        "DeduplicationScope",
        "FifoThroughputLimit",
        "SqsManagedSseEnabled",
    }
)
