"""Waiting for the embedded stack to be quiet: what is still in flight (the webhook queue, the
deliveries parked until their order is bound, the notifications not yet sent), read from the
local server, and the drain that waits until none is left, for as long as the work needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from devstack.pollers import Poller
from devstack.resources import LOCAL_WAIT_LIMIT_SECONDS, LocalResources, client
from devstack.sink import SinkRecorder
from devstack.stream_poller import StreamToLambda
from functions.shared import tables

# How long a drain may take: a base, plus this much per unit of work in flight at its peak.
DRAIN_BASE_SECONDS = 60.0
DRAIN_SECONDS_PER_ITEM = 1.0
# Without progress for this long (and nothing left to wait out), the drain gives up early.
DRAIN_STALL_SECONDS = 60.0


class WaitingClock:
    """The waiting re-drive's clock: real time, plus what a caller lets pass at once. The drill,
    once every delivery is in and nothing else moves, lets the wait limit pass instead of
    sleeping through it: what still waits then goes unmatched, as it would after the limit."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass(frozen=True)
class InFlight:
    """Work the pipeline has not finished: messages in the queue (visible, or received and not
    yet deleted), deliveries parked until their order is bound, notifications not yet sent."""

    queued: int = 0
    receiving: int = 0
    waiting: int = 0
    outbox: int = 0

    @property
    def total(self) -> int:
        return self.queued + self.receiving + self.waiting + self.outbox

    def __str__(self) -> str:
        return (
            f"{self.queued} queued, {self.receiving} being received, {self.waiting} waiting, "
            f"{self.outbox} notifications unsent"
        )


@dataclass(frozen=True)
class Drained:
    """How a drain ended: quiet (`ok`), or what was still in flight when it gave up."""

    ok: bool
    seconds: float
    bound_seconds: float
    peak: int
    left: InFlight
    waits_let_pass: bool = False

    def __bool__(self) -> bool:
        return self.ok


