"""The books, checked from the tables: DESIGN.md invariant 7 and "nothing lost".

- per order, the amounts of its applied and stale effects equal its recorded totals;
- every applied effect has exactly one outbox item, and no outbox item lacks its effect;
- no outbox item stays pending or sending past its deadline, and none is dead.
Full scans, hourly: fine for the tables this stack is sized for; see README for larger ones.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from functions.shared import books, tables
from functions.shared.dynamo import scan_items
from functions.shared.outbox import OutboxStatus

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


@dataclass
class Report:
    orders_checked: int = 0
    outbox_items_checked: int = 0
    mismatches: list[books.Mismatch] = field(default_factory=list)


class Reconciler:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        clock: Callable[[], float],
        pending_deadline_seconds: int = 3600,
    ) -> None:
        self._db = dynamodb
        self._tables = table_names
        self._clock = clock
        self._deadline = pending_deadline_seconds

    def run(self) -> Report:
        orders: dict[str, dict[str, Any]] = {}
        effects: dict[str, list[dict[str, Any]]] = defaultdict(list)
        unmatched: list[dict[str, Any]] = []
        for item in scan_items(self._db, self._tables.ledger):
            pk, sk = item[tables.PARTITION_KEY], item[tables.SORT_KEY]
            if pk == tables.UNMATCHED_PK:
                unmatched.append(item)
            elif sk == tables.ORDER_SORT:
                orders[pk] = item
            elif sk.startswith(tables.EFFECT_SORT_PREFIX):
                effects[pk].append(item)
        outbox = list(scan_items(self._db, self._tables.outbox))

        report = Report(orders_checked=len(orders), outbox_items_checked=len(outbox))
        for pk in orders.keys() | effects.keys():
            order = orders.get(pk, {"order_id": pk.removeprefix("ORDER#")})
            report.mismatches += books.unbalanced_totals(order, effects[pk])
        all_effects = [effect for group in effects.values() for effect in group]
        report.mismatches += books.unmatched_outbox(all_effects, outbox)
        report.mismatches += self._stuck(outbox)
        report.mismatches += [
            books.Mismatch(
                "unmatched_payment",
                "?",
                f"{item.get('provider')} {item.get('external_ref')} "
                f"{item.get('amount')} {item.get('currency')}: no order; "
                f"`umavez attach {item.get('provider')} {(item.get('objects') or ['?'])[0]} "
                "ORDER_ID`",
            )
            for item in unmatched
        ]
        return report

    def _stuck(self, outbox: list[dict[str, Any]]) -> list[books.Mismatch]:
        now = self._clock()
        stuck = []
        for item in outbox:
            status = item.get("status")
            age = now - datetime.fromisoformat(item["created_at"]).timestamp()
            if status == OutboxStatus.DEAD.value:
                stuck.append(
                    books.Mismatch(
                        "dead_outbox_item",
                        item["order_id"],
                        f"{item['outbox_id']} dead after {item.get('attempts')} attempts: "
                        f"{item.get('last_error', '')}",
                    )
                )
            elif status != OutboxStatus.SENT.value and age > self._deadline:
                stuck.append(
                    books.Mismatch(
                        "stuck_outbox_item",
                        item["order_id"],
                        f"{item['outbox_id']} {status} for {int(age)} s "
                        f"({item.get('attempts', 0)} attempts)",
                    )
                )
        return stuck
