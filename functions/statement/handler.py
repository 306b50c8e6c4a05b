"""The scheduled statement pass: EventBridge -> this function, once per provider
(`{"provider": "stripe"}`), hourly for Stripe and Mercado Pago, daily for Asaas. Thin: reads
the event, runs the provider's windows from its checkpoint (functions/statement/schedule.py),
logs and counts what they found. An event that names a window (`"since"`, `"until"`: epoch
seconds) reads that one again, checkpoint untouched.

Metrics (published by every run of a configured provider, zeros included, so that "nothing
found" is told from "did not run"): `statement_booked` (movements no delivery had brought),
`statement_mismatches` and one per kind (the `StatementMismatches` alarm), `statement_lag_seconds`
(how far the checkpoint is behind where its cadence lets a caught-up one be: the settle lag
ago, or the last settled day's end; the `StatementBehind` alarm), `statement_interrupted`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.process.mercadopago_disputes import LedgerDisputes
from functions.process.service import EffectProcessor
from functions.shared.environment import StatementSettings
from functions.shared.errors import MalformedEventError
from functions.shared.observability import powertools, with_request_id
from functions.statement.report import MISMATCH_KINDS
from functions.statement.schedule import (
    BOOKING_WORKERS,
    ScheduledRun,
    StatementSchedule,
)
from functions.statement.service import StatementPass
from functions.statement.sources import DEFAULT_API_URLS, PROVIDERS, StatementSource

logger, tracer, metrics = powertools("statement")
SECRET_CACHE_SECONDS = 300


@cache
def statement_schedule() -> StatementSchedule:
    return statement_schedule_with(EffectProcessor)


def statement_schedule_with(processor_class: type[EffectProcessor]) -> StatementSchedule:
    settings = StatementSettings.from_env()
    dynamodb = boto3.client("dynamodb")
    # The lines are read already: the processor books them and interprets nothing itself.
    processor = processor_class(
        dynamodb, settings.tables, time.time, retention_seconds=settings.retention_seconds
    )
    workers = settings.statement_booking_workers or BOOKING_WORKERS
    passing = StatementPass(dynamodb, settings.tables, processor, time.time, workers)
    return StatementSchedule(
        dynamodb,
        settings.tables,
        passing,
        time.time,
        settings.statement_settle_seconds,
        settings.statement_window_seconds,
    )


@cache
def statement_source(provider: str) -> StatementSource:
    settings = StatementSettings.from_env()
    secret_name, api_url = settings.api_of(provider)
    return StatementSource(
        provider,
        _secret(secret_name),
        api_url or DEFAULT_API_URLS[provider],
        time.sleep,
        LedgerDisputes(boto3.client("dynamodb"), settings.ledger_table),
    )


def _secret(name: str | None) -> Callable[[], str]:
    """The credential, read when first needed (an unnamed one reads as none: not configured)."""
    if name is None:
        return lambda: ""
    secrets = SecretsProvider(boto3_client=boto3.client("secretsmanager"))
    return lambda: str(secrets.get(name, max_age=SECRET_CACHE_SECONDS))


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    provider, window = requested(event)
    source = statement_source(provider)
    if window is not None:
        run = statement_schedule().run_window(source, *window)
    else:
        run = statement_schedule().run(source, context.get_remaining_time_in_millis)
    publish(run)
    return {
        "provider": provider,
        "checked_until": run.checked_until,
        "caught_up": run.caught_up,
        "booked": run.booked,
        "mismatches": run.mismatches,
        "stopped": run.stopped,
        "not_configured": run.not_configured,
        "passes": [report.to_json() for report in run.passes],
    }


def requested(event: dict[str, Any]) -> tuple[str, tuple[int, int] | None]:
    """The provider the event names, and the window an operator names (None: the schedule's,
    from the checkpoint)."""
    provider = event.get("provider")
    if not isinstance(provider, str) or provider not in PROVIDERS:
        raise MalformedEventError(
            f"statement pass for provider {provider!r}: expected one of {', '.join(PROVIDERS)}"
        )
    if "since" not in event and "until" not in event:
        return provider, None
    try:
        since, until = int(event["since"]), int(event["until"])
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedEventError(
            f"a statement window needs `since` and `until` in epoch seconds: {exc}"
        ) from exc
    if until <= since:
        raise MalformedEventError(f"statement window [{since}, {until}) is empty")
    return provider, (since, until)


def publish(run: ScheduledRun) -> None:
    if run.not_configured is not None:
        # A provider the deployment does not use: nothing to read, nothing to alarm on.
        logger.info(
            "statement not read: no credential",
            extra={"provider": run.provider, "reason": run.not_configured},
        )
        return
    for report in run.passes:
        for mismatch in report.mismatches:
            logger.error(
                "statement mismatch",
                extra={
                    "provider": run.provider,
                    "kind": mismatch.kind,
                    "order_id": mismatch.order_id,
                    "detail": mismatch.detail,
                },
            )
        logger.info("statement window read", extra=report.to_json())
    metrics.add_metric(name="statement_windows", unit=MetricUnit.Count, value=len(run.passes))
    metrics.add_metric(name="statement_lines_read", unit=MetricUnit.Count, value=run.lines_read)
    metrics.add_metric(name="statement_booked", unit=MetricUnit.Count, value=run.booked)
    metrics.add_metric(name="statement_mismatches", unit=MetricUnit.Count, value=run.mismatches)
    for kind in MISMATCH_KINDS:
        metrics.add_metric(name=f"statement_{kind}", unit=MetricUnit.Count, value=run.count(kind))
    metrics.add_metric(
        name="statement_interrupted", unit=MetricUnit.Count, value=int(run.interrupted)
    )
    if run.behind_seconds is not None:
        metrics.add_metric(
            name="statement_lag_seconds", unit=MetricUnit.Seconds, value=run.behind_seconds
        )
    if run.stopped is not None:
        logger.warning(
            "statement run stopped before catching up",
            extra={"provider": run.provider, "reason": run.stopped},
        )
