"""The statement pass: a window of the provider's own books booked, then matched to the ledger.

Each line of the statement is read as the delivery announcing its movement is read, and goes
through the same processor: what a delivery already booked is a duplicate, what none brought is
applied now, announced once, and marked as found by the statement. Then the match, reported by
kind and never repaired silently:

- `movement_missing`: a line the statement could not book (its object unreadable, bound to no
  order, or bound to another);
- `amount_differs`: the ledger counted another amount for the movement than the provider moved
  (a mis-map) -- the line is not booked over it;
- `entry_unknown_to_provider`: an entry a delivery booked in the window that no line of the
  provider moved (a mis-map, or a forged delivery).

Each booked line's fee and net are recorded once on its order (`fee_total`, `net_total`, in the
account's settlement currency): a merchant reads what the provider actually paid out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from functions.process.service import EffectProcessor, Processed
from functions.shared import tables
from functions.shared.bindings import bound_orders
from functions.shared.books import Mismatch
from functions.shared.domain import (
    COUNTED_OUTCOMES,
    VIA_STATEMENT,
    Effect,
    Outcome,
    Transition,
)
from functions.shared.dynamo import from_attributes, to_attributes
from functions.shared.errors import OrderNotYetKnownError, WriteContendedError
from functions.statement.lines import Line
from functions.store import queries
from functions.store.fees import fee_record
from functions.store.transaction import commit

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

A = TypeVar("A")
B = TypeVar("B")
MOVEMENT_MISSING: Final = "movement_missing"
AMOUNT_DIFFERS: Final = "amount_differs"
ENTRY_UNKNOWN: Final = "entry_unknown_to_provider"
MISMATCH_KINDS: Final = (MOVEMENT_MISSING, AMOUNT_DIFFERS, ENTRY_UNKNOWN)
# The entries a line of the statement stands behind: a payment, a refund, a dispute's
# withdrawal. Reversals, inquiries and verdicts move what those did (or nothing) and are
# checked through them.
MOVING: Final = frozenset({Transition.PAID, Transition.REFUNDED, Transition.DISPUTED})
# An entry's time is its delivery's; its line's is the movement's own, a few seconds apart.
# Lines are read this much beyond the window on each side, so that an entry at the window's
# edge finds its line.
EDGE_SECONDS: Final = 600
CONTENDED_TRIES: Final = 5
# Each provider's last pass, in the ledger, for `umavez status` (sort key: the provider).
LAST_RUN_PK: Final = "STATEMENT"
DETAILS_KEPT: Final = 20  # the mismatches a run's record lists (the command prints them all)
COUNTS: Final = (
    "lines_read",
    "movements",
    "booked",
    "already_booked",
    "pending",
    "fees_recorded",
    "entries_checked",
)


@dataclass
class StatementReport:
    provider: str
    since: int
    until: int
    lines_read: int = 0
    movements: int = 0  # lines moving an order's money
    booked: int = 0  # found by the statement: no delivery had brought them
    already_booked: int = 0
    pending: int = 0  # moving money that counts later (a refund still pending)
    fees_recorded: int = 0
    entries_checked: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    found: list[str] = field(default_factory=list)  # "order: line" of each movement booked

    def count(self, kind: str) -> int:
        return sum(m.kind == kind for m in self.mismatches)

    @classmethod
    def from_json(cls, told: Mapping[str, Any]) -> StatementReport:
        """The report as `to_json` told it (the scheduled function's answer)."""
        return cls(
            str(told["provider"]),
            int(datetime.fromisoformat(str(told["since"])).timestamp()),
            int(datetime.fromisoformat(str(told["until"])).timestamp()),
            **{name: int(told[name]) for name in COUNTS},
            mismatches=[
                Mismatch(str(d["kind"]), str(d["order_id"]), str(d["detail"]))
                for d in told["details"]
            ],
            found=[str(found) for found in told["found"]],
        )

    def absorb(self, part: StatementReport) -> None:
        """What a share of the lines counted, added to this report (lines read aside)."""
        for name in COUNTS:
            if name != "lines_read":
                setattr(self, name, getattr(self, name) + getattr(part, name))
        self.mismatches += part.mismatches
        self.found += part.found

    def to_json(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "since": _iso(self.since),
            "until": _iso(self.until),
            **{name: getattr(self, name) for name in COUNTS},
            "mismatches": {kind: self.count(kind) for kind in MISMATCH_KINDS},
            "found": self.found,
            "details": [
                {"kind": m.kind, "order_id": m.order_id, "detail": m.detail}
                for m in self.mismatches
            ],
        }


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
        self._processor = processor
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
                self._book_line(line, read, report)
        else:
            # A line's time is spent waiting on DynamoDB: payments side by side, each one's
            # lines in their order (its captures, then its refunds), as its webhooks would.
            def book(share: list[Line]) -> StatementReport:
                part = StatementReport(provider, since, until)
                for line in share:
                    self._book_line(line, read, part)
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
            "ran_at": _iso(int(self._clock())),
            **summary,
        }
        self._db.put_item(TableName=self._tables.ledger, Item=to_attributes(item))

    # -- booking -------------------------------------------------------------------------

    def _book_line(self, line: Line, read: list[Line], report: StatementReport) -> None:
        if not line.moves_money:
            return
        report.movements += 1
        if line.unreadable is not None:
            report.mismatches.append(
                Mismatch(MOVEMENT_MISSING, "", f"{line.line_id} unreadable: {line.unreadable}")
            )
            return
        if line.net_of is not None:
            self._record_net_of(line, report)
            return
        if not line.effects:  # money that counts later: a refund still pending
            report.pending += 1
            return
        orders: set[str] = set()
        elsewhere: dict[str, str] = {}  # the order the line's object names: the one counting it
        for effect in line.effects:
            bound = self._bound_to(effect)
            refused = self._capture_refused(effect, bound or effect.order_id, line, read)
            if refused is not None:
                report.mismatches.append(refused)
                continue
            processed = self._book(effect, bound, line, report)
            if processed is not None and processed.order_id is not None:
                orders.add(processed.order_id)
                if effect.order_id not in (None, processed.order_id):
                    elsewhere[str(effect.order_id)] = processed.order_id
        for named, bound in elsewhere.items():
            # Counted once, on the order its payment is bound to; the order the provider moved
            # it for holds none of it: a conflict its deliveries reported, or a mis-map (no
            # delivery said so). Either needs a person.
            report.mismatches.append(
                Mismatch(
                    MOVEMENT_MISSING,
                    named,
                    f"{line.line_id} ({', '.join(line.moves)}) names order {named}; its payment "
                    f"is bound to order {bound}, which counts it",
                )
            )
        for order_id in orders:
            report.fees_recorded += self._record_fee(order_id, line)

    def _record_net_of(self, line: Line, report: StatementReport) -> None:
        """A line booking no entry of its own: its net on the order its payment is bound to
        (read after the payment's own line, which bound it)."""
        payment = str(line.net_of)
        found, _ = bound_orders(self._db, self._tables.ledger, line.provider, (payment,))
        order_id = found.get(payment)
        if order_id is None:
            report.mismatches.append(
                Mismatch(
                    MOVEMENT_MISSING,
                    "",
                    f"{line.line_id} moves payment {payment}'s money; the payment is bound to "
                    "no order",
                )
            )
            return
        report.already_booked += 1
        report.fees_recorded += self._record_fee(order_id, line)

    def _book(
        self, effect: Effect, bound: str | None, line: Line, report: StatementReport
    ) -> Processed | None:
        if bound is not None and effect.order_id not in (None, bound):
            # Its object names another order than the one its payment is bound to (a conflict
            # its deliveries reported): the money is the bound order's, booked there once.
            effect = replace(effect, order_id=bound)
        for attempt in range(1, CONTENDED_TRIES + 1):
            try:
                [processed] = self._processor.process_readings([effect])
                break
            except OrderNotYetKnownError:
                report.mismatches.append(
                    Mismatch(
                        MOVEMENT_MISSING,
                        "",
                        f"{line.line_id}: {effect.external_ref} is bound to no order "
                        "(its object names none, and no delivery bound it)",
                    )
                )
                return None
            except WriteContendedError:
                if attempt == CONTENDED_TRIES:
                    raise
        outcome = processed.outcome
        if outcome in COUNTED_OUTCOMES:
            report.booked += 1
            report.found.append(f"{processed.order_id}: {line.line_id} {effect.external_ref}")
        elif outcome is Outcome.VOIDED:
            # A refund that failed before it counted is voided, as its deliveries void it.
            report.already_booked += 1
        elif outcome is Outcome.IGNORED:
            pass  # a release or verdict with nothing left open to settle: no movement
        elif outcome is Outcome.DUPLICATE and processed.amount_disagrees:
            report.mismatches.append(
                Mismatch(
                    AMOUNT_DIFFERS, processed.order_id or "", f"{line.line_id}: {processed.detail}"
                )
            )
        elif outcome is Outcome.DUPLICATE:
            report.already_booked += 1
        else:
            report.mismatches.append(
                Mismatch(
                    MOVEMENT_MISSING,
                    processed.order_id or "",
                    f"{line.line_id} ({effect.external_ref}): {outcome.value}, {processed.detail}",
                )
            )
            return None
        return processed

    def _capture_refused(
        self, effect: Effect, order_id: str | None, line: Line, read: list[Line]
    ) -> Mismatch | None:
        """A payment's line books its captures only where the ledger's count is short by
        captures the statement lists: a count no run of the payment's captures explains is a
        mis-map, reported, not topped up to the provider's total."""
        if not (effect.captured_so_far and effect.payment) or order_id is None:
            return None
        counted = self._counted(order_id, effect.payment, effect.amount.currency)
        total = effect.amount.minor
        if counted in (0, total):
            return None
        captures = [
            other.capture
            for other in read
            if effect.payment in other.moves and other.category == line.category
        ]
        explained = {total}
        if None not in captures:
            remaining = total
            for capture in reversed(captures):  # the latest captures are those not counted
                remaining -= capture or 0
                explained.add(remaining)
        if counted in explained and counted < total:
            return None
        return Mismatch(
            AMOUNT_DIFFERS,
            order_id,
            f"{line.line_id}: payment {effect.payment} counted {counted} "
            f"{effect.amount.currency}; the provider captured {total}",
        )

    def _bound_to(self, effect: Effect) -> str | None:
        """The order the effect's objects are bound to, if any (the first one bound)."""
        refs = tuple(dict.fromkeys((effect.external_ref, *effect.order_lookup)))
        found, _ = bound_orders(self._db, self._tables.ledger, effect.delivery.provider, refs)
        return next((found[ref] for ref in refs if ref in found), None)

    def _counted(self, order_id: str, payment: str, currency: str) -> int:
        """What the order's entries counted for the payment, its captures together."""
        return sum(
            int(e["amount"])
            for e in self._entries(order_id)
            if e.get("payment") == payment
            and e["transition"] == Transition.PAID.value
            and e["outcome"] in COUNTED_OUTCOMES
            and e.get("currency") == currency
        )

    def _record_fee(self, order_id: str, line: Line) -> int:
        """The line's fee and net onto its order, once: 1 if recorded now, 0 if before."""
        item = {
            tables.PARTITION_KEY: tables.order_pk(order_id),
            tables.SORT_KEY: tables.fee_sk(line.provider, line.line_id),
            "provider": line.provider,
            "line": line.line_id,
            "category": line.category,
            "moves": list(line.moves),
            "fee": line.fee,
            "net": line.net,
            "currency": line.settlement_currency,
            "line_created": line.created,
        }
        transaction = fee_record(
            self._tables.ledger,
            order_id,
            item,
            fee=line.fee,
            net=line.net,
            currency=line.settlement_currency,
        )
        for attempt in range(1, CONTENDED_TRIES + 1):
            refusal = commit(self._db, transaction)
            if refusal is None:
                return 1
            if not refusal.contended:
                return 0  # recorded before (or the order is gone): nothing to add
            if attempt == CONTENDED_TRIES:
                raise WriteContendedError(f"recording {line.line_id}'s fee")
        return 0

    # -- the match -----------------------------------------------------------------------

    def _check_entries(
        self,
        provider: str,
        read: list[Line],
        report: StatementReport,
        known: Callable[[Mapping[str, Any]], bool] | None,
        orders: Sequence[str] | None,
    ) -> None:
        """Every entry a delivery counted in the window names an object a line moved."""
        moved = {ref for line in read if line.moves_money for ref in line.moves}
        checked = self._orders_changed_since(report.since) if orders is None else iter(orders)

        def check(order_id: str) -> tuple[int, list[Mismatch]]:
            entries = [
                e
                for e in self._entries(order_id)
                if _checked(e, provider, report.since, report.until)
            ]
            unknown = [
                Mismatch(
                    ENTRY_UNKNOWN,
                    order_id,
                    f"{entry['transition']} {ref} {entry['amount']} {entry['currency']} (event "
                    f"{entry.get('event_id')}): no line of {provider}'s statement moved it",
                )
                for entry, ref in ((e, _moved_ref(e)) for e in entries)
                if ref not in moved and not (known is not None and known(entry))
            ]
            return len(entries), unknown

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

    def _orders_changed_since(self, since: int) -> Iterator[str]:
        """Every order changed from `since` on (the `changed` index, hour by hour)."""
        hour = datetime.fromtimestamp(since, tz=UTC).replace(minute=0, second=0, microsecond=0)
        now = datetime.fromtimestamp(self._clock(), tz=UTC)
        seen: set[str] = set()
        while hour <= now:
            for bucket in tables.changes_buckets(hour.isoformat()):
                pages = self._db.get_paginator("query").paginate(
                    **queries.changed(self._tables.ledger, bucket)
                )
                for page in pages:
                    for key in page["Items"]:
                        order_id = str(key[tables.PARTITION_KEY]["S"]).removeprefix("ORDER#")
                        if order_id not in seen:
                            seen.add(order_id)
                            yield order_id
            hour += timedelta(hours=1)

    def _entries(self, order_id: str) -> list[dict[str, Any]]:
        pages = self._db.get_paginator("query").paginate(
            **queries.entries(self._tables.ledger, order_id), ConsistentRead=True
        )
        return [from_attributes(item) for page in pages for item in page["Items"]]


def _moved_ref(entry: Mapping[str, Any]) -> str:
    """The provider object a line must name for the entry: its payment's (a payment's entry),
    else its own (a refund, a dispute's withdrawal)."""
    if entry["transition"] != Transition.PAID.value:
        return str(entry["external_ref"])
    return str(entry.get("payment") or entry["external_ref"])


def _by_payment(read: list[Line]) -> list[list[Line]]:
    """The lines, a list per payment they move (in their order), in the order of each one's
    first line."""
    shares: dict[str, list[Line]] = {}
    for line in read:
        payment = next((e.payment for e in line.effects if e.payment), line.net_of)
        shares.setdefault(payment or line.line_id, []).append(line)
    return list(shares.values())


def _checked(entry: dict[str, Any], provider: str, since: int, until: int) -> bool:
    return (
        entry.get("provider") == provider
        and entry.get("via") != VIA_STATEMENT
        and entry["outcome"] in COUNTED_OUTCOMES
        and entry["transition"] in {t.value for t in MOVING}
        and since <= int(entry.get("event_created", 0)) < until
    )


def _iso(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")
