"""The books: what the ledger must satisfy whatever arrived, in whatever order.

Pure functions over the ledger's typed items (and the outbox's items as read), shared by the
reconciliation job, the fire drill and tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from functions.shared.domain import TRANSITION_RULES, Total, Transition
from functions.shared.items import Entry, Order


@dataclass(frozen=True)
class Mismatch:
    kind: str
    order_id: str
    detail: str


def signed_sums(effects: Iterable[Entry]) -> Counter[Total]:
    """Each total as the signed sum of the counted (applied or stale) entries."""
    sums: Counter[Total] = Counter({total: 0 for total in Total})
    for effect in effects:
        if effect.counted and effect.transition is not None:
            rule = TRANSITION_RULES[Transition(effect.transition)]
            for total, sign in rule.postings:
                sums[total] += sign * (effect.amount or 0)
    return sums


def unbalanced_totals(order: Order, effects: Iterable[Entry]) -> list[Mismatch]:
    """Every total of the order equals the signed sum of its counted entries."""
    sums = signed_sums(effects)
    mismatches = []
    for total in Total:
        recorded = order.total(total)
        if recorded != sums[total]:
            mismatches.append(
                Mismatch(
                    "unbalanced_total",
                    order.order_id,
                    f"{total.value}={recorded}, its entries sum {sums[total]}",
                )
            )
    return mismatches


def unmatched_outbox(
    effects: Iterable[Entry], outbox_items: Iterable[Mapping[str, Any]]
) -> list[Mismatch]:
    """Every counted entry (applied or stale: late ones are announced too) has exactly one
    outbox item, and every item has its counted entry."""
    counted = {e.effect_key: e for e in effects if e.counted}
    items = list(outbox_items)
    per_key = Counter(item["effect_key"] for item in items)
    mismatches = [
        Mismatch("missing_outbox_item", effect.order_id, f"effect {key} has no outbox item")
        for key, effect in counted.items()
        if per_key[key] == 0
    ]
    mismatches += [
        Mismatch(
            "unexpected_outbox_item",
            str(item["order_id"]),
            f"{per_key[item['effect_key']]} outbox item(s) for effect {item['effect_key']}, "
            f"which is {'counted' if item['effect_key'] in counted else 'not counted'}",
        )
        for item in items
        if per_key[item["effect_key"]] > 1 or item["effect_key"] not in counted
    ]
    return mismatches
