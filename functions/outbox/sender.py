"""Send each outbox item through its channels, with its key, and record what happened.

The stream's first try (`first_try`) needs no claim: a new item is in no index, so no sweeper
can see it, and a shard's records reach one invocation at a time. It reads the item and its
order (one BatchGetItem), sends, and writes the outcome once: `sent` (one write, no index
write), or pending in the due index with its backoff, from where the sweeper owns it. An
error it did not handle parks the item there too (`park`); a record the stream gives up on
is parked by the sweeper from the on-failure queue (functions/outbox/stranded.py). So a new
item costs one write when its first send succeeds, and nothing is left where no one looks.

The sweeper's path (`deliver`) claims: a conditional update (`pending -> sending`, or a
`sending` whose lease ran out) with a fresh claim token, so two sweepers never send the same
item at once; every later write requires that token. A crash after the send but before
`sent` leaves the lease to run out and the sweeper re-drives it: the sink sees the same key
again (at-least-once, one intent). A crash in the first try is retried by the stream, the
same way.

An item is given up by age, never by a count of attempts: a failed send backs off
exponentially (capped) until the item is older than the give-up age (counted from its
creation, or from its revival), and only then makes it `dead`. A crash loop ends the same way:
a lease that ran out on an item past that age is buried instead of claimed once more.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from functions.outbox.channels import Channel, ChannelError, SinkGoneError
from functions.outbox.templates import emails_customer
from functions.shared import settings, tables
from functions.shared.dynamo import (
    from_attributes,
    raise_unclassified,
    to_attributes,
)
from functions.shared.errors import UmavezError
from functions.shared.items import Order
from functions.shared.outbox import (
    EMAIL_CHANNEL,
    EMAIL_OWED,
    OutboxItem,
    OutboxStatus,
    give_up_clock_start,
)
from functions.shared.redaction import MAX_ERROR_CHARACTERS, redacted
from functions.store.outbox import claim, reopen_for_email, update_held

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
    backoff_base_seconds: int = 30
    backoff_cap_seconds: int = 3600
    # A failed send of an item older than this makes it dead (settings.outbox_give_up_seconds).
    give_up_seconds: int = settings.DEFAULT_OUTBOX_GIVE_UP_HOURS * 3600
    # A sent item expires (TTL) this long after it was sent (settings.retention_seconds).
    retention_seconds: int = settings.DEFAULT_RETENTION_DAYS * 86_400

    def backoff(self, attempts: int) -> int:
        """Exponential: 30 s, 60 s, 120 s ... capped at an hour."""
        exponent = min(max(0, attempts - 1), 32)  # no huge powers for long-lived items
        return int(min(self.backoff_cap_seconds, self.backoff_base_seconds * 2**exponent))

    def gave_up(self, item: dict[str, Any] | OutboxItem, now: float) -> bool:
        """Whether the item is older than the give-up age (from its creation or revival)."""
        fields = item.model_dump() if isinstance(item, OutboxItem) else item
        return now - give_up_clock_start(fields) >= self.give_up_seconds


@dataclass(frozen=True)
class Sent:
    outbox_id: str
    result: SendResult
    attempts: int = 0
    detail: str = ""


# Told (outbox id, channel, why) when a sink answered that it takes no more notifications.
OnSinkGone = Callable[[str, str, str], None]


def _no_one_told(_outbox_id: str, _channel: str, _why: str) -> None:
    return None


@dataclass
class Finished:
    """The channels an item is done with after a try, recorded with its next state: those
    that took it (`channels_sent`), and those whose sink is gone (`channels_gone`)."""

    sent: set[str] = field(default_factory=set)
    gone: set[str] = field(default_factory=set)

    def expression(self) -> str:
        adds = [
            clause
            for clause, names in (
                ("channels_sent :channels", self.sent),
                ("channels_gone :gone", self.gone),
            )
            if names
        ]
        return " ADD " + ", ".join(adds) if adds else ""

    def values(self) -> dict[str, object]:
        return {":channels": self.sent or None, ":gone": self.gone or None}


def _finished_channels(stored: dict[str, Any]) -> set[str]:
    """The channels a retry skips: sent, or gone."""
    return set(stored.get("channels_sent", set())) | set(stored.get("channels_gone", set()))


def _stored_error(error: str) -> str:
    """What `last_error` (and the logs, from Sent.detail) may hold: no customer data."""
    return redacted(error)[:MAX_ERROR_CHARACTERS]


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
        on_sink_gone: OnSinkGone | None = None,
    ) -> None:
        self._db = dynamodb
        self._table = table_name
        self._channels = channels
        self._clock = clock
        self._policy = policy or SendPolicy()
        self._ledger = ledger_table
        self._on_sink_gone = on_sink_gone or _no_one_told

    def deliver(self, outbox_id: str, *, only_if_due: bool) -> Sent:
        """Claim, send through each channel not yet done, mark sent; on failure back off.

        The stream path passes only_if_due=False (a new item is due at once); the sweeper
        passes True and respects the backoff schedule, which it owns after a failure.
        """
        token = uuid.uuid4().hex
        claim = self._claim(outbox_id, token, only_if_due)
        if claim is None:
            return Sent(outbox_id, SendResult.SKIPPED)
        claimed, abandoned = claim
        attempts = int(claimed.get("attempts", 0))
        try:
            if abandoned and self._policy.gave_up(claimed, self._clock()):
                # Its last sender died holding it (a crash loop, or the last try of an old
                # item): nothing more is tried; the item is listed with the dead.
                return self._bury(outbox_id, token, attempts, "lease expired past the give-up age")
            item = OutboxItem.model_validate(claimed)
            try:
                item = self._as_of_now(item)
            except UmavezError as exc:
                # Nothing was sent: back off like a sink failure, never leave it `sending`.
                return self._back_off(item, token, f"order read: {exc}")
            return self._send_claimed(item, token, _finished_channels(claimed))
        except LeaseLostError:
            # Another sender holds the item now and finishes it, with the same key.
            return Sent(outbox_id, SendResult.SKIPPED, attempts, "lease lost")

    def first_try(self, outbox_id: str, order_id: str) -> Sent:
        """The stream's send of a new item: read, send, one write (see the module's doc)."""
        stored, order = self._read_with_order(outbox_id, order_id)
        if (
            stored is None
            or stored.get("status") != OutboxStatus.PENDING.value
            or tables.OUTBOX_DUE_BUCKET in stored
        ):
            # Sent, or handed to the sweeper by an earlier try of this record: not ours.
            return Sent(outbox_id, SendResult.SKIPPED, int((stored or {}).get("attempts", 0)))
        attempts = int(stored.get("attempts", 0)) + 1
        item = self._with_order(OutboxItem.model_validate({**stored, "attempts": attempts}), order)
        try:
            return self._send_claimed(item, None, _finished_channels(stored))
        except LeaseLostError:
            return Sent(outbox_id, SendResult.SKIPPED, attempts, "handed to the sweeper")

    def park(self, outbox_id: str, error: str) -> bool:
        """Hand a new item to the sweeper after an error the first try did not handle (or a
        try the stream gave up on): due after the first backoff, in its shard of the due
        index, that try counted. False if it was not new any more."""
        try:
            self._update(
                outbox_id,
                None,
                "SET #bucket = :bucket, #due = :retry_at, last_error = :error",
                {
                    ":bucket": tables.due_bucket(outbox_id),
                    ":retry_at": int(self._clock()) + self._policy.backoff(1),
                    ":error": _stored_error(error),
                },
            )
        except LeaseLostError:
            return False
        return True

    def _read_with_order(
        self, outbox_id: str, order_id: str
    ) -> tuple[dict[str, Any] | None, Order | None]:
        """The item and its order, consistently, in one BatchGetItem (the stream record
        names the order, so both keys are known before reading)."""
        request: dict[str, Any] = {
            self._table: {
                "Keys": [to_attributes({tables.OUTBOX_KEY: outbox_id})],
                "ConsistentRead": True,
            }
        }
        if self._ledger is not None:
            request[self._ledger] = {"Keys": [self._order_key(order_id)], "ConsistentRead": True}
        try:
            response = self._db.batch_get_item(RequestItems=request)
        except ClientError as exc:
            raise_unclassified(exc, "BatchGetItem")
        if response.get("UnprocessedKeys"):
            raise UmavezError(f"BatchGetItem left {outbox_id} or its order unread")
        items = response["Responses"].get(self._table, [])
        orders = response["Responses"].get(self._ledger or "", [])
        return (
            from_attributes(items[0]) if items else None,
            Order.of(from_attributes(orders[0])) if orders else None,
        )

    def _send_claimed(self, item: OutboxItem, token: str | None, done: set[str]) -> Sent:
        """Channels taken are recorded with the item's next state, not one write each: a crash
        in between resends them with the same key (at-least-once), and a failure records the
        ones that took it so the retry skips them."""
        finished = Finished()
        try:
            for channel in self._channels:
                if channel.name not in done and channel.applies_to(item):
                    try:
                        channel.send(item)
                    except SinkGoneError as exc:
                        # The sink wants no more: this item is not retried on it. Told, so
                        # that someone is paged; the other channels carry on.
                        finished.gone.add(channel.name)
                        self._on_sink_gone(item.outbox_id, channel.name, redacted(str(exc)))
                        continue
                    finished.sent.add(channel.name)
        except ChannelError as exc:
            return self._back_off(item, token, str(exc), finished, exc.retry_after_seconds)
        now = int(self._clock())
        # Marked on the item so that only an item the policy owes an e-mail is ever re-opened:
        # one never e-mailed by policy (or whose e-mail sink is gone) stays sent whatever
        # resend names its customer later.
        email_owed = self._email_waited_for_a_recipient(item, done | finished.sent | finished.gone)
        # Sent items leave the due index and expire after the retention (the TTL attribute);
        # pending and dead ones never expire.
        self._update(
            item.outbox_id,
            token,
            "SET #status = :sent, sent_at = :now, #expires = :expires"
            + (f", {EMAIL_OWED} = :owed" if email_owed else "")
            + " REMOVE #bucket, claim_token"
            + finished.expression(),
            {
                ":sent": OutboxStatus.SENT.value,
                ":now": now,
                ":expires": now + self._policy.retention_seconds,
                ":owed": True if email_owed else None,
                **finished.values(),
            },
        )
        if email_owed:
            self._reopen_if_the_order_learned_one(item)
        return Sent(item.outbox_id, SendResult.SENT, item.attempts)

    def _email_waited_for_a_recipient(self, item: OutboxItem, finished: set[str]) -> bool:
        """Sent without the e-mail the policy owes it, for want of a recipient."""
        return (
            self._ledger is not None
            and item.recipient is None
            and EMAIL_CHANNEL not in finished
            and any(channel.name == EMAIL_CHANNEL for channel in self._channels)
            and emails_customer(item)
        )

    def _reopen_if_the_order_learned_one(self, item: OutboxItem) -> None:
        """Process may have taught the order its recipient while this try was sending; its
        re-open then found the item not sent yet and changed nothing. Read after the item is
        recorded sent, the order tells: a recipient learned since is e-mailed by the sweeper
        (one learned after this read finds the item sent, and process re-opens it)."""
        if self._as_of_now(item).recipient is not None:
            reopen_for_email(self._db, self._table, item.outbox_id, self._clock())

    def _as_of_now(self, item: OutboxItem) -> OutboxItem:
        if self._ledger is None:
            return item
        try:
            response = self._db.get_item(
                TableName=self._ledger, Key=self._order_key(item.order_id), ConsistentRead=True
            )
        except ClientError as exc:
            raise_unclassified(exc, "GetItem")
        order = response.get("Item")
        return self._with_order(
            item, Order.of(from_attributes(order)) if order else Order(item.order_id)
        )

    @staticmethod
    def _with_order(item: OutboxItem, order: Order | None) -> OutboxItem:
        """The order's financial status as of sending, and the recipient learned at payment
        time for items (refunds, disputes) whose own provider object names none."""
        if order is None:
            return item
        return item.model_copy(
            update={
                "financial_status": order.financial_status.value,
                "recipient": item.recipient or order.recipient,
                **{
                    name: getattr(order, name)
                    for name in ("fee_total", "net_total", "settlement_currency")
                    if getattr(order, name) is not None
                },
            }
        )

    @staticmethod
    def _order_key(order_id: str) -> dict[str, Any]:
        return to_attributes(
            {tables.PARTITION_KEY: tables.order_pk(order_id), tables.SORT_KEY: tables.ORDER_SORT}
        )

    def _claim(
        self, outbox_id: str, token: str, only_if_due: bool
    ) -> tuple[dict[str, Any], bool] | None:
        """The item as claimed, and whether it was taken over from a sender whose lease ran
        out (it died holding it). No limit on attempts: a revived item must be claimable."""
        now = int(self._clock())
        lease_end = now + self._policy.lease_seconds
        before = claim(
            self._db,
            self._table,
            outbox_id,
            token,
            now=now,
            lease_end=lease_end,
            only_if_due=only_if_due,
        )
        if before is None:
            return None
        bucket = tables.due_bucket(outbox_id)
        claimed = {
            **before,
            "status": OutboxStatus.SENDING.value,
            "claim_token": token,
            tables.OUTBOX_DUE_AT: lease_end,
            tables.OUTBOX_DUE_BUCKET: bucket,
            "attempts": int(before.get("attempts", 0)) + 1,
        }
        return claimed, before.get("status") == OutboxStatus.SENDING.value

    def _back_off(
        self,
        item: OutboxItem,
        token: str | None,
        error: str,
        finished: Finished | None = None,
        retry_after_seconds: int | None = None,
    ) -> Sent:
        """Pending again, due after the backoff (or later, if the sink asked to be left alone
        longer with `Retry-After`), in its shard of the due index: the sweeper owns the
        schedule from here. Past the give-up age, dead instead."""
        now = int(self._clock())
        error = _stored_error(error)
        if self._policy.gave_up(item, now):
            return self._bury(item.outbox_id, token, item.attempts, error, finished)
        finished = finished or Finished()
        wait = max(self._policy.backoff(item.attempts), retry_after_seconds or 0)
        self._update(
            item.outbox_id,
            token,
            "SET #status = :pending, #bucket = :bucket, #due = :retry_at, last_error = :error "
            "REMOVE claim_token" + finished.expression(),
            {
                ":pending": OutboxStatus.PENDING.value,
                ":bucket": tables.due_bucket(item.outbox_id),
                ":retry_at": now + wait,
                ":error": error,
                **finished.values(),
            },
        )
        return Sent(item.outbox_id, SendResult.RETRY_LATER, item.attempts, error)

    def _bury(
        self,
        outbox_id: str,
        token: str | None,
        attempts: int,
        error: str,
        finished: Finished | None = None,
    ) -> Sent:
        """Dead, and listed without a scan: the due index's `dead` bucket, sorted by when it
        died. `umavez outbox revive` brings it back."""
        error = _stored_error(error)
        finished = finished or Finished()
        self._update(
            outbox_id,
            token,
            "SET #status = :dead, #bucket = :dead_bucket, #due = :now, last_error = :error "
            "REMOVE claim_token" + finished.expression(),
            {
                ":dead": OutboxStatus.DEAD.value,
                ":dead_bucket": tables.OUTBOX_DEAD_BUCKET,
                ":now": int(self._clock()),
                ":error": error,
                **finished.values(),
            },
        )
        return Sent(outbox_id, SendResult.DEAD, attempts, error)

    def _update(
        self, outbox_id: str, token: str | None, expression: str, values: dict[str, object]
    ) -> None:
        """An update that only the current claim holder may make; without a claim (the
        first try), only while the item is still new, and it records the attempt. A failed
        condition raises LeaseLostError: someone else owns the item now."""
        if not update_held(self._db, self._table, outbox_id, token, expression, values):
            raise LeaseLostError(outbox_id)
