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

Long on purpose: parking, the scheduled re-drive, re-checks and the operator's attach move
the same items through the same partitions, with the same conditions.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from functions.shared import settings, tables
from functions.shared.bindings import binding_key, bound_orders, ledger_items
from functions.shared.domain import Outcome
from functions.shared.dynamo import from_attributes, raise_unclassified, to_attributes
from functions.shared.environment import WaitingSettings
from functions.shared.errors import (
    BindingConflictError,
    OrderNotYetKnownError,
    UmavezError,
    UnexpectedWriteError,
    WriteContendedError,
)
from functions.store import queries
from functions.store.ledger import LedgerItems
from functions.store.transaction import Placed, Slot, Transaction, commit, is_condition_failure

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef
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
RECHECK_OBJECT: Final = "recheck_object"
RECHECK_GENERATION: Final = "recheck_generation"
PARK_AFTER_RECEIVES: Final = 3
ATTACH_ATTEMPTS: Final = 3  # a transaction conflict is retried: the command is idempotent
WAITING_ALARM_SECONDS: Final = 3600
# What process parks a delivery that only binds with (service.EffectProcessor._bind): the
# summary of an entry has an amount, a binding's has this and no amount.
BINDING_ONLY: Final = "binding"


class NothingWaitsError(UmavezError):
    """`attach` named an object no delivery waits for: refused, a binding is for good."""


