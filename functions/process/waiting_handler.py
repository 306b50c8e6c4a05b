"""Scheduled: re-drives waiting deliveries whose binding now exists; unmatched ones after the
limit. Publishes what waits, so an alarm fires when anything waits longer than an hour."""

from __future__ import annotations

import os
import time
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.process.waiting import WAIT_LIMIT_SECONDS, Waiting
from functions.shared.observability import powertools
from functions.shared.tables import TableNames

logger, tracer, metrics = powertools("waiting")


@cache
def waiting_room() -> Waiting:
    return Waiting(
        boto3.client("dynamodb"),
        boto3.client("sqs"),
        TableNames.from_env(),
        os.environ["WEBHOOK_QUEUE_URL"],
        time.time,
        int(os.environ.get("WAIT_LIMIT_SECONDS", WAIT_LIMIT_SECONDS)),
    )


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, int]:
    room = waiting_room()
    counts = room.redrive()
    counts["unmatched_open"] = sum(1 for _ in room.unmatched())
    for name, value in counts.items():
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=value)
    log = logger.warning if counts["unmatched"] or counts["waiting_over_an_hour"] else logger.info
    log("waiting deliveries checked", extra={"counts": dict(counts)})
    return dict(counts)
