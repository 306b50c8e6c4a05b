"""Booking a line of the statement: read as the delivery announcing its movement is read, it
goes through the same processor. What a delivery already booked is a duplicate, what none
brought is applied now, announced once, and marked as found by the statement; a capture the
ledger's count cannot explain, or an amount that differs, is reported, not booked over. Each
booked line's fee and net are recorded once on its order (`fee_total`, `net_total`, in the
account's settlement currency): a merchant reads what the provider actually paid out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final

from functions.process.service import EffectProcessor, Processed
from functions.shared import tables
from functions.shared.bindings import bound_orders
from functions.shared.books import Mismatch
from functions.shared.domain import COUNTED_OUTCOMES, Effect, Outcome, Transition
from functions.shared.errors import OrderNotYetKnownError, WriteContendedError
from functions.statement.lines import Line
from functions.statement.report import AMOUNT_DIFFERS, MOVEMENT_MISSING, StatementReport
from functions.store.fees import fee_record
from functions.store.reads import order_entries
from functions.store.transaction import commit

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# Tries of a write another one contended (the same order written meanwhile) before it fails.
CONTENDED_TRIES: Final = 5


class LineBooking:
    def __init__(
        self, dynamodb: DynamoDBClient, table_names: tables.TableNames, processor: EffectProcessor
    ) -> None:
        self._db = dynamodb
        self._tables = table_names
        self._processor = processor

    def book_line(self, line: Line, read: list[Line], report: StatementReport) -> None:
        """The line booked (each of its effects), its fee recorded, or why not reported."""
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
            for e in order_entries(self._db, self._tables.ledger, order_id)
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
