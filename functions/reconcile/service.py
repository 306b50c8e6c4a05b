"""The books, checked from the tables: docs/design.md, "The guarantees" 7 (the books balance)
and 6 (nothing is lost).

- per order, the amounts of its applied and stale effects equal its recorded totals;
- every counted effect has its outbox item (until that item's retention ran out), and no
  outbox item lacks its counted effect;
- no outbox item stays pending or sending past its deadline, and none is dead;
- no money waits unmatched.

The scheduled run (hourly) is incremental: only orders that changed since the last run's
checkpoint, found through the keys-only `changed` index (by hour and shard), one order at a
time, so memory does not grow with the tables and time grows with the traffic, not the history.
It is three steps, so that its units run side by side (functions/reconcile/units.py): `plan`,
`check` per unit, `finish`; `run` does all three in this process. `audit` reads everything,
streaming (the fire drill, or by hand after an incident). Either way a mismatch is only a
candidate until it is read again, consistently, after a settle margin: a Query is
read-committed, so it can see an order's totals and not yet the entry a concurrent transaction
wrote with them.

Long on purpose: the full and the incremental check share the per-order audit and its
re-read; apart, the two would drift.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from functions.reconcile.units import (
    MAX_ORDERS_PER_RUN,
    MAX_UNITS_PER_RUN,
    ORDERS_PER_INVOCATION,
    RunPlan,
    Unit,
    UnitTotals,
)
from functions.shared import books, tables
from functions.shared.bindings import BATCH_GET_LIMIT
from functions.shared.domain import COUNTED_OUTCOMES
from functions.shared.dynamo import (
    from_attributes,
    scan_items,
    to_attributes,
)
from functions.shared.outbox import OutboxStatus, outbox_id_for
from functions.shared.settings import DEFAULT_RETENTION_DAYS
from functions.store import checkpoints, queries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CHECKPOINT_PK: Final = "RECONCILIATION"
CHECKPOINT_SK: Final = "CHECKPOINT"
# The last run's summary, beside its checkpoint: what `umavez status` shows an operator.
LAST_RUN_SK: Final = "LAST_RUN"
T = TypeVar("T")
# Index keys one Query of a unit asks for at most (a page of keys is also cut at 1 MB).
QUERY_PAGE_ITEMS: Final = 1000


STUCK: Final = "stuck_outbox_item"
UNREADABLE: Final = "unreadable_order"
# Outbox items read a bucket of the due index by the run's last step (a consistent BatchGet of
# 100 each): the step's time stays bounded when a sink has been down for hours.
BACKLOG_READ_LIMIT: Final = 2000
# An outbox item pending longer than this is reported stuck (the capacity model reads it too).
PENDING_DEADLINE_SECONDS: Final = 3600


@dataclass
class Report:
    orders_checked: int = 0
    # Orders read, in the window or not, by both passes: what the per-run cap bounds.
    orders_read: int = 0
    outbox_items_checked: int = 0
    mismatches: list[books.Mismatch] = field(default_factory=list)
    # Candidates that were fine when read again: a concurrent write, not a broken book.
    cleared_on_recheck: int = 0
    checked_from: str = ""
    checked_until: str = ""
    # False when another run saved the checkpoint after this one read it (runs overlapped):
    # this run's findings stand, its checkpoint is dropped and the other run's kept.
    checkpoint_saved: bool = True
    # False when the run stopped at its cap before `now - settle`: the next run resumes.
    caught_up: bool = True
    # The run's mismatches per kind, its units' included (the finish step has their counts,
    # not their details: each unit logged its own).
    by_kind: dict[str, int] = field(default_factory=dict)

    def totals(self) -> UnitTotals:
        """What a unit's invocation hands on: its counts."""
        return UnitTotals(
            self.orders_read,
            self.orders_checked,
            self.outbox_items_checked,
            self.cleared_on_recheck,
            Counter(m.kind for m in self.mismatches),
        )


@dataclass(frozen=True)
class OrderBooks:
    """One order's books as read once: its changed-at stamp and what was wrong with them."""

    order_id: str
    updated_at: str
    mismatches: list[books.Mismatch]


