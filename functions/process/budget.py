"""A batch's time budget: a record starts only while its worst case still fits in the time
the invocation has left, so a slow provider API never makes the whole batch time out."""

from __future__ import annotations

from collections.abc import Callable

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from functions.process.reporting import logger, metrics
from functions.process.service import Processed
from functions.process.wiring import RECORD_RESERVE_MS
from functions.shared.errors import RetryableError


class BatchCutShortError(RetryableError):
    """Not started: too little Lambda time left. SQS redelivers it after the visibility timeout."""


def within_budget(
    handle: Callable[[SQSRecord], list[Processed]], remaining_ms: Callable[[], int]
) -> Callable[[SQSRecord], list[Processed]]:
    """Records start only while a whole record's worst case still fits in the time left; the
    rest fail unstarted (partial batch response) and come back from SQS."""

    def handle_within_budget(record: SQSRecord) -> list[Processed]:
        left = remaining_ms()
        if left < RECORD_RESERVE_MS:
            metrics.add_metric(name="batch_cut_short", unit=MetricUnit.Count, value=1)
            logger.warning(
                "too little time left; handed back unstarted",
                extra={"message_id": record.message_id, "remaining_ms": left},
            )
            raise BatchCutShortError(f"{left} ms left, {RECORD_RESERVE_MS} needed")
        return handle(record)

    return handle_within_budget
