"""DynamoDB Streams (outbox INSERTs) -> sender's first try. Thin: picks new items, delegates.

The event source mapping filters to new pending items; anything else is ignored safely here.
A send that failed and was backed off is a handled record: the item is pending in the due
index and the sweeper owns its schedule. Failing the record would only make the stream retry
within seconds (into the backoff, or past the outage's start). An error the sender did not
handle parks the item in the due index the same way; only when even that write fails does
the record fail, so the stream retries it (and, once it gives up, the sweeper parks it from
the on-failure queue). An item starts only while its worst case fits in the time left
(functions/outbox/budget.py): a timeout mid-item would send it again.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import (
    DynamoDBRecord,
    DynamoDBRecordEventName,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.outbox.budget import only_within_budget
from functions.outbox.sender import OutboxSender, SendResult
from functions.outbox.wiring import sender_from_env, sink_gone_reporter
from functions.shared.observability import powertools, with_request_id
from functions.shared.outbox import OutboxStatus

logger, tracer, metrics = powertools("outbox")


@cache
def outbox_sender() -> OutboxSender:
    return sender_from_env(sink_gone_reporter(logger, metrics))


def handle_record(record: DynamoDBRecord, sender: OutboxSender) -> SendResult | None:
    image = record.dynamodb.new_image if record.dynamodb else None
    is_new_pending_item = (
        record.event_name == DynamoDBRecordEventName.INSERT
        and image is not None
        and image.get("status") == OutboxStatus.PENDING.value
        and "outbox_id" in image
    )
    if not is_new_pending_item or image is None:
        # The mapping's filter should keep these out; counted so a bad filter shows.
        metrics.add_metric(name="outbox_record_ignored", unit=MetricUnit.Count, value=1)
        return None
    outbox_id = str(image["outbox_id"])
    try:
        sent = sender.first_try(outbox_id, str(image.get("order_id", "")))
    except Exception as exc:  # parked for the sweeper; if that fails too, the record fails
        if sender.park(outbox_id, f"first try: {exc!r}"):
            logger.exception(
                "first try failed; parked for the sweeper", extra={"outbox_id": outbox_id}
            )
            metrics.add_metric(name="outbox_parked", unit=MetricUnit.Count, value=1)
        return SendResult.RETRY_LATER
    metrics.add_metric(name=f"outbox_{sent.result.value}", unit=MetricUnit.Count, value=1)
    extra = {"outbox_id": sent.outbox_id, "result": sent.result.value, "attempts": sent.attempts}
    if sent.result is SendResult.DEAD:
        logger.error("outbox item is dead", extra={**extra, "error": sent.detail})
    elif sent.result is SendResult.RETRY_LATER:
        logger.warning("send failed; backed off", extra={**extra, "error": sent.detail})
    else:
        logger.info("outbox item handled", extra=extra)
    return sent.result


@tracer.capture_method
def record_handler(record: DynamoDBRecord) -> SendResult | None:
    return handle_record(record, outbox_sender())


def _handed_back(record: DynamoDBRecord, left_ms: int) -> None:
    metrics.add_metric(name="outbox_cut_short", unit=MetricUnit.Count, value=1)
    logger.warning(
        "too little time left for an item; handed back to the stream unstarted",
        extra={
            "sequence_number": record.dynamodb and record.dynamodb.sequence_number,
            "remaining_ms": left_ms,
        },
    )


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # One processor per invocation, so concurrent invocations never share batch state.
    batch = BatchProcessor(
        event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
    )
    # A record failed unstarted is retried by the stream from it (partial batch response).
    handle = only_within_budget(record_handler, context.get_remaining_time_in_millis, _handed_back)
    return dict(
        process_partial_response(
            event=event, record_handler=handle, processor=batch, context=context
        )
    )
