"""One order's books, checked: the amounts of its applied and stale effects against its
recorded totals, and every counted entry against its outbox item (read now, or taken from a
read made for several orders at once)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from functions.reconcile.mismatches import OutboxChecks, email_owed
from functions.reconcile.reads import Reads, updated_at
from functions.reconcile.report import Report
from functions.reconcile.stamps import iso
from functions.shared import books, tables
from functions.shared.items import Entry, OrderPartition
from functions.shared.outbox import outbox_id_for


@dataclass(frozen=True)
class OrderBooks:
    """One order's books as read once: its changed-at stamp and what was wrong with them."""

    order_id: str
    updated_at: str
    mismatches: list[books.Mismatch]


class BooksCheck:
    def __init__(
        self,
        reads: Reads,
        outbox_checks: OutboxChecks,
        clock: Callable[[], float],
        retention_seconds: int,
    ) -> None:
        self._reads = reads
        self._outbox_checks = outbox_checks
        self._clock = clock
        self._retention = retention_seconds

    def check_order(self, order_id: str, report: Report) -> OrderBooks:
        return self.books(order_id, self._reads.order_items(order_id), report)

    def books(
        self,
        order_id: str,
        items: list[dict[str, Any]],
        report: Report,
        outbox: dict[str, dict[str, Any]] | None = None,
    ) -> OrderBooks:
        """The order's books from its items, and its counted entries' outbox items: read now,
        or taken from `outbox` (read a little earlier, for several orders at once)."""
        partition = OrderPartition.of(order_id, items)
        report.orders_checked += 1
        mismatches = books.unbalanced_totals(partition.books, partition.entries)
        within_retention = self._announced(partition.entries)
        wanted = [outbox_id_for(e.effect_key) for e in within_retention]
        if outbox is None:
            outbox = self._reads.outbox_items(wanted)
        else:  # its own items only, and none whose entry passed the retention since
            outbox = {i: outbox[i] for i in wanted if i in outbox}
        report.outbox_items_checked += len(outbox)
        mismatches += books.unmatched_outbox(within_retention, outbox.values())
        # Items in the due index are the backlog check's; an item outside it that is not sent
        # was never tried, or its try was lost: only its order's check can find it.
        mismatches += [
            stuck
            for item in outbox.values()
            if tables.OUTBOX_DUE_BUCKET not in item and (stuck := self._outbox_checks.stuck(item))
        ]
        if partition.books.recipient:
            mismatches += email_owed(outbox.values())
        return OrderBooks(order_id, updated_at(items), mismatches)

    def announced_ids(self, items: list[dict[str, Any]]) -> list[str]:
        """The outbox ids the order's counted entries within the retention announce."""
        entries = OrderPartition.of("", items).entries
        return [outbox_id_for(e.effect_key) for e in self._announced(entries)]

    def _announced(self, entries: Iterable[Entry]) -> list[Entry]:
        """The counted entries whose outbox item must exist. A sent item expires after the
        retention; its entry stays. Not a missing item."""
        horizon = iso(self._clock() - self._retention)
        return [e for e in entries if e.counted and (e.recorded_at or "") > horizon]