class PipelineCounts:
    """The counts of what is in flight, from the stack's queues and tables."""

    def __init__(self, aws_endpoint_url: str, resources: LocalResources) -> None:
        self._endpoint_url = aws_endpoint_url
        self._resources = resources
        self._clients: dict[str, Any] = {}

    def _client(self, service: str) -> Any:
        """One client per service for the drain's checks, made once: a drain checks every
        second, and making a client costs more CPU than the call it makes."""
        made = self._clients.get(service)
        if made is None:
            made = self._clients[service] = client(service, self._endpoint_url)
        return made

    def unfinished_outbox_items(self) -> int:
        """Items a try could not send yet (the due index's shards), and batches the stream's
        mapping gave up on that the sweeper has not parked yet (on-failure messages). A new
        item awaiting its first try is in no index: the drain waits for the stream to read
        empty instead."""
        dynamodb = self._client("dynamodb")
        attributes = self._client("sqs").get_queue_attributes(
            QueueUrl=self._resources.outbox_failures_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        given_up = sum(int(n) for n in attributes.values())
        return given_up + sum(
            int(
                dynamodb.query(
                    TableName=self._resources.tables.outbox,
                    IndexName=tables.OUTBOX_DUE_INDEX,
                    KeyConditionExpression="#b = :due",
                    ExpressionAttributeNames={"#b": tables.OUTBOX_DUE_BUCKET},
                    ExpressionAttributeValues={":due": {"S": bucket}},
                    Select="COUNT",
                )["Count"]
            )
            for bucket in tables.due_buckets()
        )

    def waiting_deliveries(self) -> int:
        """Deliveries parked until their order is bound (until unmatched, locally in seconds)."""
        response = self._client("dynamodb").query(
            TableName=self._resources.tables.ledger,
            KeyConditionExpression="#pk = :waiting",
            ExpressionAttributeNames={"#pk": tables.PARTITION_KEY},
            ExpressionAttributeValues={":waiting": {"S": tables.WAITING_PK}},
            Select="COUNT",
        )
        return int(response["Count"])

    def queued_messages(self) -> tuple[int, int]:
        """Messages in the webhook queue: (visible, received and not yet deleted)."""
        attributes = self._client("sqs").get_queue_attributes(
            QueueUrl=self._resources.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"]),
            int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        )

    def dead_letters(self) -> int:
        attributes = self._client("sqs").get_queue_attributes(
            QueueUrl=self._resources.dead_letter_url,
            AttributeNames=["ApproximateNumberOfMessages"],
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

    def in_flight(self) -> InFlight:
        queued, receiving = self.queued_messages()
        return InFlight(
            queued, receiving, self.waiting_deliveries(), self.unfinished_outbox_items()
        )


class Drain:
    """Waits for the stack's pipeline to be quiet: its process pollers, the outbox's stream
    poller and the sink idle, and nothing in flight."""

    def __init__(
        self,
        counts: PipelineCounts,
        process_pollers: Sequence[Poller],
        stream_poller: StreamToLambda,
        sink: SinkRecorder,
        waiting_clock: WaitingClock,
    ) -> None:
        self._counts = counts
        self._process_pollers = process_pollers
        self._stream_poller = stream_poller
        self._sink = sink
        self._waiting_clock = waiting_clock

    def __call__(
        self,
        *,
        let_waits_pass: bool = False,
        base_seconds: float = DRAIN_BASE_SECONDS,
        seconds_per_item: float = DRAIN_SECONDS_PER_ITEM,
        stall_seconds: float | None = None,
        sweep: Callable[[], object] | None = None,
    ) -> Drained:
        """Wait until queues, stream and outbox are quiet (three checks in a row), for as long
        as the work in flight needs: at most `base_seconds` plus `seconds_per_item` for each
        unit of work at its peak, and never more than `stall_seconds` while nothing moves.

        A delivery waiting for its binding moves on its own only at the wait limit. With
        `let_waits_pass` (every delivery is in), once nothing else is in flight the waiting
        re-drive's clock is moved past the limit: what still waits goes unmatched now instead
        of after the limit. Without it, the stall allowance outlasts the limit.

        An item due again (a notification re-opened for the e-mail its order learned late) is
        the sweeper's to send. With the sweeper's schedule stopped (`umavez cost`), `sweep` runs
        it whenever due items are all that is left, as its schedule would.
        """
        if stall_seconds is None:
            stall_seconds = DRAIN_STALL_SECONDS if let_waits_pass else LOCAL_WAIT_LIMIT_SECONDS + 30
        started = time.monotonic()
        stalled_at = started + stall_seconds
        quiet = only_waiting = peak = empty_reads = 0
        bound = base_seconds
        waits_let_pass = False
        left = previous = InFlight()
        stream, sink = self._stream_poller, self._sink
        try:
            while True:
                busy = any(p.busy for p in [*self._process_pollers, stream, sink])
                left = self._read(left)
                now = time.monotonic()
                peak = max(peak, left.total)
                bound = base_seconds + seconds_per_item * peak
                if busy or left != previous:  # progress: the stall allowance starts again
                    stalled_at, previous = now + stall_seconds, left
                if not busy and left.total == 0 and sink.settled():
                    quiet += 1
                    if quiet == 1:
                        empty_reads = stream.stats["empty_reads"]
                    # Quiet, and the stream read empty twice since: no new item is unread.
                    stream_read = stream.stats["empty_reads"] >= empty_reads + 2
                    if quiet >= 3 and stream_read:
                        return Drained(True, now - started, bound, peak, left, waits_let_pass)
                else:
                    quiet = 0
                if sweep is not None and not busy and 0 < left.outbox == left.total:
                    sweep()
                only_waiting = self._only_waiting(only_waiting, left)
                if let_waits_pass and only_waiting >= 3 and self._waiting_clock.offset == 0:
                    self._waiting_clock.offset = LOCAL_WAIT_LIMIT_SECONDS + 1
                    waits_let_pass = True
                if now >= min(started + bound, stalled_at):
                    break
                # Every check goes through the server's one lock: the queue is one request, the
                # tables nine Queries of an index or a partition (a few ms each).
                time.sleep(0.5 if left.total == 0 else 1.0)
            left = self._counts.in_flight()  # all of it, for the report
        finally:
            self._waiting_clock.offset = 0  # items parked from now on wait their own time
        return Drained(False, time.monotonic() - started, bound, peak, left, waits_let_pass)

    def _read(self, left: InFlight) -> InFlight:
        """The queue first (one request); the tables (nine Queries) once it is empty."""
        queued, receiving = self._counts.queued_messages()
        if queued or receiving:
            return replace(left, queued=queued, receiving=receiving)
        return self._counts.in_flight()

    def _only_waiting(self, checks: int, left: InFlight) -> int:
        """How many checks in a row found only waiting deliveries. Only process binds a waiting
        delivery: once the queue is empty and no batch is being processed, nothing will bind
        what still waits (notifications still being retried bind nothing)."""
        processing = any(p.busy for p in self._process_pollers)
        if left.waiting > 0 and left.queued == left.receiving == 0 and not processing:
            return checks + 1
        return 0
