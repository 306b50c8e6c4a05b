"""What the process Lambda logs and counts for each record: its keys on every line, one
metric per outcome, and one line per entry or per refusal, with the reason a dead letter needs."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from functions.process import messages
from functions.process.disposition import Disposition
from functions.process.service import Processed
from functions.shared.domain import Outcome
from functions.shared.money import InvalidFieldError
from functions.shared.observability import powertools

logger, tracer, metrics = powertools("process")


@contextmanager
def record_keys(record: SQSRecord) -> Iterator[None]:
    """Keys on every log line of this record. Per thread: the local stack runs several
    invocations in one process; in Lambda there is one thread and this is the same."""
    keys = {
        "message_id": record.message_id,
        "event_id": messages.text(record, "event_id") or None,
        "receive_count": record.attributes.approximate_receive_count,
    }
    logger.thread_safe_append_keys(**keys)
    try:
        yield
    finally:
        logger.thread_safe_remove_keys(list(keys))


def count(outcome: Outcome) -> None:
    metrics.add_metric(name=outcome.value, unit=MetricUnit.Count, value=1)


def said(outcome: Outcome, exc: BaseException | None = None, **more: Any) -> dict[str, Any]:
    reason = {"reason": str(exc) or type(exc).__name__} if exc is not None else {}
    return {"outcome": outcome.value, **reason, **more}


def refusal(decided: Disposition, exc: Exception) -> None:
    """The line of a record that raised, by what becomes of it."""
    if decided is Disposition.PARK:
        logger.warning("waiting for its order", extra=said(decided.outcome, exc))
    elif decided is Disposition.AWAIT_BINDING:
        logger.info("order not bound yet; SQS redelivers", extra=said(decided.outcome, exc))
    elif decided is Disposition.RETRY:
        logger.warning("will retry", extra=said(decided.outcome, exc), exc_info=True)
    else:
        # The reason, and the payload's field at fault when one is, on the failure's own line:
        # what the dead letter needs to be understood without the traceback.
        field = exc.field if isinstance(exc, InvalidFieldError) else None
        logger.exception(
            "failed; the record goes back to SQS and then its DLQ",
            extra=said(decided.outcome, exc, field=field),
        )


def processed(entry: Processed) -> None:
    """The line and the count of one entry the record applied, or found done."""
    count(entry.outcome)
    if entry.amount_disagrees:
        # Two event types named one payment with different amounts: the first counted.
        metrics.add_metric(name="amount_disagreements", unit=MetricUnit.Count, value=1)
    log = logger.warning if entry.amount_disagrees else logger.info
    log(
        entry.detail or entry.outcome.value,
        extra={
            "event_id": entry.delivery.event_id,
            "event_type": entry.delivery.event_type,
            "effect_key": entry.effect_key,
            "order_id": entry.order_id,
            "outcome": entry.outcome.value,
        },
    )
