"""Scheduled reconciliation: proves the books balance and nothing is stuck; alarms if not.

One function, three steps of one run, named by the event's `step` (functions/reconcile/units.py):
the state machine invokes `plan` once, `check` per unit (again while the unit says it is not
done), then `finish` with every unit's totals. Each `check` logs the mismatches it found; the
finish step publishes the run's metrics, so a run that did not finish publishes none
(`ReconciliationStopped`) and its execution fails (`ReconciliationRunFailed`).
"""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.reconcile.report import Report
from functions.reconcile.service import Reconciler
from functions.reconcile.units import (
    CHECK,
    FINISH,
    PLAN,
    SETTLE_SECONDS,
    RunPlan,
    Unit,
    UnitTotals,
)
from functions.shared.books import Mismatch
from functions.shared.environment import ReconcileSettings
from functions.shared.errors import MalformedEventError
from functions.shared.observability import powertools, with_request_id

logger, tracer, metrics = powertools("reconciliation")
MISMATCH_KINDS = (
    "unbalanced_total",
    "missing_outbox_item",
    "unexpected_outbox_item",
    "stuck_outbox_item",
    "dead_outbox_item",
    "email_owed_outbox_item",
    "unmatched_payment",
    "unreadable_order",
)


@cache
def reconciler() -> Reconciler:
    settings = ReconcileSettings.from_env()
    settle = settings.reconcile_settle_seconds
    return Reconciler(
        boto3.client("dynamodb"),
        settings.tables,
        time.time,
        sleep=time.sleep,
        retention_seconds=settings.retention_seconds,
        settle_seconds=SETTLE_SECONDS if settle is None else settle,
    )


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    step = event.get("step")
    if step == PLAN:
        return plan()
    if step == CHECK:
        return check(event)
    if step == FINISH:
        return finish(event)
    # A run is started by its state machine (or the embedded stack's stand-in), never by a
    # bare invocation: one Lambda alone is what could not keep up.
    raise MalformedEventError(
        f"reconciliation step {step!r}: expected {PLAN}, {CHECK} or {FINISH}; start a run "
        "with the state machine (docs/operations.md, ReconciliationRunFailed)"
    )


def plan() -> dict[str, Any]:
    planned = reconciler().plan()
    metrics.add_metric(name="reconciliation_units", unit=MetricUnit.Count, value=len(planned.units))
    logger.info(
        "reconciliation planned",
        extra={
            "units": len(planned.units),
            "orders_counted": planned.orders_counted,
            "checked_from": planned.checked_from,
            "checked_until": planned.checked_until,
            "caught_up": planned.caught_up,
        },
    )
    return planned.to_json()


def check(event: dict[str, Any]) -> dict[str, Any]:
    unit = Unit.from_json(event["unit"])
    report, rest = reconciler().check(unit)
    log_mismatches(report.mismatches)
    metrics.add_metric(name="orders_read", unit=MetricUnit.Count, value=report.orders_read)
    totals = UnitTotals.from_json(event.get("totals")).add(report.totals())
    return {
        "step": CHECK,
        "unit": (rest or unit.resumed_at(None)).to_json(),
        "totals": totals.to_json(),
        "done": rest is None,
    }


def finish(event: dict[str, Any]) -> dict[str, Any]:
    planned = RunPlan.from_run_json(event["run"])
    found = event["totals"]
    # The Map's `$[*].totals`: a list; kept working should a single unit's come unwrapped.
    units = [found] if isinstance(found, dict) else found
    report = reconciler().finish(planned, [UnitTotals.from_json(t) for t in units])
    log_mismatches(report.mismatches)
    publish(report)
    return {"orders_checked": report.orders_checked, "mismatches": report.by_kind}


def log_mismatches(mismatches: list[Mismatch]) -> None:
    for mismatch in mismatches:
        logger.error(
            "books mismatch",
            extra={"kind": mismatch.kind, "order_id": mismatch.order_id, "detail": mismatch.detail},
        )


def publish(report: Report) -> None:
    by_kind = report.by_kind
    # Zero is published too: the alarm then tells "no mismatches" from "did not run".
    metrics.add_metric(
        name="reconciliation_mismatches", unit=MetricUnit.Count, value=sum(by_kind.values())
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
        metrics.add_metric(
            name=f"mismatches_{kind}", unit=MetricUnit.Count, value=by_kind.get(kind, 0)
        )
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
            "orders_read": report.orders_read,
            "mismatches": by_kind,
            "cleared_on_recheck": report.cleared_on_recheck,
            "checked_from": report.checked_from,
            "checked_until": report.checked_until,
            "caught_up": report.caught_up,
        },
    )