def iso(seconds: float) -> str:
    """The format the process function stamps `updated_at` with (sortable as text)."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds")


class Reconciler:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        clock: Callable[[], float],
        *,
        pending_deadline_seconds: int = PENDING_DEADLINE_SECONDS,
        settle_seconds: float = 5.0,
        sleep: Callable[[float], None] | None = None,
        retention_seconds: int = DEFAULT_RETENTION_DAYS * 86_400,
        first_run_lookback_seconds: int = 24 * 3600,
        max_orders_per_run: int = MAX_ORDERS_PER_RUN,
        max_units_per_run: int = MAX_UNITS_PER_RUN,
        orders_per_invocation: int = ORDERS_PER_INVOCATION,
        max_candidates: int = 1000,
    ) -> None:
        if max_units_per_run < tables.CHANGES_SHARDS:
            # The plan takes whole hours: fewer units than an hour's shards would never move.
            raise ValueError(f"max_units_per_run must hold an hour ({tables.CHANGES_SHARDS})")
        self._db = dynamodb
        self._tables = table_names
        self._clock = clock
        self._deadline = pending_deadline_seconds
        self._settle = settle_seconds
        self._sleep = sleep or (lambda seconds: None)
        self._retention = retention_seconds
        self._first_lookback = first_run_lookback_seconds
        self._max_orders = max_orders_per_run
        self._max_units = max_units_per_run
        self._per_invocation = orders_per_invocation
        self._max_candidates = max_candidates

    # -- the two ways to run -------------------------------------------------------------------

    def run(self) -> Report:
        """One scheduled run in this process: the plan, each unit to its end, one after the
        other, then the finish, as the state machine runs them side by side. The report holds
        every mismatch with its detail (the units' too)."""
        plan = self.plan()
        found: list[Report] = []
        for unit in plan.units:
            pending: Unit | None = unit
            while pending is not None:
                checked, pending = self.check(pending)
                found.append(checked)
        report = self.finish(plan, [checked.totals() for checked in found])
        report.mismatches = [m for checked in found for m in checked.mismatches] + report.mismatches
        return report

    def plan(self) -> RunPlan:
        """The window since the checkpoint up to `now - settle`, cut into units: per pass, per
        hour, one unit per shard of the `changed` index that holds an order (counted, keys only).
        The window stops at an hour boundary once the run's orders or units reach their caps (a
        huge backlog is resumed by the next run, not lost).

        Then the same window once more, a deadline later (the lagged pass, with its own
        checkpoint): every outbox item of an order whose last change is that old is past its
        deadline, so one that is neither sent nor in the due index (its stream try was lost)
        is reported there, once, however young it was when its order was first checked.
        """
        now = self._clock()
        saved = self._checkpoint()
        start = saved.get("checked_until") or iso(now - self._first_lookback)
        until = iso(now - self._settle)
        units: list[Unit] = []
        counted = [0]
        checked_until = max(self._plan_pass(start, until, units, counted), start)
        lag = self._deadline + 60
        lagged_from = saved.get("lagged_until") or _shifted(start, -lag)
        lagged_until = _shifted(checked_until, -lag)
        if lagged_from < lagged_until:
            # The caps are shared: what the first pass left; the lagged one resumes next run.
            lagged_until = self._plan_pass(lagged_from, lagged_until, units, counted, lagged=True)
        else:
            lagged_until = lagged_from
        return RunPlan(
            checkpoint_read=saved.get("checked_until", ""),
            checked_from=start,
            checked_until=checked_until,
            lagged_until=lagged_until,
            caught_up=checked_until >= until,
            orders_counted=counted[0],
            units=tuple(units),
        )

    def _plan_pass(
        self, start: str, until: str, units: list[Unit], counted: list[int], lagged: bool = False
    ) -> str:
        """Units for the hours of [start, until], whole hours only; how far they reach (an
        hour boundary when a cap stopped them)."""
        for hour_start, hour_end in _hours(start, until):
            full = len(units) + tables.CHANGES_SHARDS > self._max_units
            if counted[0] >= self._max_orders or full:
                return hour_start
            for bucket in tables.changes_buckets(hour_start):
                orders = self._count(bucket)
                if orders:
                    units.append(Unit(bucket, hour_start, hour_end, lagged=lagged))
                    counted[0] += orders
        return until

    def check(self, unit: Unit) -> tuple[Report, Unit | None]:
        """One invocation's share of a unit: the orders of its index partition from its
        cursor on, at most `orders_per_invocation`, those changed within its window checked
        (candidates read again before they are reported); the unit again, resumed where this
        stopped, or None when its partition is done. The first pass reports all but items
        stuck outside the due index, the lagged pass only those (each once)."""
        report = Report(checked_from=unit.checked_from, checked_until=unit.checked_until)
        candidates: list[OrderBooks] = []
        cursor = unit.cursor
        while report.orders_read < self._per_invocation:
            query: dict[str, Any] = {
                **queries.changed(self._tables.ledger, unit.bucket),
                # Exactly what is left of this invocation's share: its cursor is then the
                # last order it read, and the next invocation starts right after it.
                "Limit": min(self._per_invocation - report.orders_read, QUERY_PAGE_ITEMS),
            }
            if cursor:
                query["ExclusiveStartKey"] = cursor
            page = self._db.query(**query)
            for key in page["Items"]:
                order_id = str(key[tables.PARTITION_KEY]["S"]).removeprefix("ORDER#")
                self._check_changed(order_id, unit, report, candidates)
            cursor = page.get("LastEvaluatedKey")
            if not cursor:
                break
        self._confirm(candidates, report)
        return report, unit.resumed_at(cursor) if cursor else None

    def _check_changed(
        self, order_id: str, unit: Unit, report: Report, candidates: list[OrderBooks]
    ) -> None:
        items = self._order_items(order_id)
        report.orders_read += 1
        try:
            # The index knows the hour only: an order of that hour outside this window (before
            # the checkpoint, or within the settle margin) is another run's, and its outbox
            # items are not read.
            if not unit.checked_from <= _updated_at(items) <= unit.checked_until:
                return
            read = Report()
            checked = self._books(order_id, items, read)
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            # An item this code cannot read (written by hand, or by another version) is a
            # finding about that order, not a reason to fail the unit: a failed unit stops
            # the window's every order from being checked, run after run.
            report.mismatches.append(
                books.Mismatch(UNREADABLE, order_id, f"its items cannot be checked: {exc!r}")
            )
            return
        if not unit.lagged:  # (the lagged pass reads them again for stuck items only)
            report.orders_checked += read.orders_checked
            report.outbox_items_checked += read.outbox_items_checked
        kept = [m for m in checked.mismatches if (m.kind == STUCK) == unit.lagged]
        self._note(OrderBooks(checked.order_id, checked.updated_at, kept), candidates, report)

    def finish(self, plan: RunPlan, found: Iterable[UnitTotals]) -> Report:
        """The run's end, once every unit is checked: the units' totals added up, the outbox
        backlog and unmatched money read (few items, once a run), the checkpoint moved to the
        end of the plan's window and the run's summary recorded. Never called when a unit
        failed: the checkpoint then stays, and the next run checks the window again."""
        total = UnitTotals()
        for unit in found:
            total = total.add(unit)
        report = Report(
            orders_checked=total.orders_checked,
            orders_read=total.orders_read,
            outbox_items_checked=total.outbox_items_checked,
            cleared_on_recheck=total.cleared_on_recheck,
            checked_from=plan.checked_from,
            checked_until=plan.checked_until,
            caught_up=plan.caught_up,
        )
        self._check_outbox_backlog(report)
        self._check_unmatched(report)
        report.by_kind = dict(total.mismatches + Counter(m.kind for m in report.mismatches))
        report.checkpoint_saved = self._save_checkpoint(
            plan.checkpoint_read, plan.checked_until, plan.lagged_until
        )
        self._record_run(report)
        return report

    def audit(self, workers: int = 1, outbox_keys_per_read: int = BATCH_GET_LIMIT) -> Report:
        """Every order and every outbox item, streamed: one consistent scan of the ledger, whose
        pages carry each order's items together (a partition's items are stored, and scanned,
        together), the orders' outbox items read 100 keys a request, then one scan of the
        outbox for items without their entry. Memory stays flat; requests grow with the
        tables' pages, not with their orders (a Query per order made the drill's audit of
        3,300 orders its slowest check). `workers` outbox reads at a time. An order whose
        items straddle two pages is joined again; one changed between the two pages' reads
        looks wrong and is read again, whole, before anything is reported. (Were an order's
        items ever not together, the part without the order item would go unchecked: a
        DynamoDB Scan reads each partition's items in turn.) Leaves the checkpoint alone."""
        report = Report(checked_from="", checked_until=iso(self._clock()))
        candidates: list[OrderBooks] = []
        groups = _groups(self._scanned_orders(), self._announced_ids, outbox_keys_per_read)
        for checked, read in self._checked_groups(groups, workers):
            report.orders_checked += read.orders_checked
            report.outbox_items_checked += read.outbox_items_checked
            self._note(checked, candidates, report)
        orphans: list[dict[str, Any]] = []
        for page in _chunks(scan_items(self._db, self._tables.outbox), BATCH_GET_LIMIT):
            report.outbox_items_checked += len(page)
            orphans += self._items_without_their_effect(page)[: self._max_candidates]
        self._confirm(candidates, report)
        self._confirm_orphans(orphans, report)
        self._check_outbox_backlog(report)
        self._check_unmatched(report)
        return report

    def _scanned_orders(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        """Each order and its entries, as one consistent scan of the ledger reads them."""
        partition = ""
        items: list[dict[str, Any]] = []
        for item in scan_items(self._db, self._tables.ledger, consistent_read=True):
            key = str(item[tables.PARTITION_KEY])
            if key != partition:
                if _order_of(items):
                    yield partition.removeprefix("ORDER#"), items
                partition, items = key, []
            if key.startswith("ORDER#"):
                items.append(item)
        if _order_of(items):
            yield partition.removeprefix("ORDER#"), items

    def _checked_groups(
        self, groups: Iterable[list[ScannedOrder]], workers: int
    ) -> Iterator[tuple[OrderBooks, Report]]:
        """Each order's books and what reading them counted, in the order given; a group's
        outbox items are one read, `workers` groups read at a time, at most twice as many
        waiting to be taken (memory stays flat)."""
        if workers <= 1:
            for group in groups:
                yield from self._check_group(group)
            return
        with ThreadPoolExecutor(workers, thread_name_prefix="audit") as reads:
            pending: deque[Future[list[tuple[OrderBooks, Report]]]] = deque()
            for group in groups:
                pending.append(reads.submit(self._check_group, group))
                if len(pending) >= 2 * workers:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()

    def _check_group(self, group: list[ScannedOrder]) -> list[tuple[OrderBooks, Report]]:
        outbox = self._outbox_items([i for order in group for i in order.outbox_ids])
        checked = []
        for order in group:
            read = Report()  # (each order's books take their own items from the group's read)
            checked.append((self._books(order.order_id, order.items, read, outbox), read))
        return checked

    # -- one order -----------------------------------------------------------------------------

    def _check_order(self, order_id: str, report: Report) -> OrderBooks:
        return self._books(order_id, self._order_items(order_id), report)

    def _order_items(self, order_id: str) -> list[dict[str, Any]]:
        """The order and its entries, in one consistent Query."""
        return self._query_all(
            **queries.partition(self._tables.ledger, tables.order_pk(order_id)),
            ConsistentRead=True,
        )

    def _books(
        self,
        order_id: str,
        items: list[dict[str, Any]],
        report: Report,
        outbox: dict[str, dict[str, Any]] | None = None,
    ) -> OrderBooks:
        """The order's books from its items, and its counted entries' outbox items: read now,
        or taken from `outbox` (read a little earlier, for several orders at once)."""
        order = _order_of(items)
        effects = _effects(items)
        report.orders_checked += 1
        mismatches = books.unbalanced_totals({"order_id": order_id, **order}, effects)
        within_retention = self._announced(effects)
        wanted = [outbox_id_for(e["effect_key"]) for e in within_retention]
        if outbox is None:
            outbox = self._outbox_items(wanted)
        else:  # its own items only, and none whose entry passed the retention since
            outbox = {i: outbox[i] for i in wanted if i in outbox}
        report.outbox_items_checked += len(outbox)
        mismatches += books.unmatched_outbox(within_retention, outbox.values())
        # Items in the due index are the backlog check's; an item outside it that is not sent
        # was never tried, or its try was lost: only its order's check can find it.
        mismatches += [
            stuck
            for item in outbox.values()
            if tables.OUTBOX_DUE_BUCKET not in item and (stuck := self._stuck(item))
        ]
        return OrderBooks(order_id, _updated_at(items), mismatches)

    def _announced(self, effects: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The counted entries whose outbox item must exist. A sent item expires after the
        retention; its entry stays. Not a missing item."""
        horizon = iso(self._clock() - self._retention)
        return [
            e
            for e in effects
            if e["outcome"] in COUNTED_OUTCOMES and str(e.get("recorded_at", "")) > horizon
        ]

    def _announced_ids(self, items: list[dict[str, Any]]) -> list[str]:
        return [outbox_id_for(e["effect_key"]) for e in self._announced(_effects(items))]

    def _note(self, checked: OrderBooks, candidates: list[OrderBooks], report: Report) -> None:
        if not checked.mismatches:
            return
        if len(candidates) < self._max_candidates:
            candidates.append(checked)
        else:
            report.mismatches += checked.mismatches  # too many to re-read: reported as read

    def _confirm(self, candidates: list[OrderBooks], report: Report) -> None:
        """Read each candidate again after the settle margin. An order that changed since is
        left to the run that covers its new change; one unchanged and still wrong is real."""
        if not candidates:
            return
        self._sleep(self._settle)
        for first in candidates:
            again = self._check_order(first.order_id, Report())
            # Only the kinds it was a candidate for: a pass reports its own kinds (the lagged
            # one stuck items only), and another kind of the same order is the other pass's.
            kinds = {m.kind for m in first.mismatches}
            confirmed = [m for m in again.mismatches if m.kind in kinds]
            if again.updated_at != first.updated_at or not confirmed:
                report.cleared_on_recheck += 1
            else:
                report.mismatches += confirmed

    # -- outbox items: unexpected, stuck, dead ---------------------------------------------------

    def _confirm_orphans(self, orphans: list[dict[str, Any]], report: Report) -> None:
        """An item whose entry was not there is read again, with its entry, after the margin
        (`_confirm` has slept it already when there were order candidates too)."""
        if not orphans:
            return
        self._sleep(self._settle)
        still = []
        for page in _chunks(orphans, BATCH_GET_LIMIT):
            current = self._outbox_items([item[tables.OUTBOX_KEY] for item in page])
            still += self._items_without_their_effect(list(current.values()))
        report.cleared_on_recheck += len(orphans) - len(still)
        report.mismatches += [
            books.Mismatch(
                "unexpected_outbox_item",
                str(item["order_id"]),
                f"{item[tables.OUTBOX_KEY]} announces effect {item['effect_key']}, "
                "which is not a counted entry of its order",
            )
            for item in still
        ]

    def _items_without_their_effect(self, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Outbox items whose counted entry is not in the ledger."""
        keys = {
            (tables.order_pk(item["order_id"]), tables.effect_sk(item["effect_key"])): item
            for item in items
        }
        found = self._batch_get(
            self._tables.ledger,
            [{tables.PARTITION_KEY: pk, tables.SORT_KEY: sk} for pk, sk in keys],
        )
        counted = {
            (effect[tables.PARTITION_KEY], effect[tables.SORT_KEY])
            for effect in found
            if effect.get("outcome") in COUNTED_OUTCOMES
        }
        return [item for key, item in keys.items() if key not in counted]

    def _check_outbox_backlog(self, report: Report) -> None:
        """Unfinished items are exactly those in the due index's shards; dead ones in its
        `dead` bucket. Both are few, and read whole without a scan, up to BACKLOG_READ_LIMIT
        a bucket: past that (a sink down for hours at a high rate) the bucket is reported as
        such, once, instead of read item by item past the run's time."""
        unfinished = [
            item
            for bucket in tables.due_buckets()
            for item in self._outbox_items(self._bucket_ids(bucket, report)).values()
        ]
        report.mismatches += [stuck for item in unfinished if (stuck := self._stuck(item))]
        dead_ids = self._bucket_ids(tables.OUTBOX_DEAD_BUCKET, report)
        dead = self._outbox_items(dead_ids).values()
        report.mismatches += [
            books.Mismatch(
                "dead_outbox_item",
                item["order_id"],
                f"{item['outbox_id']} dead after {item.get('attempts')} attempts: "
                f"{item.get('last_error', '')}; `umavez outbox revive {item['outbox_id']}`",
            )
            for item in dead
            if item.get("status") == OutboxStatus.DEAD.value
        ]

    def _stuck(self, item: dict[str, Any]) -> books.Mismatch | None:
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

    def _bucket_ids(self, bucket: str, report: Report) -> list[str]:
        """At most BACKLOG_READ_LIMIT ids of the bucket; one more there is reported."""
        ids = list(
            queries.due_index_ids(
                self._db, self._tables.outbox, bucket, max_items=BACKLOG_READ_LIMIT + 1
            )
        )
        if len(ids) > BACKLOG_READ_LIMIT:
            kind = "dead_outbox_item" if bucket == tables.OUTBOX_DEAD_BUCKET else STUCK
            report.mismatches.append(
                books.Mismatch(
                    kind,
                    "",
                    f"over {BACKLOG_READ_LIMIT} items in the outbox's {bucket!r} bucket: the "
                    f"first {BACKLOG_READ_LIMIT} checked (is a sink down? `umavez status`)",
                )
            )
        return ids[:BACKLOG_READ_LIMIT]

    def _check_unmatched(self, report: Report) -> None:
        unmatched = self._query_all(
            **queries.partition(self._tables.ledger, tables.UNMATCHED_PK),
            # A lagging read could miss a delivery the waiting re-drive just moved here.
            ConsistentRead=True,
        )
        report.mismatches += [
            books.Mismatch(
                "unmatched_payment",
                "?",
                f"{item.get('provider')} {item.get('external_ref')} "
                f"{item.get('amount')} {item.get('currency')}: no order; "
                f"`umavez attach {item.get('provider')} {(item.get('objects') or ['?'])[0]} "
                "ORDER_ID`",
            )
            for item in unmatched
        ]

    # -- reads -----------------------------------------------------------------------------------

    def _count(self, bucket: str) -> int:
        """Orders in one partition of the `changed` index (keys only: about 80 keys per read
        unit, a page of ~13,000 per request)."""
        pages = self._db.get_paginator("query").paginate(
            **queries.changed(self._tables.ledger, bucket), Select="COUNT"
        )
        return sum(int(page["Count"]) for page in pages)

    def _outbox_items(self, outbox_ids: list[str]) -> dict[str, dict[str, Any]]:
        found = self._batch_get(self._tables.outbox, [{tables.OUTBOX_KEY: i} for i in outbox_ids])
        return {item[tables.OUTBOX_KEY]: item for item in found}

    def _batch_get(self, table: str, keys: list[dict[str, str]]) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for chunk in _chunks(keys, BATCH_GET_LIMIT):
            request: dict[str, Any] = {
                table: {"Keys": [to_attributes(k) for k in chunk], "ConsistentRead": True}
            }
            while request:
                response = self._db.batch_get_item(RequestItems=request)
                found += [from_attributes(i) for i in response["Responses"].get(table, [])]
                request = dict(response.get("UnprocessedKeys") or {})
        return found

    def _query_pages(self, **query: Any) -> Iterator[dict[str, Any]]:
        for page in self._db.get_paginator("query").paginate(**query):
            for item in page["Items"]:
                yield from_attributes(item)

    def _query_all(self, **query: Any) -> list[dict[str, Any]]:
        return list(self._query_pages(**query))

    # -- the checkpoint ----------------------------------------------------------------------

    def _checkpoint(self) -> dict[str, str]:
        """Where the last run's two passes stopped (`checked_until`, `lagged_until`)."""
        response = self._db.get_item(
            TableName=self._tables.ledger,
            Key=to_attributes(
                {tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: CHECKPOINT_SK}
            ),
            ConsistentRead=True,
        )
        item = from_attributes(response.get("Item", {}))
        return {k: str(item[k]) for k in ("checked_until", "lagged_until") if item.get(k)}

    def _save_checkpoint(self, read: str, checked_until: str, lagged_until: str) -> bool:
        """Saved only if it is still the one this run started from. Two runs that overlap (a
        manual run beside the scheduled one) read the same checkpoint; the first to finish
        saves, and the other's save is refused rather than writing over it with the window it
        had read. False when refused. Saving the same checkpoint again succeeds: a finish step
        retried after its save went through is not an overlap."""
        item = {
            tables.PARTITION_KEY: CHECKPOINT_PK,
            tables.SORT_KEY: CHECKPOINT_SK,
            "checked_until": checked_until,
            "lagged_until": lagged_until,
            "saved_at": iso(self._clock()),
        }
        return checkpoints.save_passes(self._db, self._tables.ledger, item, read)

    def _record_run(self, report: Report) -> None:
        """The run's summary beside the checkpoint, when its checkpoint was saved (an
        overlapping run's is not shown over a newer one); and, whenever a run found
        mismatches, when and what: kept until a later run finds some again, so that a finding
        is still shown after the runs that follow it find nothing (each order is checked by
        one run only)."""
        now = iso(self._clock())
        sets: dict[str, object] = {}
        if report.checkpoint_saved:
            sets |= {
                "ran_at": now,
                "checked_from": report.checked_from,
                "checked_until": report.checked_until,
                "orders_checked": report.orders_checked,
                "mismatches": report.by_kind,
                "caught_up": report.caught_up,
            }
        if any(report.by_kind.values()):
            sets |= {"last_mismatch_at": now, "last_mismatches": report.by_kind}
        if not sets:
            return
        names = {f"#{name}": name for name in sets}
        self._db.update_item(
            TableName=self._tables.ledger,
            Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: LAST_RUN_SK}),
            UpdateExpression="SET " + ", ".join(f"#{name} = :{name}" for name in sets),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=to_attributes({f":{k}": v for k, v in sets.items()}),
        )


def _hours(start: str, until: str) -> Iterator[tuple[str, str]]:
    """[start, until] cut at each hour: the `changed` index is bucketed by hour."""
    cursor = datetime.fromisoformat(start)
    end = datetime.fromisoformat(until)
    while cursor <= end:
        next_hour = cursor.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        hour_end = min(end, next_hour - timedelta(milliseconds=1))
        yield _stamp(cursor), _stamp(hour_end)
        cursor = next_hour


def _shifted(stamp: str, seconds: float) -> str:
    return _stamp(datetime.fromisoformat(stamp) + timedelta(seconds=seconds))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


def _chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@dataclass(frozen=True)
class ScannedOrder:
    order_id: str
    items: list[dict[str, Any]]
    outbox_ids: list[str]


def _groups(
    orders: Iterable[tuple[str, list[dict[str, Any]]]],
    outbox_ids: Callable[[list[dict[str, Any]]], list[str]],
    keys_per_read: int,
) -> Iterator[list[ScannedOrder]]:
    """Orders in turn, gathered while their outbox items fit one read (an order with more is
    a group of its own, read in several), and never more orders than that: orders with no
    item to read (older than the retention) would otherwise gather without end."""
    group: list[ScannedOrder] = []
    keys = 0
    for order_id, items in orders:
        order = ScannedOrder(order_id, items, outbox_ids(items))
        if group and (keys + len(order.outbox_ids) > keys_per_read or len(group) >= keys_per_read):
            yield group
            group, keys = [], 0
        group.append(order)
        keys += len(order.outbox_ids)
    if group:
        yield group


def _effects(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [i for i in items if str(i[tables.SORT_KEY]).startswith(tables.EFFECT_SORT_PREFIX)]


def _order_of(items: list[dict[str, Any]]) -> dict[str, Any]:
    return next((i for i in items if i[tables.SORT_KEY] == tables.ORDER_SORT), {})


def _updated_at(items: list[dict[str, Any]]) -> str:
    return str(_order_of(items).get("updated_at", ""))
