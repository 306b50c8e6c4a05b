"""The match of the ledger against the statement: every entry a delivery counted in the window
names an object a line moved; one no line moved is asked of the provider (`known`) before it
is reported unknown to the provider."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from functions.shared.books import Mismatch
from functions.shared.domain import COUNTED_OUTCOMES, VIA_STATEMENT, Transition
from functions.statement.lines import Line
from functions.statement.report import ENTRY_UNKNOWN

# The entries a line of the statement stands behind: a payment, a refund, a dispute's
# withdrawal. Reversals, inquiries and verdicts move what those did (or nothing) and are
# checked through them.
MOVING: Final = frozenset({Transition.PAID, Transition.REFUNDED, Transition.DISPUTED})


@dataclass(frozen=True)
class EntryMatch:
    """The window's entries of one provider against the objects its lines moved."""

    provider: str
    moved: frozenset[str]
    since: int
    until: int
    known: Callable[[Mapping[str, Any]], bool] | None = None

    @classmethod
    def of(
        cls,
        provider: str,
        read: Iterable[Line],
        since: int,
        until: int,
        known: Callable[[Mapping[str, Any]], bool] | None,
    ) -> EntryMatch:
        moved = frozenset(ref for line in read if line.moves_money for ref in line.moves)
        return cls(provider, moved, since, until, known)

    def check(
        self, order_id: str, order_entries: list[dict[str, Any]]
    ) -> tuple[int, list[Mismatch]]:
        """How many of the order's entries were checked, and those no line moved."""
        checked = [e for e in order_entries if _checked(e, self.provider, self.since, self.until)]
        unknown = [
            Mismatch(
                ENTRY_UNKNOWN,
                order_id,
                f"{entry['transition']} {ref} {entry['amount']} {entry['currency']} (event "
                f"{entry.get('event_id')}): no line of {self.provider}'s statement moved it",
            )
            for entry, ref in ((e, _moved_ref(e)) for e in checked)
            if ref not in self.moved and not (self.known is not None and self.known(entry))
        ]
        return len(checked), unknown


def _moved_ref(entry: Mapping[str, Any]) -> str:
    """The provider object a line must name for the entry: its payment's (a payment's entry),
    else its own (a refund, a dispute's withdrawal)."""
    if entry["transition"] != Transition.PAID.value:
        return str(entry["external_ref"])
    return str(entry.get("payment") or entry["external_ref"])


def _checked(entry: dict[str, Any], provider: str, since: int, until: int) -> bool:
    return (
        entry.get("provider") == provider
        and entry.get("via") != VIA_STATEMENT
        and entry["outcome"] in COUNTED_OUTCOMES
        and entry["transition"] in {t.value for t in MOVING}
        and since <= int(entry.get("event_created", 0)) < until
    )
