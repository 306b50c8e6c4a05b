"""Waiting is not failing: a delivery whose order is not bound yet waits in the ledger, is
re-driven through the queue as soon as its binding exists, and after as long as a provider
itself retries (3 days) becomes *unmatched*: kept with its raw event, listed, alarmed, and
attachable to an order by an operator command.

Short races (a PaymentIntent a few milliseconds before its Checkout Session) are absorbed by
SQS's own redelivery; a delivery still waiting after `park_after_receives` is parked here and
acknowledged, so it never reaches the DLQ merely for waiting.

An unmatched delivery means money nobody can route, never money already counted or no money at
all: a delivery that only binds (a Stripe renewal invoice naming no order, bound through a
subscription no order was ever bound to) moves no money, so past the wait it is recorded as
`ignored` with its reason (its `DELIVERY` record, as process records what changed nothing),
not unmatched; one the code before this rule moved to unmatched is recorded so on the next run.
It is kept `DORMANT` for the retention (neither listed nor alarmed) and re-driven if what it
binds through is bound after all: the payment that waits (and went unmatched) on its binding
then counts, without a person.

Parking, the scheduled re-drive, re-checks and the operator's attach move the same items
through the same partitions; the store renders each with its condition
(functions/store/waiting.py).
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from functions.process.messages import RECHECK_GENERATION, RECHECK_OBJECT, Message
from functions.shared import settings, tables
from functions.shared.bindings import binding_key, bound_orders, ledger_items
from functions.shared.dynamo import from_attributes, raise_unclassified
from functions.shared.environment import WaitingSettings
from functions.shared.errors import (
    BindingConflictError,
    OrderNotYetKnownError,
    UmavezError,
    UnexpectedWriteError,
    WriteContendedError,
)
from functions.shared.items import Parked, Recheck
from functions.store import queries
from functions.store.ledger import LedgerItems
from functions.store.transaction import Placed, Slot, Transaction, commit, is_condition_failure
from functions.store.waiting import WaitingItems

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import UpdateItemInputTypeDef
    from mypy_boto3_sqs import SQSClient

WAIT_LIMIT_SECONDS: Final = 3 * 86_400  # Stripe retries a live delivery for up to 3 days
# A watched object is read again after 5 minutes, then at doubling intervals up to 6 hours:
# a card refund usually settles within minutes, a bank's can take days.
RECHECK_AFTER_SECONDS: Final = 300
RECHECK_AT_MOST_EVERY_SECONDS: Final = 6 * 3600
# A refund still pending after this long is stuck (one in `requires_action` waits for the
# merchant): its charge is still read again, and a person is told (`rechecks_over_a_week`).
RECHECK_STUCK_SECONDS: Final = 7 * 86_400
# The message attributes a re-check carries: what is watched, and which watch it re-drives.
PARK_AFTER_RECEIVES: Final = 3
ATTACH_ATTEMPTS: Final = 3  # a transaction conflict is retried: the command is idempotent
WAITING_ALARM_SECONDS: Final = 3600
# What process parks a delivery that only binds with (service.EffectProcessor._bind): the
# summary of an entry has an amount, a binding's has this and no amount.
BINDING_ONLY: Final = "binding"


class NothingWaitsError(UmavezError):
    """`attach` named an object no delivery waits for: refused, a binding is for good."""


class Waiting:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        sqs: SQSClient,
        table_names: tables.TableNames,
        queue_url: str,
        clock: Callable[[], float],
        wait_limit_seconds: int = WAIT_LIMIT_SECONDS,
        retention_seconds: int = settings.DEFAULT_RETENTION_DAYS * 86_400,
        recheck_after_seconds: int = RECHECK_AFTER_SECONDS,
    ) -> None:
        self._db = dynamodb
        self._sqs = sqs
        self._tables = table_names
        self._queue_url = queue_url
        self._clock = clock
        self._limit = wait_limit_seconds
        self._retention_seconds = retention_seconds
        self._recheck_after = recheck_after_seconds
        self._items = LedgerItems(table_names, clock, retention_seconds)
        self._waiting_items = WaitingItems(table_names, retention_seconds)

    # -- parking ---------------------------------------------------------------------------

    def park(self, message: Message, waiting: OrderNotYetKnownError) -> None:
        """Keep the delivery until its binding exists; the first park's time is kept."""
        now = int(self._clock())
        item = {
            tables.PARTITION_KEY: tables.WAITING_PK,
            tables.SORT_KEY: tables.parked_sk(message.provider, message.event_id),
            "provider": message.provider,
            "event_id": message.event_id,
            "event_type": message.event_type,
            "body": message.body,
            "objects": list(waiting.objects),
            "waiting_since": now,
            "reason": str(waiting),
            **waiting.summary,
        }
        try:
            self._db.put_item(**self._waiting_items.parked(item))
        except ClientError as exc:
            if not is_condition_failure(exc):  # parked already: it keeps its first time
                raise_unclassified(exc, "PutItem")

    def waiting(self) -> Iterator[Parked]:
        return map(Parked.of, self._partition(tables.WAITING_PK))

    def dormant(self) -> Iterator[Parked]:
        return map(Parked.of, self._partition(tables.DORMANT_PK))

    # -- objects read again ----------------------------------------------------------------

    def watch(self, message: Message, objects: set[str]) -> None:
        """Re-drive this delivery on a schedule while `objects` are unsettled (a charge whose
        refund is pending): processing it again reads them again. Each call is a new
        generation, a token never used before (a re-check that finds nothing unsettled ends
        only the generation it carried, never a watch made or renewed since); the schedule of
        a watch already there is kept."""
        now = int(self._clock())
        for ref in objects:
            request = self._waiting_items.watch_begun(
                tables.parked_sk(message.provider, ref),
                {
                    "provider": message.provider,
                    "event_id": message.event_id,
                    "event_type": message.event_type,
                    "body": message.body,
                },
                ref,
                now,
                now + self._recheck_after,
                uuid.uuid4().hex,
            )
            self._update_watch(request)

    def _update_watch(self, request: UpdateItemInputTypeDef) -> None:
        try:
            self._db.update_item(**request)
        except ClientError as exc:
            raise_unclassified(exc, "UpdateItem")

    def unwatch(self, provider: str, ref: str, generation: str) -> None:
        """The re-check of `generation` found `ref` settled: no more re-checks, unless it was
        watched again since (a newer generation keeps it)."""
        try:
            self._db.delete_item(
                **self._waiting_items.watch_ended(tables.parked_sk(provider, ref), generation)
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # gone already, or watched again since
                raise_unclassified(exc, "DeleteItem")

    def watched(self) -> Iterator[Recheck]:
        return map(Recheck.of, self._partition(tables.RECHECK_PK))

    def _recheck_due(self, now: int) -> Counter[str]:
        """Each watch whose time has come, re-driven, and its next check scheduled (doubling,
        at most every 6 hours): sent first, so a crash in between re-checks once more."""
        counts: Counter[str] = Counter(
            {"rechecked": 0, "rechecks_open": 0, "rechecks_over_a_week": 0}
        )
        for item in self.watched():
            counts["rechecks_open"] += 1
            if now - (item.watching_since or now) > RECHECK_STUCK_SECONDS:
                counts["rechecks_over_a_week"] += 1
            if item.next_check_at > now:
                continue
            checks = item.checks
            try:
                self._send(
                    item,
                    "recheck",
                    {RECHECK_OBJECT: item.object, RECHECK_GENERATION: item.generation},
                )
                wait = min(self._recheck_after * 2 ** (checks + 1), RECHECK_AT_MOST_EVERY_SECONDS)
                # Only the watch it sent: one ended or renewed meanwhile keeps its own.
                self._db.update_item(
                    **self._waiting_items.next_check(
                        item.sk, item.generation, now + wait, checks + 1
                    )
                )
            except ClientError as exc:
                if not is_condition_failure(exc):  # ended or renewed meanwhile: nothing to do
                    counts["redrive_failures"] += 1
                    continue
            except BotoCoreError:  # the queue unreachable: this one waits for the next run
                counts["redrive_failures"] += 1
                continue
            counts["rechecked"] += 1
        return counts

    def unmatched(self) -> Iterator[Parked]:
        return map(Parked.of, self._partition(tables.UNMATCHED_PK))

    # -- the scheduled re-drive --------------------------------------------------------------

    def redrive(self) -> Counter[str]:
        """Each waiting delivery: re-enqueued once its binding exists, unmatched once it waited
        longer than the limit (and re-enqueued if its binding appears later), or, if it moves
        no money, recorded as ignored then; each watched object whose re-check is due,
        re-driven. Counted (`redriven`, `unmatched`, `ignored`, `dormant`, `still_waiting`,
        `waiting_over_an_hour`, `rechecked`, `rechecks_open`, `rechecks_over_a_week`,
        `redrive_failures`)."""
        counts: Counter[str] = Counter(
            {
                "redriven": 0,
                "unmatched": 0,
                "ignored": 0,
                "dormant": 0,
                "still_waiting": 0,
                "waiting_over_an_hour": 0,
                "redrive_failures": 0,
            }
        )
        now = int(self._clock())
        waiting, unmatched = list(self.waiting()), list(self.unmatched())
        # Dormant deliveries are read with the unmatched ones: re-driven once bound.
        unmatched += list(self.dormant())
        try:
            bound: list[bool | None] | None = self._bound_items(waiting + unmatched)
        except (ClientError, UmavezError):
            bound = None  # nothing is re-driven or declared unmatched on a read that failed
        for n, item in enumerate(waiting):
            try:
                result = (
                    "redrive_failures"
                    if bound is None
                    else self._check_waiting(item, bound[n], now)
                )
            except (ClientError, UmavezError):
                # One item the database or the queue refused must not stop the others.
                result = "redrive_failures"
            counts[result] += 1
            # Re-driven or recorded as ignored: it waits no more.
            waits = result not in {"redriven", "ignored"}
            if waits and now - item.waiting_since >= WAITING_ALARM_SECONDS:
                counts["waiting_over_an_hour"] += 1
        # Unmatched money whose binding arrived after all (an event resent weeks later) is
        # re-driven too: nothing routable stays unmatched.
        for n, item in enumerate(unmatched, start=len(waiting)):
            if bound is None:
                counts["redrive_failures"] += 1
                continue
            try:
                if bound[n]:
                    self._enqueue_and_forget(item, item.pk)
                    counts["redriven"] += 1
                elif item.pk == tables.DORMANT_PK:
                    counts["dormant"] += 1
                elif bound[n] is False and not moves_money(item):
                    # Moved here before unmatched meant money: it leaves the list (and the alarm).
                    counts["ignored"] += self._ignore(item, tables.UNMATCHED_PK, now)
            except (ClientError, UmavezError):
                counts["redrive_failures"] += 1
        counts.update(self._recheck_due(now))
        return counts

    def _bound_items(self, items: list[Parked]) -> list[bool | None]:
        """For each parked item, whether any of its objects is bound (None: DynamoDB could not
        say). Every item's bindings are read together, 100 a request: a run costs a read per
        hundred objects, not one per parked delivery."""
        found, unread = ledger_items(
            self._db,
            self._tables.ledger,
            (binding_key(i.provider, ref) for i in items for ref in i.objects),
        )

        def bound(item: Parked) -> bool | None:
            keys = [binding_key(item.provider, ref) for ref in item.objects]
            if any(k in found for k in keys):
                return True
            return None if any(k in unread for k in keys) else False

        return [bound(item) for item in items]

    def _check_waiting(self, item: Parked, bound: bool | None, now: int) -> str:
        if bound:
            self._enqueue_and_forget(item, tables.WAITING_PK)
            return "redriven"
        if bound is False and now - item.waiting_since >= self._limit:
            if not moves_money(item):
                return "ignored" if self._ignore(item, tables.WAITING_PK, now) else "still_waiting"
            return "unmatched" if self._move_to_unmatched(item, now) else "still_waiting"
        return "still_waiting"

    # -- the operator's command --------------------------------------------------------------

    def attach(self, provider: str, object_id: str, order_id: str, *, force: bool = False) -> int:
        """Bind `object_id` to `order_id` (first writer wins) and re-drive every delivery that
        waits for it or went unmatched: they apply through the same transaction, exactly once.
        Attaching again changes nothing. A binding is for good, so an object nothing waits for
        (a typo, a refund id) is refused unless `force`. Returns how many were re-driven."""
        parked = [
            (partition, item)
            for partition in (tables.WAITING_PK, tables.UNMATCHED_PK, tables.DORMANT_PK)
            for item in map(Parked.of, self._partition(partition))
            if item.provider == provider and object_id in item.objects
        ]
        if not parked and not force and not self._bound(provider, [object_id]):
            raise NothingWaitsError(
                f"nothing waits for {provider} {object_id}: check the object "
                "(`umavez show unmatched` lists what each delivery waits for)"
            )
        for attempt in range(ATTACH_ATTEMPTS):
            try:
                self._bind(provider, object_id, order_id)
                break
            except WriteContendedError:
                if attempt == ATTACH_ATTEMPTS - 1:
                    raise
        for partition, item in parked:
            self._enqueue_and_forget(item, partition)
        return len(parked)

    def _bind(self, provider: str, object_id: str, order_id: str) -> None:
        binding = self._items.binding(provider, order_id, object_id, int(self._clock()))
        transaction = Transaction.of(Placed(Slot.BINDING, binding, object_id))
        if (refusal := commit(self._db, transaction)) is not None:
            if refusal.contended:
                raise WriteContendedError(f"attach contended: {refusal.codes}")
            bound = (refusal.found(Slot.BINDING) or {}).get("order_id")
            raise BindingConflictError(
                f"{provider} {object_id} is already bound to order {bound}", str(bound)
            )

    # -- plumbing --------------------------------------------------------------------------

    def _partition(self, partition: str) -> Iterator[dict[str, Any]]:
        pages = self._db.get_paginator("query").paginate(
            **queries.partition(self._tables.ledger, partition), ConsistentRead=True
        )
        for page in pages:
            yield from map(from_attributes, page["Items"])

    def _bound(self, provider: str, objects: list[str]) -> bool | None:
        """Whether any object is bound; None when DynamoDB could not say (throttled)."""
        found, unread = bound_orders(self._db, self._tables.ledger, provider, objects)
        if found:
            return True
        return None if unread else False

    def _send(self, item: Parked | Recheck, redriven: str, more: dict[str, str]) -> None:
        """The parked delivery to the webhook queue, with what ingest gave it and why."""
        attributes = {
            "provider": item.provider,
            "event_id": item.event_id,
            "event_type": str(item.event_type),
            "redriven": redriven,
            **more,
        }
        self._sqs.send_message(
            QueueUrl=self._queue_url,
            MessageBody=item.body,
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value}
                for name, value in attributes.items()
            },
        )

    def _enqueue_and_forget(self, item: Parked, partition: str) -> None:
        """Send first, then delete: a crash in between sends it again, which is a duplicate."""
        self._send(item, partition.lower(), {})
        self._db.delete_item(
            TableName=self._tables.ledger,
            Key=self._waiting_items.parked_key(item.stored, partition),
        )

    def _move_to_unmatched(self, item: Parked, now: int) -> bool:
        """Only if it still waits: an attach or a re-drive in between wins."""
        transaction = self._waiting_items.to_unmatched(item.stored, now)
        if (refusal := commit(self._db, transaction)) is not None:
            if refusal.failed(Slot.PARKED) or refusal.contended:
                return False
            raise UnexpectedWriteError(f"unmatched move: {refusal.codes}")
        return True

    def _ignore(self, item: Parked, partition: str, now: int) -> bool:
        """A delivery that moves no money and whose objects no order was ever bound to: its
        audit record says so (kept for the retention, as process keeps what changed nothing),
        and it no longer waits: it is kept dormant for the retention (not listed, not
        alarmed), re-driven if what it binds through is bound after all (a subscription bound
        late: its renewal invoice then binds, and the payment waiting on that invoice counts).
        Only if it still waits: a re-drive or an attach in between wins. A record of the
        delivery already there (a copy processed since) is kept."""
        transaction = self._waiting_items.ignored(item.stored, partition, now)
        if (refusal := commit(self._db, transaction)) is not None:
            if refusal.failed(Slot.PARKED) or refusal.contended:
                return False
            if refusal.failed(Slot.AUDIT):
                # The delivery has its record already: it only stops waiting.
                moves = Transaction.of(
                    self._waiting_items.kept_dormant(item.stored, partition, now)
                )
                self._db.transact_write_items(TransactItems=moves.items)
                return True
            raise UnexpectedWriteError(f"ignored move: {refusal.codes}")
        return True


def moves_money(item: Parked) -> bool:
    """Whether a parked delivery would book money once routed: an entry's has its amount.
    Anything not known to be a binding alone counts as money: listed, never dropped."""
    return item.transition != BINDING_ONLY or item.amount is not None


def waiting_from_env() -> Waiting:
    """The waiting room as the Lambdas build it from the stack's environment."""
    settings = WaitingSettings.from_env()
    return Waiting(
        boto3.client("dynamodb"),
        boto3.client("sqs"),
        settings.tables,
        settings.webhook_queue_url,
        time.time,
        settings.wait_limit_seconds or WAIT_LIMIT_SECONDS,
        settings.retention_seconds,
        settings.recheck_after_seconds or RECHECK_AFTER_SECONDS,
    )
