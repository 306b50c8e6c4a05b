"""The changes to moto's SQS the local stack's server still makes (`devstack/server.py`): each
is a cost of moto's that grows with the depth of a queue, which a burst (`make burst`: 20,000
deliveries queued at once) cannot afford. DynamoDB is no longer moto's in the server (it is the
project's in-memory store, `devstack/memory`); these are all that is left of the patches, until
the queues too are the project's own. `install()` checks moto's version and that every
attribute it replaces exists, and refuses to start otherwise.

1. SQS: moto checks each received message's retention by computing *all* the queue's
   attributes, approximate counts included, each a pass over every message: a receive costs
   O(depth²). Reading the retention period directly gives the same answer in O(1).

2. SQS again: `SendMessage` reads `queue.attributes` for one flag (content-based
   deduplication), and so computes the approximate counts, passes over every message: a send
   cost O(depth), 80 ms at 600 messages. While a send runs, the queue's attributes leave out
   the three approximate counts (nothing in a send reads them).

3. SQS's `DeleteMessageBatch` deletes entry by entry, and each deletion walks the queue twice
   (is the handle valid? then the list rebuilt without it): ten walks or twenty per batch, 12
   ms a batch with thousands queued. The batch's handles are deleted in one walk, with moto's
   answers: a handle of a message deleted already succeeds again, one no message ever had
   fails as `ReceiptHandleIsInvalid`, in the entries' order.

4. SQS's `GetQueueAttributes` by name computes all of the queue's attributes (the three
   approximate counts are each a pass over every message) three times for each name asked:
   the drain's look at a queue thousands deep cost 50 ms. The named attributes are read from
   one computation, in the order asked; `All`, and a name moto refuses, go to moto.

5. An SQS receive walks the list of the queue's visible messages, built whole first (two
   clock reads per message, thousands queued behind a backlog), to take the first ten: ten
   milliseconds a receive. In a receive that does not wait, the visible messages are handed
   to moto's loop one at a time, in the same order, as it takes them; a receive that waits
   (its loop asks whether any message is visible) gets moto's list.

6. moto draws its identifiers a character at a time: 52 `random.choice` calls for the request
   id of every answer, 185 for the receipt handle of every message received (a twentieth of
   the SQS server's time). Each is drawn in one `choices` call, from the same characters, by
   the same (seedable) generator.
"""

from __future__ import annotations

import importlib.metadata
import string
from typing import Any

import moto.sqs.models
from moto.core.utils import unix_time
from moto.moto_api._internal import mock_random
from moto.moto_api._internal.moto_random import MotoRandom
from moto.sqs.models import Message, Queue, SQSBackend

_ORIGINAL_SEND = SQSBackend.send_message
_ORIGINAL_QUEUE_ATTRIBUTES = SQSBackend.get_queue_attributes
_ORIGINAL_RECEIVE = SQSBackend.receive_message
RECEIPT_HANDLE_LENGTH = 185
_WITHOUT_COUNTS = [a for a in Queue.BASE_ATTRIBUTES if not a.startswith("ApproximateNumberOf")]


def is_message_valid_based_on_retention_period(
    self: SQSBackend, queue_name: str, message: Message
) -> bool:
    queue = self.get_queue(queue_name)
    retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000  # type: ignore[attr-defined, operator]
    return bool(retain_until > unix_time())


def send_message(self: SQSBackend, queue_name: str, *args: Any, **kwargs: Any) -> Any:
    """moto's send, the queue's attributes computed without their approximate counts."""
    queue = self.get_queue(queue_name)
    queue.BASE_ATTRIBUTES = _WITHOUT_COUNTS  # the instance's list hides the class's
    try:
        return _ORIGINAL_SEND(self, queue_name, *args, **kwargs)
    finally:
        del queue.BASE_ATTRIBUTES


