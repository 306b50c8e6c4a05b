"""The checks beyond one order's entries, and the mismatches they report: an outbox item
unfinished past its deadline (stuck) or dead, one whose counted entry is not in the ledger
(unexpected), one sent without the e-mail its order's customer is owed, money that waits for
no order (unmatched)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from functions.reconcile.reads import Reads
from functions.shared import books, tables
from functions.shared.domain import COUNTED_OUTCOMES
from functions.shared.outbox import EMAIL_OWED, OutboxStatus

STUCK: Final = "stuck_outbox_item"
EMAIL_OWED_KIND: Final = "email_owed_outbox_item"
# Outbox items read a bucket of the due index by the run's last step (a consistent BatchGet of
# 100 each): the step's time stays bounded when a sink has been down for hours.
BACKLOG_READ_LIMIT: Final = 2000
# An outbox item pending longer than this is reported stuck (the capacity model reads it too).
PENDING_DEADLINE_SECONDS: Final = 3600


class OutboxChecks:
    def __init__(
        self,
        reads: Reads,
        table_names: tables.TableNames,
        clock: Callable[[], float],
        pending_deadline_seconds: int = PENDING_DEADLINE_SECONDS,
    ) -> None:
        self._reads = reads
        self._tables = table_names
        self._clock = clock
        self._deadline = pending_deadline_seconds

    def stuck(self, item: dict[str, Any]) -> books.Mismatch | None:
        """An item not sent past the deadline (counted from its creation); dead ones are
        reported as dead."""
        status = item.get("status")
        age = self._clock() - datetime.fromisoformat(item["created_at"]).timestamp()
        if status in (OutboxStatus.SENT.value, OutboxStatus.DEAD.value) or age <= self._deadline:
            return None
        return books.Mismatch(
            STUCK,
            item["order_id"],
            f"{item['outbox_id']} {status} for {int(age)} s ({item.get('attempts', 0)} "
            f"attempts); `umavez outbox revive {item['outbox_id']}`",
        )

    def backlog(self) -> list[books.Mismatch]:
        """Unfinished items are exactly those in the due index's shards; dead ones in its
        `dead` bucket. Both are few, and read whole without a scan, up to BACKLOG_READ_LIMIT
        a bucket: past that (a sink down for hours at a high rate) the bucket is reported as
        such, once, instead of read item by item past the run's time."""
        found: list[books.Mismatch] = []
        unfinished = [
            item
            for bucket in tables.due_buckets()
            for item in self._reads.outbox_items(self._bucket_ids(bucket, found)).values()
        ]
        found += [stuck for item in unfinished if (stuck := self.stuck(item))]
        dead_ids = self._bucket_ids(tables.OUTBOX_DEAD_BUCKET, found)
        dead = self._reads.outbox_items(dead_ids).values()
        found += [
            books.Mismatch(
                "dead_outbox_item",
                item["order_id"],
                f"{item['outbox_id']} dead after {item.get('attempts')} attempts: "
                f"{item.get('last_error', '')}; `umavez outbox revive {item['outbox_id']}`",
            )
            for item in dead
            if item.get("status") == OutboxStatus.DEAD.value
        ]
        return found

    def _bucket_ids(self, bucket: str, found: list[books.Mismatch]) -> list[str]:
        """At most BACKLOG_READ_LIMIT ids of the bucket; one more there is reported."""
        ids = self._reads.due_index_ids(bucket, max_items=BACKLOG_READ_LIMIT + 1)
        if len(ids) > BACKLOG_READ_LIMIT:
            kind = "dead_outbox_item" if bucket == tables.OUTBOX_DEAD_BUCKET else STUCK
            found.append(
                books.Mismatch(
                    kind,
                    "",
                    f"over {BACKLOG_READ_LIMIT} items in the outbox's {bucket!r} bucket: the "
                    f"first {BACKLOG_READ_LIMIT} checked (is a sink down? `umavez status`)",
                )
            )
        return ids[:BACKLOG_READ_LIMIT]

    def without_their_effect(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Outbox items whose counted entry is not in the ledger."""
        keys = {
            (tables.order_pk(item["order_id"]), tables.effect_sk(item["effect_key"])): item
            for item in items
        }
        found = self._reads.batch_get(
            self._tables.ledger,
            [{tables.PARTITION_KEY: pk, tables.SORT_KEY: sk} for pk, sk in keys],
        )
        counted = {
            (effect[tables.PARTITION_KEY], effect[tables.SORT_KEY])
            for effect in found
            if effect.get("outcome") in COUNTED_OUTCOMES
        }
        return [item for key, item in keys.items() if key not in counted]

    def unmatched(self) -> list[books.Mismatch]:
        return [
            books.Mismatch(
                "unmatched_payment",
                "?",
                f"{item.get('provider')} {item.get('external_ref')} "
                f"{item.get('amount')} {item.get('currency')}: no order; "
                f"`umavez attach {item.get('provider')} {(item.get('objects') or ['?'])[0]} "
                "ORDER_ID`",
            )
            for item in self._reads.unmatched()
        ]


def unexpected(items: list[dict[str, Any]]) -> list[books.Mismatch]:
    """Outbox items confirmed without their counted entry, as reported."""
    return [
        books.Mismatch(
            "unexpected_outbox_item",
            str(item["order_id"]),
            f"{item[tables.OUTBOX_KEY]} announces effect {item['effect_key']}, "
            "which is not a counted entry of its order",
        )
        for item in items
    ]


def email_owed(items: Iterable[Mapping[str, Any]]) -> list[books.Mismatch]:
    """Notifications sent without the e-mail they are owed although their order knows its
    customer now. Whoever taught the order re-opens them (process, or the sender's own read
    after its try); one left is a re-open missed, e.g. a read before writing that lagged
    behind an order already there. `umavez outbox revive` sends what is missing."""
    return [
        books.Mismatch(
            EMAIL_OWED_KIND,
            str(item["order_id"]),
            f"{item['outbox_id']} sent to {sorted(item.get('channels_sent') or [])} without "
            f"its e-mail; its order knows the customer: `umavez outbox revive "
            f"{item['outbox_id']}`",
        )
        for item in items
        if item.get(EMAIL_OWED) and item.get("status") == OutboxStatus.SENT.value
    ]
