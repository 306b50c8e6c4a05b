"""What a reconciliation found: the report of a run, of one unit's invocation or of an audit."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from functions.reconcile.units import UnitTotals
from functions.shared import books


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
