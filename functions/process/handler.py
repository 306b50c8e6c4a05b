"""SQS -> process Lambda. Thin: reads the message (functions/process/messages.py), lets the
effect processor apply it, decides what becomes of a record that raised
(functions/process/disposition.py), logs and counts (functions/process/reporting.py), starts
a record only within the batch's time budget (functions/process/budget.py). Its parts are
built in functions/process/wiring.py."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.process import messages, reporting, wiring
from functions.process.budget import within_budget
from functions.process.disposition import Disposition, disposition
from functions.process.reporting import logger as logger
from functions.process.reporting import metrics as metrics
from functions.process.reporting import tracer
from functions.process.service import EffectProcessor, Processed
from functions.process.waiting import Waiting
from functions.shared.domain import Outcome
from functions.shared.environment import ProcessSettings
from functions.shared.errors import OrderNotYetKnownError
from functions.shared.observability import with_request_id


def handle_message(
    record: SQSRecord, processor: EffectProcessor, waiting: Waiting | None = None
) -> list[Processed]:
    with reporting.record_keys(record):
        try:
            message = messages.message_of(record)
            if messages.of_the_other_mode(record, ProcessSettings.from_env().payment_mode):
                reporting.count(Outcome.IGNORED)
                logger.info(
                    "event of the other payment mode: ignored",
                    extra=reporting.said(Outcome.IGNORED, event_id=message.event_id),
                )
                return []
            results = processor.process(message.provider, message.body)
            if waiting is not None:
                # Inside: a watch that could not be written is retried (and logged) like the
                # rest of the record, whose entries are duplicates the second time.
                _keep_rechecking(record, results, waiting)
        except Exception as exc:
            park_after = wiring.park_after_receives() if waiting is not None else None
            decided = disposition(exc, messages.receives(record), park_after)
            reporting.count(decided.outcome)
            reporting.refusal(decided, exc)
            if decided is Disposition.PARK and isinstance(exc, OrderNotYetKnownError) and waiting:
                # Waiting is not failing: kept until its binding exists, never dead-lettered.
                waiting.park(messages.message_of(record), exc)
                return []
            if decided.is_failure:
                _remember_failure(record, exc)
            raise
        for entry in results:
            reporting.processed(entry)
        return results


def _remember_failure(record: SQSRecord, error: BaseException) -> None:
    """The reason a dead letter shows (functions/shared/failures.py). Best effort: the
    record's own failure is what SQS must see, whatever happens here."""
    try:
        wiring.failure_records().remember(
            record.message_id,
            messages.text(record, "event_id") or None,
            error,
            messages.receives(record),
        )
    except Exception:  # noqa: BLE001 - best effort, logged with its traceback
        logger.warning("could not record why the record failed", exc_info=True)


def _keep_rechecking(record: SQSRecord, results: list[Processed], waiting: Waiting) -> None:
    """Objects still unsettled are watched (the waiting function re-drives this delivery
    later); a re-check that found its object settled ends its watch."""
    unsettled = {p.recheck for p in results if p.recheck}
    if unsettled:
        waiting.watch(messages.message_of(record), unsettled)
        metrics.add_metric(name="rechecks_scheduled", unit=MetricUnit.Count, value=1)
    elif rechecked := messages.rechecked(record):
        waiting.unwatch(messages.provider_of(record), *rechecked)


@tracer.capture_method
def record_handler(record: SQSRecord) -> list[Processed]:
    return handle_message(record, wiring.effect_processor(), wiring.waiting_room())


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    # One processor per invocation, so concurrent invocations never share batch state. A fully
    # failed batch is reported item by item like any other, not raised.
    batch = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(
        process_partial_response(
            event=event,
            record_handler=within_budget(record_handler, context.get_remaining_time_in_millis),
            processor=batch,
            context=context,
        )
    )
