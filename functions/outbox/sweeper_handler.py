"""Scheduled sweeper: first parks the new items whose stream records were given up on (from the
on-failure queue, `stranded_*`), then re-drives due outbox items; dead ones are counted for
the alarm (`sweep_dead`), and items it could not handle are logged with their traceback and
counted (`sweep_error`)."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.outbox.budget import DYNAMODB_CLIENT_CONFIG, has_time_for_an_item
from functions.outbox.sender import SendResult
from functions.outbox.stranded import ALREADY_HANDLED, PARKED, UNREADABLE, StrandedItems
from functions.outbox.sweeper import SWEEP_CUT_SHORT, SWEEP_ERROR, Sweeper
from functions.outbox.wiring import sender_from_env, sink_gone_reporter, sweep_grace_seconds
from functions.shared.environment import SweeperSettings
from functions.shared.observability import powertools, with_request_id

logger, tracer, metrics = powertools("sweeper")


@cache
def sweeper() -> Sweeper:
    return Sweeper(
        boto3.client("dynamodb", config=DYNAMODB_CLIENT_CONFIG),
        SweeperSettings.from_env().outbox_table,
        sender_from_env(sink_gone_reporter(logger, metrics)),
        time.time,
        grace_seconds=sweep_grace_seconds(),
        on_error=_log_item_error,
    )


@cache
def stranded_items() -> StrandedItems | None:
    queue_url = SweeperSettings.from_env().outbox_failures_queue_url
    if not queue_url:
        return None
    return StrandedItems(
        boto3.client("sqs"),
        boto3.client("dynamodbstreams"),
        queue_url,
        sender_from_env(sink_gone_reporter(logger, metrics)),
    )


def _park_stranded() -> None:
    stranded = stranded_items()
    if stranded is None:
        return
    parked = stranded.park_all()
    for name in (PARKED, ALREADY_HANDLED, UNREADABLE):
        metrics.add_metric(name=f"stranded_{name}", unit=MetricUnit.Count, value=parked[name])
    if parked[UNREADABLE]:
        logger.error(
            "stream failures whose records could not be read back stay on the queue",
            extra={"stranded": dict(parked)},
        )


def _log_item_error(outbox_id: str, error: Exception) -> None:
    logger.exception(
        "outbox item failed in the sweep; its lease re-drives it",
        extra={"outbox_id": outbox_id, "error": repr(error)},
    )


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    try:
        _park_stranded()
    except Exception:  # the sweep goes on; the messages stay on the (alarmed) queue
        metrics.add_metric(name="stranded_error", unit=MetricUnit.Count, value=1)
        logger.exception("could not park the items of the stream's on-failure queue")
    results = sweeper().sweep(
        has_time=lambda: has_time_for_an_item(context.get_remaining_time_in_millis)
    )
    for name in [*(result.value for result in SendResult), SWEEP_ERROR, SWEEP_CUT_SHORT]:
        metrics.add_metric(name=f"sweep_{name}", unit=MetricUnit.Count, value=results[name])
    if results[SendResult.DEAD.value] or results[SWEEP_ERROR]:
        logger.error("outbox items died or failed", extra={"results": dict(results)})
    else:
        logger.info("sweep done", extra={"results": dict(results)})
    return dict(results)
