"""Scheduled reconciliation: proves the books balance and nothing is stuck; alarms if not."""

from __future__ import annotations

import time
from collections import Counter
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.reconcile.service import Reconciler
from functions.shared.environment import ReconcileSettings
from functions.shared.observability import powertools, with_request_id

logger, tracer, metrics = powertools("reconciliation")
MISMATCH_KINDS = (
    "unbalanced_total",
    "missing_outbox_item",
    "unexpected_outbox_item",
    "stuck_outbox_item",
    "dead_outbox_item",
    "unmatched_payment",
)


@cache
def reconciler() -> Reconciler:
    settings = ReconcileSettings.from_env()
    return Reconciler(
        boto3.client("dynamodb"),
        settings.tables,
        time.time,
        sleep=time.sleep,
        retention_seconds=settings.retention_seconds,
    )


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    report = reconciler().run()
    by_kind = Counter(m.kind for m in report.mismatches)
    for mismatch in report.mismatches:
        logger.error(
            "books mismatch",
            extra={"kind": mismatch.kind, "order_id": mismatch.order_id, "detail": mismatch.detail},
        )
    # Zero is published too: the alarm then tells "no mismatches" from "did not run".
    metrics.add_metric(
        name="reconciliation_mismatches", unit=MetricUnit.Count, value=len(report.mismatches)
    )
    metrics.add_metric(name="orders_checked", unit=MetricUnit.Count, value=report.orders_checked)
    # 1 when the run stopped at its cap: the books of the orders after it wait for a later run.
    metrics.add_metric(
        name="reconciliation_behind", unit=MetricUnit.Count, value=int(not report.caught_up)
    )
    metrics.add_metric(
        name="cleared_on_recheck", unit=MetricUnit.Count, value=report.cleared_on_recheck
    )
    for kind in MISMATCH_KINDS:
        metrics.add_metric(name=f"mismatches_{kind}", unit=MetricUnit.Count, value=by_kind[kind])
    if not report.checkpoint_saved:
        metrics.add_metric(name="checkpoint_overlapped", unit=MetricUnit.Count, value=1)
        logger.warning(
            "another run saved the checkpoint first; this run's is dropped",
            extra={"checked_until": report.checked_until},
        )
    logger.info(
        "reconciliation done",
        extra={
            "orders": report.orders_checked,
            "mismatches": dict(by_kind),
            "cleared_on_recheck": report.cleared_on_recheck,
            "checked_from": report.checked_from,
            "checked_until": report.checked_until,
        },
    )
    return {"orders_checked": report.orders_checked, "mismatches": dict(by_kind)}
