"""Reconciliation's memory and time as the tables grow: 10^4 and 10^5 orders on the local server.

Run with `make bench-reconcile` (a few minutes: seeding 10^5 orders is most of it). For each
size: seed N old orders (order, entry, sent notification: what the process function and the
sender leave behind), checkpoint the reconciliation an hour ago (its last hourly run), then
apply 300 fresh payments through the real process code, and measure

- the incremental run (what the hourly Lambda does): its Python heap peak (tracemalloc) and
  time. It reads only the changed orders, so both should stay flat as N grows;
- with `--audit`, the full audit (the fire drill's, or by hand): time grows with N (a scan of
  each table, and one read per 100 of the orders' outbox items), the heap peak should not.
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from devstack.local_aws import LocalAws
from devstack.resources import client
from fixtures import stripe
from functions.process.service import EffectProcessor
from functions.reconcile.checkpoint import CHECKPOINT_PK, CHECKPOINT_SK
from functions.reconcile.report import Report
from functions.reconcile.service import Reconciler
from functions.reconcile.stamps import iso
from functions.shared import tables
from functions.shared.dynamo import to_attributes
from functions.shared.outbox import outbox_id_for

FRESH_CHANGES = 300
DAY = 86_400
NAMES = tables.TableNames("bench-ledger", "bench-outbox")


@dataclass(frozen=True)
class Measured:
    orders: int
    mode: str
    seconds: float
    peak_mib: float
    report: Report


def seed_old_orders(dynamodb: Any, count: int, at: float) -> None:
    """Orders, their entries and their sent notifications, written in batches of 25."""
    stamp = iso(at)

    def items() -> Iterator[tuple[str, dict[str, object]]]:
        for n in range(count):
            order_id = f"ord_old{n:07d}"
            key = f"stripe:pi_old{n:07d}:paid"
            yield (
                NAMES.ledger,
                {
                    tables.PARTITION_KEY: tables.order_pk(order_id),
                    tables.SORT_KEY: tables.ORDER_SORT,
                    "order_id": order_id,
                    "paid_total": 1000,
                    "effect_count": 1,
                    "currency": "BRL",
                    "lifecycle_status": "paid",
                    "updated_at": stamp,
                    tables.CHANGES_BUCKET: tables.changes_bucket(order_id, stamp),
                },
            )
            yield (
                NAMES.ledger,
                {
                    tables.PARTITION_KEY: tables.order_pk(order_id),
                    tables.SORT_KEY: tables.effect_sk(key),
                    "effect_key": key,
                    "order_id": order_id,
                    "outcome": "applied",
                    "transition": "paid",
                    "amount": 1000,
                    "currency": "BRL",
                    "recorded_at": stamp,
                },
            )
            yield (
                NAMES.outbox,
                {
                    tables.OUTBOX_KEY: outbox_id_for(key),
                    "effect_key": key,
                    "order_id": order_id,
                    "status": "sent",
                    "created_at": stamp,
                },
            )

    batch: list[tuple[str, dict[str, object]]] = []
    for item in items():
        batch.append(item)
        if len(batch) == 25:
            _write(dynamodb, batch)
            batch = []
    if batch:
        _write(dynamodb, batch)


def _write(dynamodb: Any, batch: list[tuple[str, dict[str, object]]]) -> None:
    requests: dict[str, list[Any]] = {}
    for table, item in batch:
        requests.setdefault(table, []).append({"PutRequest": {"Item": to_attributes(item)}})
    while requests:
        requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}


def measure(orders: int, mode: str, run: Callable[[], Report]) -> Measured:
    tracemalloc.start()
    started = time.perf_counter()
    report = run()
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    if report.mismatches:
        raise SystemExit(f"{mode} at {orders} orders found mismatches: {report.mismatches[:3]}")
    return Measured(orders, mode, seconds, peak, report)


def one_size(orders: int, audit: bool) -> list[Measured]:
    aws = LocalAws().start()
    try:
        dynamodb = client("dynamodb", aws.endpoint_url)
        for request in tables.create_table_requests(NAMES):
            dynamodb.create_table(**request)
        now = time.time()
        seeding = time.perf_counter()
        seed_old_orders(dynamodb, orders, now - 2 * DAY)
        print(f"  seeded {orders:,} orders in {time.perf_counter() - seeding:.0f} s", flush=True)
        dynamodb.put_item(
            TableName=NAMES.ledger,
            Item=to_attributes(
                {
                    tables.PARTITION_KEY: CHECKPOINT_PK,
                    tables.SORT_KEY: CHECKPOINT_SK,
                    "checked_until": iso(now - 3600),  # the last hourly run
                }
            ),
        )
        processor = EffectProcessor(dynamodb, NAMES, lambda: now - 600)
        fresh_keys = [
            str(processed.effect_key)
            for n in range(FRESH_CHANGES)
            for processed in processor.process(
                "stripe",
                stripe.payment_intent_succeeded(f"ord_new{n:05d}", f"pi_new{n:05d}", 700, 1),
            )
        ]
        # The fresh payments' notifications are sent, as the sender would have by now.
        for key in fresh_keys:
            dynamodb.update_item(
                TableName=NAMES.outbox,
                Key=to_attributes({tables.OUTBOX_KEY: outbox_id_for(key)}),
                UpdateExpression="SET #s = :sent REMOVE #b",
                ExpressionAttributeNames={"#s": "status", "#b": tables.OUTBOX_DUE_BUCKET},
                ExpressionAttributeValues={":sent": {"S": "sent"}},
            )
        reconciler = Reconciler(dynamodb, NAMES, time.time)
        measured = [measure(orders, "incremental run", reconciler.run)]
        if audit:
            measured.append(measure(orders, "full audit", reconciler.audit))
        return measured
    finally:
        aws.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", default="10000,100000", help="comma-separated sizes")
    parser.add_argument("--audit", action="store_true", help="also time the full audit")
    args = parser.parse_args()
    sizes = [int(size) for size in args.orders.split(",")]
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    results = []
    for size in sizes:
        print(f"{size:,} orders:", flush=True)
        results += one_size(size, args.audit)
    print(f"\n{'orders':>9} {'mode':<16} {'orders read':>11} {'seconds':>8} {'heap peak MiB':>14}")
    for m in results:
        print(
            f"{m.orders:>9,} {m.mode:<16} {m.report.orders_checked:>11,} "
            f"{m.seconds:>8.1f} {m.peak_mib:>14.1f}"
        )


if __name__ == "__main__":
    main()