@dataclass(frozen=True)
class Message:
    """A queue message in the ingest -> process contract: the raw body and its provider."""

    provider: str
    body: str
    event_id: str
    event_type: str


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
            self._db.put_item(
                **LedgerItems.first_record(
                    {"TableName": self._tables.ledger, "Item": to_attributes(item)}
                )
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # parked already: it keeps its first time
                raise_unclassified(exc, "PutItem")

    def waiting(self) -> Iterator[dict[str, Any]]:
        return self._partition(tables.WAITING_PK)

    def dormant(self) -> Iterator[dict[str, Any]]:
        return self._partition(tables.DORMANT_PK)

    # -- objects read again ----------------------------------------------------------------

    def watch(self, message: Message, objects: set[str]) -> None:
        """Re-drive this delivery on a schedule while `objects` are unsettled (a charge whose
        refund is pending): processing it again reads them again. Each call is a new
        generation, a token never used before (a re-check that finds nothing unsettled ends
        only the generation it carried, never a watch made or renewed since); the schedule of
        a watch already there is kept."""
        now = int(self._clock())
        for ref in objects:
            self._update_watch(
                TableName=self._tables.ledger,
                Key=to_attributes(
                    {
                        tables.PARTITION_KEY: tables.RECHECK_PK,
                        tables.SORT_KEY: tables.parked_sk(message.provider, ref),
                    }
                ),
                UpdateExpression=(
                    "SET provider = :provider, event_id = :event, event_type = :type, "
                    "body = :body, #object = :object, "
                    "watching_since = if_not_exists(watching_since, :now), "
                    "next_check_at = if_not_exists(next_check_at, :next), "
                    "checks = if_not_exists(checks, :zero), #generation = :generation"
                ),
                ExpressionAttributeNames={"#object": "object", "#generation": "generation"},
                ExpressionAttributeValues=to_attributes(
                    {
                        ":provider": message.provider,
                        ":event": message.event_id,
                        ":type": message.event_type,
                        ":body": message.body,
                        ":object": ref,
                        ":now": now,
                        ":next": now + self._recheck_after,
                        ":zero": 0,
                        ":generation": uuid.uuid4().hex,
                    }
                ),
            )

    def _update_watch(self, **request: Any) -> None:
        try:
            self._db.update_item(**request)
        except ClientError as exc:
            raise_unclassified(exc, "UpdateItem")

    def unwatch(self, provider: str, ref: str, generation: str) -> None:
        """The re-check of `generation` found `ref` settled: no more re-checks, unless it was
        watched again since (a newer generation keeps it)."""
        try:
            self._db.delete_item(
                **self._items.watch_ended(tables.parked_sk(provider, ref), generation)
            )
        except ClientError as exc:
            if not is_condition_failure(exc):  # gone already, or watched again since
                raise_unclassified(exc, "DeleteItem")

    def watched(self) -> Iterator[dict[str, Any]]:
        return self._partition(tables.RECHECK_PK)

    def _recheck_due(self, now: int) -> Counter[str]:
        """Each watch whose time has come, re-driven, and its next check scheduled (doubling,
        at most every 6 hours): sent first, so a crash in between re-checks once more."""
        counts: Counter[str] = Counter(
            {"rechecked": 0, "rechecks_open": 0, "rechecks_over_a_week": 0}
        )
        for item in self.watched():
            counts["rechecks_open"] += 1
            if now - int(item.get("watching_since", now)) > RECHECK_STUCK_SECONDS:
                counts["rechecks_over_a_week"] += 1
            if int(item["next_check_at"]) > now:
                continue
            checks = int(item.get("checks", 0))
            try:
                self._send(
                    item,
                    "recheck",
                    {
                        RECHECK_OBJECT: str(item["object"]),
                        RECHECK_GENERATION: str(item["generation"]),
                    },
                )
                wait = min(self._recheck_after * 2 ** (checks + 1), RECHECK_AT_MOST_EVERY_SECONDS)
                # Only the watch it sent: one ended or renewed meanwhile keeps its own.
                self._db.update_item(
                    **self._items.next_check(
                        item[tables.SORT_KEY], str(item["generation"]), now + wait, checks + 1
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

    def unmatched(self) -> Iterator[dict[str, Any]]:
        return self._partition(tables.UNMATCHED_PK)

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
            if waits and now - int(item["waiting_since"]) >= WAITING_ALARM_SECONDS:
                counts["waiting_over_an_hour"] += 1
        # Unmatched money whose binding arrived after all (an event resent weeks later) is
        # re-driven too: nothing routable stays unmatched.
        for n, item in enumerate(unmatched, start=len(waiting)):
            if bound is None:
                counts["redrive_failures"] += 1
                continue
            try:
                if bound[n]:
                    self._enqueue_and_forget(item, str(item[tables.PARTITION_KEY]))
                    counts["redriven"] += 1
                elif item[tables.PARTITION_KEY] == tables.DORMANT_PK:
                    counts["dormant"] += 1
                elif bound[n] is False and not moves_money(item):
                    # Moved here before unmatched meant money: it leaves the list (and the alarm).
                    counts["ignored"] += self._ignore(item, tables.UNMATCHED_PK, now)
            except (ClientError, UmavezError):
                counts["redrive_failures"] += 1
        counts.update(self._recheck_due(now))
        return counts

    def _bound_items(self, items: list[dict[str, Any]]) -> list[bool | None]:
        """For each parked item, whether any of its objects is bound (None: DynamoDB could not
        say). Every item's bindings are read together, 100 a request: a run costs a read per
        hundred objects, not one per parked delivery."""
        found, unread = ledger_items(
            self._db,
            self._tables.ledger,
            (binding_key(i["provider"], ref) for i in items for ref in i.get("objects", [])),
        )

        def bound(item: dict[str, Any]) -> bool | None:
            keys = [binding_key(item["provider"], ref) for ref in item.get("objects", [])]
            if any(k in found for k in keys):
                return True
            return None if any(k in unread for k in keys) else False

        return [bound(item) for item in items]

    def _check_waiting(self, item: dict[str, Any], bound: bool | None, now: int) -> str:
        if bound:
            self._enqueue_and_forget(item, tables.WAITING_PK)
            return "redriven"
        if bound is False and now - int(item["waiting_since"]) >= self._limit:
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
            for item in self._partition(partition)
            if item["provider"] == provider and object_id in item.get("objects", [])
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

    def _send(self, item: dict[str, Any], redriven: str, more: dict[str, str]) -> None:
        """The parked delivery to the webhook queue, with what ingest gave it and why."""
        attributes = {
            "provider": str(item["provider"]),
            "event_id": str(item["event_id"]),
            "event_type": str(item["event_type"]),
            "redriven": redriven,
            **more,
        }
        self._sqs.send_message(
            QueueUrl=self._queue_url,
            MessageBody=str(item["body"]),
            MessageAttributes={
                name: {"DataType": "String", "StringValue": value}
                for name, value in attributes.items()
            },
        )

    def _enqueue_and_forget(self, item: dict[str, Any], partition: str) -> None:
        """Send first, then delete: a crash in between sends it again, which is a duplicate."""
        self._send(item, partition.lower(), {})
        self._db.delete_item(
            TableName=self._tables.ledger,
            Key=to_attributes(
                {tables.PARTITION_KEY: partition, tables.SORT_KEY: item[tables.SORT_KEY]}
            ),
        )

    def _move_to_unmatched(self, item: dict[str, Any], now: int) -> bool:
        """Only if it still waits: an attach or a re-drive in between wins."""
        unmatched = {
            **item,
            tables.PARTITION_KEY: tables.UNMATCHED_PK,
            "unmatched_at": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="seconds"),
        }
        parked = to_attributes(
            {tables.PARTITION_KEY: tables.WAITING_PK, tables.SORT_KEY: item[tables.SORT_KEY]}
        )
        transaction = Transaction.of(
            Placed(
                Slot.UNMATCHED,
                {"Put": {"TableName": self._tables.ledger, "Item": to_attributes(unmatched)}},
            ),
            Placed(Slot.PARKED, self._parked_delete(parked)),
        )
        if (refusal := commit(self._db, transaction)) is not None:
            if refusal.failed(Slot.PARKED) or refusal.contended:
                return False
            raise UnexpectedWriteError(f"unmatched move: {refusal.codes}")
        return True

    def _parked_delete(self, key: dict[str, Any]) -> TransactWriteItemTypeDef:
        """The parked delivery's removal, only if it is still parked."""
        return self._items.still_there_deleted(key)

    def _ignore(self, item: dict[str, Any], partition: str, now: int) -> bool:
        """A delivery that moves no money and whose objects no order was ever bound to: its
        audit record says so (kept for the retention, as process keeps what changed nothing),
        and it no longer waits: it is kept dormant for the retention (not listed, not
        alarmed), re-driven if what it binds through is bound after all (a subscription bound
        late: its renewal invoice then binds, and the payment waiting on that invoice counts).
        Only if it still waits: a re-drive or an attach in between wins. A record of the
        delivery already there (a copy processed since) is kept."""
        objects = ", ".join(str(ref) for ref in item.get("objects", []))
        record = {
            tables.PARTITION_KEY: tables.delivery_pk(item["provider"], item["event_id"]),
            tables.SORT_KEY: tables.DELIVERY_SORT,
            "outcome": Outcome.IGNORED.value,
            "reason": f"no order was ever bound to {objects}; nothing to bind (moves no money)",
            "provider": item["provider"],
            "event_id": item["event_id"],
            "event_type": item.get("event_type"),
            "recorded_at": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds"),
            tables.EXPIRES_AT: now + self._retention_seconds,
        }
        parked = to_attributes(
            {tables.PARTITION_KEY: partition, tables.SORT_KEY: item[tables.SORT_KEY]}
        )
        audit: TransactWriteItemTypeDef = {
            "Put": LedgerItems.first_record(
                {"TableName": self._tables.ledger, "Item": to_attributes(record)}
            )
        }
        dormant = {
            **item,
            tables.PARTITION_KEY: tables.DORMANT_PK,
            "dormant_since": record["recorded_at"],
            tables.EXPIRES_AT: now + self._retention_seconds,
        }
        keep: TransactWriteItemTypeDef = {
            "Put": {"TableName": self._tables.ledger, "Item": to_attributes(dormant)}
        }
        moves = [Placed(Slot.PARKED, self._parked_delete(parked)), Placed(Slot.DORMANT, keep)]
        transaction = Transaction.of(Placed(Slot.AUDIT, audit), *moves)
        if (refusal := commit(self._db, transaction)) is not None:
            if refusal.failed(Slot.PARKED) or refusal.contended:
                return False
            if refusal.failed(Slot.AUDIT):
                # The delivery has its record already: it only stops waiting.
                self._db.transact_write_items(TransactItems=Transaction.of(*moves).items)
                return True
            raise UnexpectedWriteError(f"ignored move: {refusal.codes}")
        return True


def moves_money(item: dict[str, Any]) -> bool:
    """Whether a parked delivery would book money once routed: an entry's has its amount.
    Anything not known to be a binding alone counts as money: listed, never dropped."""
    return item.get("transition") != BINDING_ONLY or item.get("amount") is not None


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


def describe(item: dict[str, Any], now: float) -> dict[str, Any]:
    """One waiting or unmatched delivery, for the CLI and logs (the raw body left out)."""
    return {
        "provider": item.get("provider"),
        "event_id": item.get("event_id"),
        "event_type": item.get("event_type"),
        "waits_for": item.get("objects", []),
        "transition": item.get("transition"),
        "object": item.get("external_ref"),
        "amount": item.get("amount"),
        "currency": item.get("currency"),
        "waiting_seconds": int(now - int(item.get("waiting_since", now))),
        "unmatched_at": item.get("unmatched_at"),
        "raw_event": json.loads(str(item.get("body", "{}"))) if item.get("body") else None,
    }
