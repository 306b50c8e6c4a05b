"""Scheduled: re-drives waiting deliveries whose binding now exists; unmatched ones after the
limit. Publishes what waits, so an alarm fires when anything waits longer than an hour."""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.process.waiting import Waiting, waiting_from_env
from functions.shared.observability import powertools, with_request_id

logger, tracer, metrics = powertools("waiting")


@cache
def waiting_room() -> Waiting:
    return waiting_from_env()


@with_request_id(logger)
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