def delete_message_batch(
    self: SQSBackend, queue_name: str, receipts: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    queue = self.get_queue(queue_name)
    handles = {str(r["ReceiptHandle"]) for r in receipts}
    wanted = handles - queue.deleted_messages
    if wanted:
        kept = []
        for message in queue._messages:
            if wanted.isdisjoint(message.all_receipt_handles):
                kept.append(message)
                continue
            queue.pending_messages.discard(message)
            queue.deleted_messages.update(message.all_receipt_handles)  # type: ignore[arg-type]
        queue._messages = kept
    success: list[str] = []
    errors: list[dict[str, Any]] = []
    for receipt in receipts:
        if receipt["ReceiptHandle"] in queue.deleted_messages:
            success.append(receipt["Id"])
        else:
            errors.append(
                {
                    "Id": receipt["Id"],
                    "SenderFault": True,
                    "Code": "ReceiptHandleIsInvalid",
                    "Message": f'The input receipt handle "{receipt["ReceiptHandle"]}" is not a '
                    "valid receipt handle.",
                }
            )
    return success, errors


def random_string(
    self: MotoRandom, length: int = 20, include_digits: bool = True, lower_case: bool = False
) -> str:
    """moto's identifiers (a request id on every answer), drawn in one call."""
    pool = string.ascii_letters + (string.digits if include_digits else "")
    drawn = "".join(self.choices(pool, k=length))
    return drawn.lower() if lower_case else drawn


def receipt_handle() -> str:
    """A receipt handle as moto makes one (185 lowercase letters), drawn in one call."""
    return "".join(mock_random.choices(string.ascii_lowercase, k=RECEIPT_HANDLE_LENGTH))


class _LazyMessages:
    """Whether a receive is running that never waits: `Queue.messages` is then read once,
    front to back, and only until the receive has its messages."""

    on = False


def queue_messages(self: Queue) -> Any:
    """moto's visible, undelayed messages, in the queue's order: a list, or, to the first read
    of a receive that never waits (its loop), the same messages one by one as the receive
    takes them. Any later read in that receive (a FIFO dead-letter queue counting its
    messages) gets the list."""
    visible = (m for m in self._messages if m.visible and not m.delayed)
    if _LazyMessages.on:
        _LazyMessages.on = False
        return visible
    return list(visible)


def receive_message(
    self: SQSBackend,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    *args: Any,
    **kwargs: Any,
) -> Any:
    _LazyMessages.on = not wait_seconds_timeout
    try:
        return _ORIGINAL_RECEIVE(self, queue_name, count, wait_seconds_timeout, *args, **kwargs)
    finally:
        _LazyMessages.on = False


def get_queue_attributes(
    self: SQSBackend, queue_name: str, attribute_names: list[str]
) -> dict[str, Any]:
    """Named attributes (not `All`, all valid) from one computation of the queue's attributes;
    anything else as moto answers it."""
    queue = self.get_queue(queue_name)
    valid = {*queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES}
    if not attribute_names or not set(attribute_names) <= valid:
        return dict(_ORIGINAL_QUEUE_ATTRIBUTES(self, queue_name, attribute_names))
    now = queue.attributes
    return {name: now[name] for name in attribute_names if now.get(name) is not None}


_ABSENT = object()
# What install() replaced, to put back: (owner, attribute, its own value or _ABSENT).
_REPLACED: list[tuple[Any, str, Any]] = []


def _patches() -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement) for each change above."""
    return [
        (
            SQSBackend,
            "is_message_valid_based_on_retention_period",
            is_message_valid_based_on_retention_period,
        ),
        (SQSBackend, "send_message", send_message),
        (SQSBackend, "delete_message_batch", delete_message_batch),
        (SQSBackend, "get_queue_attributes", get_queue_attributes),
        (Queue, "messages", property(queue_messages)),
        (SQSBackend, "receive_message", receive_message),
        (MotoRandom, "get_random_string", random_string),
        (moto.sqs.models, "generate_receipt_handle", receipt_handle),
    ]


# The moto these changes were written against and measured on (pyproject.toml pins it).
MOTO_VERSION = "5.2.5"


class MotoChangedError(RuntimeError):
    """moto is not the version these changes were written for, or an attribute they replace is
    gone: a patch would be silently inert (or wrong), so the server refuses to start."""


def check(patches: list[tuple[Any, str, Any]] | None = None) -> None:
    """Fail loudly, naming what moved, unless moto is MOTO_VERSION and every attribute to be
    replaced exists."""
    installed = importlib.metadata.version("moto")
    if installed != MOTO_VERSION:
        raise MotoChangedError(
            f"moto {installed} is installed; devstack/speedups/moto_patches.py was written for "
            f"moto {MOTO_VERSION}: review each change against the new moto, then MOTO_VERSION"
        )
    for owner, name, _ in _patches() if patches is None else patches:
        if not hasattr(owner, name):
            where = getattr(owner, "__name__", repr(owner))
            raise MotoChangedError(
                f"moto {installed} has no {where}.{name}: the change replacing it is inert"
            )


def install() -> None:
    """Patch moto in this process: the local stack's server (`devstack/server.py`), or a
    `make histories` worker. Checked first: a moto that moved fails here, naming what moved."""
    if _REPLACED:
        return
    check()
    for owner, name, replacement in _patches():
        _REPLACED.append((owner, name, vars(owner).get(name, _ABSENT)))
        setattr(owner, name, replacement)


def uninstall() -> None:
    for owner, name, original in reversed(_REPLACED):
        if original is _ABSENT:
            delattr(owner, name)  # it was inherited: the base's shows through again
        else:
            setattr(owner, name, original)
    _REPLACED.clear()
