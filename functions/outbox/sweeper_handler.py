"""Scheduled sweeper: re-drives due outbox items; dead ones are counted for the alarm
(`sweep_dead`), and items it could not handle are logged with their traceback and counted
(`sweep_error`)."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.outbox.sender import SendResult
from functions.outbox.sweeper import SWEEP_ERROR, Sweeper
from functions.outbox.wiring import sender_from_env, sweep_grace_seconds
from functions.shared.observability import powertools
from functions.shared.tables import TableNames

logger, tracer, metrics = powertools("sweeper")


@cache
def sweeper() -> Sweeper:
    return Sweeper(
        boto3.client("dynamodb"),
        TableNames.from_env().outbox,
        sender_from_env(),
        time.time,
        grace_seconds=sweep_grace_seconds(),
        on_error=_log_item_error,
    )


def _log_item_error(outbox_id: str, error: Exception) -> None:
    logger.exception(
        "outbox item failed in the sweep; its lease re-drives it",
        extra={"outbox_id": outbox_id, "error": repr(error)},
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    results = sweeper().sweep()
    for name in [*(result.value for result in SendResult), SWEEP_ERROR]:
        metrics.add_metric(name=f"sweep_{name}", unit=MetricUnit.Count, value=results[name])
    if results[SendResult.DEAD.value] or results[SWEEP_ERROR]:
        logger.error("outbox items died or failed", extra={"results": dict(results)})
    else:
        logger.info("sweep done", extra={"results": dict(results)})
    return dict(results)
