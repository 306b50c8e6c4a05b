"""What a statement pass found, and the kinds of mismatch it reports (never repaired silently):

- `movement_missing`: a line the statement could not book (its object unreadable, bound to no
  order, or bound to another);
- `amount_differs`: the ledger counted another amount for the movement than the provider moved
  (a mis-map) -- the line is not booked over it;
- `entry_unknown_to_provider`: an entry a delivery booked in the window that no line of the
  provider moved (a mis-map, or a forged delivery).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from functions.shared.books import Mismatch

MOVEMENT_MISSING: Final = "movement_missing"
AMOUNT_DIFFERS: Final = "amount_differs"
ENTRY_UNKNOWN: Final = "entry_unknown_to_provider"
MISMATCH_KINDS: Final = (MOVEMENT_MISSING, AMOUNT_DIFFERS, ENTRY_UNKNOWN)
# The report's counts, as its JSON tells them.
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
            "since": iso(self.since),
            "until": iso(self.until),
            **{name: getattr(self, name) for name in COUNTS},
            "mismatches": {kind: self.count(kind) for kind in MISMATCH_KINDS},
            "found": self.found,
            "details": [
                {"kind": m.kind, "order_id": m.order_id, "detail": m.detail}
                for m in self.mismatches
            ],
        }


def iso(seconds: int) -> str:
    """A time as the report tells it (and the pass's record keeps it): to the second, UTC."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")
