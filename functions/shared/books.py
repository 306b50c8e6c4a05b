"""The books: what the ledger must satisfy whatever arrived, in whatever order.

Pure functions over plain items, shared by the reconciliation job, the fire drill and tests.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from functions.shared.domain import COUNTED_OUTCOMES, TRANSITION_RULES, Total, Transition


@dataclass(frozen=True)
class Mismatch:
    kind: str
    order_id: str
    detail: str


def signed_sums(effects: Iterable[Mapping[str, Any]]) -> Counter[Total]:
    """Each total as the signed sum of the counted (applied or stale) entries."""
    sums: Counter[Total] = Counter({total: 0 for total in Total})
    for effect in effects:
        if effect["outcome"] in COUNTED_OUTCOMES:
            rule = TRANSITION_RULES[Transition(effect["transition"])]
            for total, sign in rule.postings:
                sums[total] += sign * int(effect["amount"])
    return sums


def unbalanced_totals(
    order: Mapping[str, Any], effects: Iterable[Mapping[str, Any]]
) -> list[Mismatch]:
    """Every total of the order equals the signed sum of its counted entries."""
    sums = signed_sums(effects)
    order_id = str(order.get("order_id", "?"))
    mismatches = []
    for total in Total:
        recorded = int(order.get(total.value, 0) or 0)
        if recorded != sums[total]:
            mismatches.append(
                Mismatch(
                    "unbalanced_total",
                    order_id,
                    f"{total.value}={recorded}, its entries sum {sums[total]}",
                )
            )
    return mismatches


def unmatched_outbox(
    effects: Iterable[Mapping[str, Any]], outbox_items: Iterable[Mapping[str, Any]]
) -> list[Mismatch]:
    """Every counted entry (applied or stale: late ones are announced too) has exactly one
    outbox item, and every item has its counted entry."""
    counted = {e["effect_key"]: e for e in effects if e["outcome"] in COUNTED_OUTCOMES}
    items = list(outbox_items)
    per_key = Counter(item["effect_key"] for item in items)
    mismatches = [
        Mismatch("missing_outbox_item", str(effect["order_id"]), f"effect {key} has no outbox item")
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
