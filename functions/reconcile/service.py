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

The full and the incremental check share the per-order check (order_books.py) and its re-read
(here); apart, the two would drift. The reads are reads.py's, the window's cut planning.py's,
the outbox's and unmatched money's checks mismatches.py's, the run's records checkpoint.py's.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final

from functions.reconcile import checkpoint
from functions.reconcile.mismatches import (
    PENDING_DEADLINE_SECONDS,
    STUCK,
    OutboxChecks,
    unexpected,
)
from functions.reconcile.order_books import BooksCheck, OrderBooks
from functions.reconcile.planning import PlanLimits, Planner
from functions.reconcile.reads import Reads, ScannedOrder, chunks, groups, updated_at
from functions.reconcile.report import Report
from functions.reconcile.stamps import iso
from functions.reconcile.units import (
    MAX_ORDERS_PER_RUN,
    MAX_UNITS_PER_RUN,
    ORDERS_PER_INVOCATION,
    SETTLE_SECONDS,
    RunPlan,
    Unit,
    UnitTotals,
)
from functions.shared import books, tables
from functions.shared.bindings import BATCH_GET_LIMIT
from functions.shared.dynamo import scan_items
from functions.shared.settings import DEFAULT_RETENTION_DAYS

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Index keys one Query of a unit asks for at most (a page of keys is also cut at 1 MB).
QUERY_PAGE_ITEMS: Final = 1000
UNREADABLE: Final = "unreadable_order"


class Reconciler:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        clock: Callable[[], float],
        *,
        pending_deadline_seconds: int = PENDING_DEADLINE_SECONDS,
        settle_seconds: float = SETTLE_SECONDS,
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
        self._settle = settle_seconds
        self._sleep = sleep or (lambda seconds: None)
        self._per_invocation = orders_per_invocation
        self._max_candidates = max_candidates
        self._reads = Reads(dynamodb, table_names)
        self._outbox = OutboxChecks(self._reads, table_names, clock, pending_deadline_seconds)
        self._books = BooksCheck(self._reads, self._outbox, clock, retention_seconds)
        limits = PlanLimits(
            settle_seconds,
            first_run_lookback_seconds,
            pending_deadline_seconds,
            max_orders_per_run,
            max_units_per_run,
        )
        self._planner = Planner(limits, self._reads.count)

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
        """The window since the checkpoint, cut into units (planning.py: the first pass and
        the lagged one, up to the run's caps)."""
        now = self._clock()
        return self._planner.plan(now, checkpoint.read(self._db, self._tables.ledger))

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
            # Exactly what is left of this invocation's share: its cursor is then the last
            # order it read, and the next invocation starts right after it.
            limit = min(self._per_invocation - report.orders_read, QUERY_PAGE_ITEMS)
            page = self._reads.changed_page(unit.bucket, limit, cursor)
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
        items = self._reads.order_items(order_id)
        report.orders_read += 1
        try:
            # The index knows the hour only: an order of that hour outside this window (before
            # the checkpoint, or within the settle margin) is another run's, and its outbox
            # items are not read.
            if not unit.checked_from <= updated_at(items) <= unit.checked_until:
                return
            read = Report()
            checked = self._books.books(order_id, items, read)
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

    # -- the run's end, and the full audit ------------------------------------------------------

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
        report.mismatches += self._outbox.backlog()
        report.mismatches += self._outbox.unmatched()
        report.by_kind = dict(total.mismatches + Counter(m.kind for m in report.mismatches))
        report.checkpoint_saved = checkpoint.save(
            self._db,
            self._tables.ledger,
            plan.checkpoint_read,
            plan.checked_until,
            plan.lagged_until,
            iso(self._clock()),
        )
        checkpoint.record_run(self._db, self._tables.ledger, report, iso(self._clock()))
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
        scanned = groups(
            self._reads.scanned_orders(), self._books.announced_ids, outbox_keys_per_read
        )
        for checked, read in self._checked_groups(scanned, workers):
            report.orders_checked += read.orders_checked
            report.outbox_items_checked += read.outbox_items_checked
            self._note(checked, candidates, report)
        orphans: list[dict[str, Any]] = []
        for page in chunks(scan_items(self._db, self._tables.outbox), BATCH_GET_LIMIT):
            report.outbox_items_checked += len(page)
            orphans += self._outbox.without_their_effect(page)[: self._max_candidates]
        self._confirm(candidates, report)
        self._confirm_orphans(orphans, report)
        report.mismatches += self._outbox.backlog()
        report.mismatches += self._outbox.unmatched()
        return report

    def _checked_groups(
        self, gathered: Iterable[list[ScannedOrder]], workers: int
    ) -> Iterator[tuple[OrderBooks, Report]]:
        """Each order's books and what reading them counted, in the order given; a group's
        outbox items are one read, `workers` groups read at a time, at most twice as many
        waiting to be taken (memory stays flat)."""
        if workers <= 1:
            for group in gathered:
                yield from self._check_group(group)
            return
        with ThreadPoolExecutor(workers, thread_name_prefix="audit") as reads:
            pending: deque[Future[list[tuple[OrderBooks, Report]]]] = deque()
            for group in gathered:
                pending.append(reads.submit(self._check_group, group))
                if len(pending) >= 2 * workers:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()

    def _check_group(self, group: list[ScannedOrder]) -> list[tuple[OrderBooks, Report]]:
        outbox = self._reads.outbox_items([i for order in group for i in order.outbox_ids])
        checked = []
        for order in group:
            read = Report()  # (each order's books take their own items from the group's read)
            checked.append((self._books.books(order.order_id, order.items, read, outbox), read))
        return checked

    # -- candidates, read again -----------------------------------------------------------------

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
            again = self._books.check_order(first.order_id, Report())
            # Only the kinds it was a candidate for: a pass reports its own kinds (the lagged
            # one stuck items only), and another kind of the same order is the other pass's.
            kinds = {m.kind for m in first.mismatches}
            confirmed = [m for m in again.mismatches if m.kind in kinds]
            if again.updated_at != first.updated_at or not confirmed:
                report.cleared_on_recheck += 1
            else:
                report.mismatches += confirmed

    def _confirm_orphans(self, orphans: list[dict[str, Any]], report: Report) -> None:
        """An item whose entry was not there is read again, with its entry, after the margin
        (`_confirm` has slept it already when there were order candidates too)."""
        if not orphans:
            return
        self._sleep(self._settle)
        still = []
        for page in chunks(orphans, BATCH_GET_LIMIT):
            current = self._reads.outbox_items([item[tables.OUTBOX_KEY] for item in page])
            still += self._outbox.without_their_effect(list(current.values()))
        report.cleared_on_recheck += len(orphans) - len(still)
        report.mismatches += unexpected(still)
