"""The books: what the ledger must satisfy whatever arrived, in whatever order.

Pure functions over plain items, shared by the reconciliation job, the fire drill and tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from functions.shared.domain import TRANSITION_RULES, Outcome

COUNTED_OUTCOMES = frozenset({Outcome.APPLIED.value, Outcome.STALE.value})


@dataclass(frozen=True)
class Mismatch:
    kind: str
    order_id: str
    detail: str


def unbalanced_totals(
    order: Mapping[str, Any], effects: Iterable[Mapping[str, Any]]
) -> list[Mismatch]:
    """Per transition, the amounts of applied and stale effects must equal the order's total."""
    sums: Counter[str] = Counter()
    for effect in effects:
        if effect["outcome"] in COUNTED_OUTCOMES:
            sums[effect["transition"]] += int(effect["amount"])
    order_id = str(order.get("order_id", "?"))
    mismatches = []
    for transition, rule in TRANSITION_RULES.items():
        recorded = int(order.get(rule.total_attribute, 0))
        expected = sums[transition.value]
        if recorded != expected:
            mismatches.append(
                Mismatch(
                    "unbalanced_total",
                    order_id,
                    f"{rule.total_attribute}={recorded}, {transition.value} effects sum {expected}",
                )
            )
    return mismatches


def unmatched_outbox(
    effects: Iterable[Mapping[str, Any]], outbox_items: Iterable[Mapping[str, Any]]
) -> list[Mismatch]:
    """Every applied effect has exactly one outbox item, and every item has its applied effect."""
    applied = {e["effect_key"]: e for e in effects if e["outcome"] == Outcome.APPLIED.value}
    items = list(outbox_items)
    per_key = Counter(item["effect_key"] for item in items)
    mismatches = [
        Mismatch("missing_outbox_item", str(effect["order_id"]), f"effect {key} has no outbox item")
        for key, effect in applied.items()
        if per_key[key] == 0
    ]
    mismatches += [
        Mismatch(
            "unexpected_outbox_item",
            str(item["order_id"]),
            f"{per_key[item['effect_key']]} outbox item(s) for effect {item['effect_key']}, "
            f"which is {'applied' if item['effect_key'] in applied else 'not applied'}",
        )
        for item in items
        if per_key[item["effect_key"]] > 1 or item["effect_key"] not in applied
    ]
    return mismatches
