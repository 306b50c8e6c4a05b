"""API Gateway -> ingest Lambda. Thin: builds the request, delegates, answers in JSON.

The event is a REST API's (payload 1.0) or an HTTP API's (payload 2.0): `apiType` in the stack;
the answer's shape is the same for both.

Configuration (set by the stack): WEBHOOK_QUEUE_URL, and PROVIDER_SECRETS, a JSON object
mapping each enabled provider to the name or ARN of its secret in Secrets Manager.
"""

from __future__ import annotations

import json
import time
from functools import cache
from typing import Any, Final

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.asaas.signature import AsaasVerifier
from functions.ingest.adapters import SecretsManagerStore, SqsQueue
from functions.ingest.environment import IngestSettings
from functions.ingest.request import from_proxy_event, provider_of, source_ip
from functions.ingest.service import VERIFIERS, Ignored, WebhookIngest
from functions.shared.observability import powertools, with_request_id
from functions.shared.rejections import RejectedError, UnauthenticatedError, UnavailableError

logger, tracer, metrics = powertools("ingest")
SECRET_CACHE_SECONDS = 300
# Every authentication failure gets this one answer: which check failed (a bad signature, a
# stale or future timestamp, a body naming another resource than the signed one) would tell
# a replayer whether the signature they hold is good. The reason is in the log and the metric.
UNAUTHENTICATED: Final = {"error": "unauthenticated"}


@cache
def webhook_ingest() -> WebhookIngest:
    settings = IngestSettings.from_env()
    secret_names = settings.provider_secrets
    fetch = SecretsProvider(boto3_client=boto3.client("secretsmanager")).get
    verifiers = dict(VERIFIERS)
    if settings.asaas_source_ips:
        verifiers["asaas"] = AsaasVerifier(settings.asaas_source_ips)
    return WebhookIngest(
        verifiers={p: v for p, v in verifiers.items() if p in secret_names},
        secrets=SecretsManagerStore(
            secret_names, lambda name: fetch(name, max_age=SECRET_CACHE_SECONDS)
        ),
        queue=SqsQueue(boto3.client("sqs"), settings.webhook_queue_url),
        clock=time.time,
        mode=settings.payment_mode,
    )


def respond(event: dict[str, Any], ingest: WebhookIngest) -> dict[str, Any]:
    context = {"provider": provider_of(event), "source_ip": source_ip(event)}
    try:
        accepted = ingest.accept(from_proxy_event(event))
    except RejectedError as exc:
        _count_refusal("rejected", exc.reason)
        logger.warning(str(exc), extra={**context, "reason": exc.reason, "status": exc.status})
        if isinstance(exc, UnauthenticatedError):
            return _json(exc.status, UNAUTHENTICATED)
        return _json(exc.status, {"error": exc.reason, "message": str(exc)})
    except UnavailableError as exc:
        _count_refusal("unavailable", exc.reason)
        logger.exception("could not take the request", extra={**context, "reason": exc.reason})
        return _json(exc.status, {"error": exc.reason, "message": str(exc)})
    if isinstance(accepted, Ignored):
        _count_refusal("ignored", accepted.reason)
        logger.warning(
            accepted.message,
            extra={
                **context,
                "reason": accepted.reason,
                "event_id": accepted.envelope.event_id,
                "event_type": accepted.envelope.event_type,
            },
        )
        return _json(
            200,
            {"received": True, "event_id": accepted.envelope.event_id, "ignored": accepted.reason},
        )
    metrics.add_metric(name="accepted", unit=MetricUnit.Count, value=1)
    logger.info(
        "enqueued",
        extra={
            **context,
            "event_id": accepted.envelope.event_id,
            "event_type": accepted.envelope.event_type,
            "message_id": accepted.message_id,
        },
    )
    return _json(200, {"received": True, "event_id": accepted.envelope.event_id})


def _count_refusal(name: str, reason: str) -> None:
    """The total, for alarms, and one metric per reason (`rejected_bad_signature`,
    `ignored_test_mode`, ...)."""
    metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
    metrics.add_metric(name=f"{name}_{reason}", unit=MetricUnit.Count, value=1)


def _json(status: int, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Content-Type": "application/json"}
    if status == 405:
        headers["Allow"] = "POST"
    return {"statusCode": status, "headers": headers, "body": json.dumps(body)}


@with_request_id(logger)
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return respond(event, webhook_ingest())
