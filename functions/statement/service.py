"""The statement pass: a window of the provider's own books booked, then matched to the ledger.

Each line of the statement is read as the delivery announcing its movement is read, and goes
through the same processor (booking.py); then every entry a delivery counted in the window is
matched to the lines (matching.py), over the orders changed since the window began
(ledger_reads.py). What the pass found, and each kind of mismatch, is report.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Final, TypeVar

from functions.process.service import EffectProcessor
from functions.shared import tables
from functions.shared.books import Mismatch
from functions.shared.dynamo import to_attributes
from functions.statement.booking import LineBooking
from functions.statement.ledger_reads import orders_changed_since
from functions.statement.lines import Line
from functions.statement.matching import EntryMatch
from functions.statement.report import StatementReport, iso
from functions.store.reads import order_entries

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

A = TypeVar("A")
B = TypeVar("B")
# An entry's time is its delivery's; its line's is the movement's own, a few seconds apart.
# Lines are read this much beyond the window on each side, so that an entry at the window's
# edge finds its line.
EDGE_SECONDS: Final = 600
# Each provider's last pass, in the ledger, for `umavez status` (sort key: the provider).
LAST_RUN_PK: Final = "STATEMENT"
DETAILS_KEPT: Final = 20  # the mismatches a run's record lists (the command prints them all)


class StatementPass:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        processor: EffectProcessor,
        clock: Callable[[], float],
        workers: int = 1,
    ) -> None:
        self._db = dynamodb
        self._tables = table_names
        self._booking = LineBooking(dynamodb, table_names, processor)
        self._clock = clock
        self._workers = workers

    @staticmethod
    def read_window(since: int, until: int, edge_seconds: int = EDGE_SECONDS) -> tuple[int, int]:
        """What to read for a window [since, until): its lines and those at its edges."""
        return since - edge_seconds, until + edge_seconds

    def run(
        self,
        provider: str,
        lines: Iterable[Line],
        since: int,
        until: int,
        known: Callable[[Mapping[str, Any]], bool] | None = None,
        orders: Sequence[str] | None = None,
    ) -> StatementReport:
        """Books the lines (read over `read_window`), then matches the window's entries: those
        of every order changed since the window began, or of `orders` only. An entry no line
        moved is asked of `known` (the provider's API, where its statement lags behind its
        movements: Asaas credits a card payment a month after it) before it is reported
        unknown to the provider."""
        report = StatementReport(provider, since, until)
        read = sorted(lines, key=lambda line: (line.created, line.line_id))
        report.lines_read = len(read)
        shares = _by_payment(read)
        if self._workers <= 1 or len(shares) <= 1:
            for line in read:
                self._booking.book_line(line, read, report)
        else:
            # A line's time is spent waiting on DynamoDB: payments side by side, each one's
            # lines in their order (its captures, then its refunds), as its webhooks would.
            def book(share: list[Line]) -> StatementReport:
                part = StatementReport(provider, since, until)
                for line in share:
                    self._booking.book_line(line, read, part)
                return part

            for part in self._each(book, shares):
                report.absorb(part)
        self._check_entries(provider, read, report, known, orders)
        self.record(report)
        return report

    def record(self, report: StatementReport) -> None:
        """The pass's summary as the provider's last run (`umavez status` reads it)."""
        summary = report.to_json()
        summary["details"] = summary["details"][:DETAILS_KEPT]
        summary["found"] = summary["found"][:DETAILS_KEPT]
        item = {
            tables.PARTITION_KEY: LAST_RUN_PK,
            tables.SORT_KEY: report.provider,
            "ran_at": iso(int(self._clock())),
            **summary,
        }
        self._db.put_item(TableName=self._tables.ledger, Item=to_attributes(item))

    def _check_entries(
        self,
        provider: str,
        read: list[Line],
        report: StatementReport,
        known: Callable[[Mapping[str, Any]], bool] | None,
        orders: Sequence[str] | None,
    ) -> None:
        """Every entry a delivery counted in the window names an object a line moved."""
        match = EntryMatch.of(provider, read, report.since, report.until, known)
        checked = (
            orders_changed_since(self._db, self._tables.ledger, report.since, self._clock)
            if orders is None
            else iter(orders)
        )

        def check(order_id: str) -> tuple[int, list[Mismatch]]:
            return match.check(order_id, order_entries(self._db, self._tables.ledger, order_id))

        for count, unknown in self._each(check, checked):
            report.entries_checked += count
            report.mismatches += unknown

    def _each(self, do: Callable[[A], B], items: Iterable[A]) -> Iterator[B]:
        """`do` of each item, in their order: `workers` at a time."""
        if self._workers <= 1:
            yield from map(do, items)
            return
        with ThreadPoolExecutor(self._workers, thread_name_prefix="statement") as pool:
            yield from pool.map(do, items)


def _by_payment(read: list[Line]) -> list[list[Line]]:
    """The lines, a list per payment they move (in their order), in the order of each one's
    first line."""
    shares: dict[str, list[Line]] = {}
    for line in read:
        payment = next((e.payment for e in line.effects if e.payment), line.net_of)
        shares.setdefault(payment or line.line_id, []).append(line)
    return list(shares.values())
