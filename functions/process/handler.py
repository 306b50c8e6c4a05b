"""SQS -> process Lambda. Thin: reads the message contract, logs and counts, delegates.

Message contract (written by ingest): the body is the provider's raw payload text, unchanged;
the `provider` message attribute names the provider; `event_id` and `event_type` attributes
are informative only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import cache
from typing import Any

import boto3
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.parameters import SecretsProvider
from aws_lambda_powertools.utilities.typing import LambdaContext

from functions.process.asaas_api import BASE_URL as ASAAS_BASE_URL
from functions.process.asaas_api import AsaasApi, AsaasApiNotConfiguredError
from functions.process.asaas_cash import LedgerCash
from functions.process.eventbridge import stripe_event_of
from functions.process.mercadopago_api import BASE_URL as MERCADOPAGO_BASE_URL
from functions.process.mercadopago_api import MercadoPagoApi
from functions.process.mercadopago_disputes import LedgerDisputes
from functions.process.service import EffectProcessor, Processed
from functions.process.stripe_api import BASE_URL as STRIPE_BASE_URL
from functions.process.stripe_api import StripeApi
from functions.process.waiting import (
    PARK_AFTER_RECEIVES,
    RECHECK_GENERATION,
    RECHECK_OBJECT,
    Message,
    Waiting,
    waiting_from_env,
)
from functions.shared.domain import Outcome
from functions.shared.environment import ProcessSettings
from functions.shared.errors import MalformedEventError, OrderNotYetKnownError, RetryableError
from functions.shared.failures import FailureRecords
from functions.shared.money import InvalidFieldError
from functions.shared.observability import powertools, with_request_id
from functions.shared.providers import Interpreters
from functions.shared.providers.mercadopago import DisputeBooks, nothing_booked
from functions.shared.settings import PaymentMode

logger, tracer, metrics = powertools("process")
SECRET_CACHE_SECONDS = 300
# One record's worst case: a provider API call that times out, a second page or retry of it,
# and the DynamoDB writes. A batch takes no new record once less than this is left, so a slow
# provider API can never make the whole batch (Stripe records included) time out.
PROVIDER_API_TIMEOUT_SECONDS = 4.0
RECORD_RESERVE_MS = int(2 * PROVIDER_API_TIMEOUT_SECONDS * 1000) + 2000


class BatchCutShortError(RetryableError):
    """Not started: too little Lambda time left. SQS redelivers it after the visibility timeout."""


@cache
def effect_processor() -> EffectProcessor:
    settings = ProcessSettings.from_env()
    return EffectProcessor(
        boto3.client("dynamodb"),
        settings.tables,
        time.time,
        interpreters_from_env(),
        retention_seconds=settings.retention_seconds,
    )


def interpreters_from_env() -> Interpreters:
    """Mercado Pago is enabled when the stack names the secret holding its access token;
    Stripe's refunds API when it names the secret holding a read-only Stripe key; Asaas when
    it names the secret holding its API key (without one, its events are refused)."""
    settings = ProcessSettings.from_env()
    mercadopago_secret = settings.mercadopago_access_token_secret
    stripe_secret = settings.stripe_api_key_secret
    asaas_secret = settings.asaas_api_key_secret
    if not (mercadopago_secret or stripe_secret or asaas_secret):
        return Interpreters.build(asaas_payments=_asaas_not_configured)
    secrets = SecretsProvider(boto3_client=boto3.client("secretsmanager"))

    def secret(name: str) -> Callable[[], str]:
        return lambda: str(secrets.get(name, max_age=SECRET_CACHE_SECONDS))

    mercadopago = None
    disputes: DisputeBooks = nothing_booked
    if mercadopago_secret:
        mercadopago = MercadoPagoApi(
            secret(mercadopago_secret),
            base_url=settings.mercadopago_api_url or MERCADOPAGO_BASE_URL,
            timeout_seconds=PROVIDER_API_TIMEOUT_SECONDS,
        )
        disputes = LedgerDisputes(boto3.client("dynamodb"), settings.ledger_table)
    stripe = None
    if stripe_secret:
        stripe = StripeApi(
            secret(stripe_secret),
            base_url=settings.stripe_api_url or STRIPE_BASE_URL,
            timeout_seconds=PROVIDER_API_TIMEOUT_SECONDS,
        )
    asaas_payments = _asaas_not_configured
    if asaas_secret:
        asaas_payments = AsaasApi(
            secret(asaas_secret),
            base_url=settings.asaas_api_url or ASAAS_BASE_URL,
            timeout_seconds=PROVIDER_API_TIMEOUT_SECONDS,
        ).payment
    return Interpreters.build(
        mercadopago_payments=mercadopago.payment if mercadopago else None,
        mercadopago_orders=mercadopago.order if mercadopago else None,
        stripe_refunds=stripe.refunds_of_charge if stripe else None,
        stripe_related=stripe.related_object if stripe else None,
        mercadopago_disputes=disputes,
        asaas_payments=asaas_payments,
        asaas_cash=LedgerCash(boto3.client("dynamodb"), settings.ledger_table),
    )


def _asaas_not_configured(payment_id: str) -> Mapping[str, Any] | None:
    """No Asaas API key named: an Asaas event is refused (DLQ, alarmed), never booked from
    what its body claims."""
    raise AsaasApiNotConfiguredError(
        f"reading payment {payment_id} needs an Asaas API key: the stack names no secret"
    )


@contextmanager
def _record_keys(record: SQSRecord) -> Iterator[None]:
    """Keys on every log line of this record. Per thread: the local stack runs several
    invocations in one process; in Lambda there is one thread and this is the same."""
    event_id = record.message_attributes["event_id"]
    keys = {
        "message_id": record.message_id,
        "event_id": event_id.string_value if event_id else None,
        "receive_count": record.attributes.approximate_receive_count,
    }
    logger.thread_safe_append_keys(**keys)
    try:
        yield
    finally:
        logger.thread_safe_remove_keys(list(keys))


def handle_message(
    record: SQSRecord, processor: EffectProcessor, waiting: Waiting | None = None
) -> list[Processed]:
    with _record_keys(record):
        try:
            message = _message_of(record)
            if _of_the_other_mode(record, message):
                _count(Outcome.IGNORED)
                logger.info(
                    "event of the other payment mode: ignored",
                    extra={"outcome": Outcome.IGNORED.value, "event_id": message.event_id},
                )
                return []
            results = processor.process(message.provider, message.body)
            if waiting is not None:
                # Inside: a watch that could not be written is retried (and logged) like the
                # rest of the record, whose entries are duplicates the second time.
                _keep_rechecking(record, results, waiting)
        except OrderNotYetKnownError as exc:
            if waiting is None or _receives(record) < park_after_receives():
                _count(Outcome.RETRIED)
                logger.info(
                    "order not bound yet; SQS redelivers",
                    extra={"outcome": Outcome.RETRIED.value, "reason": str(exc)},
                )
                raise
            # Waiting is not failing: kept until its binding exists, never dead-lettered.
            waiting.park(_message_of(record), exc)
            _count(Outcome.WAITING)
            logger.warning(
                "waiting for its order", extra={"outcome": Outcome.WAITING, "reason": str(exc)}
            )
            return []
        except RetryableError as exc:
            _remember_failure(record, exc)
            _count(Outcome.RETRIED)
            logger.warning(
                "will retry",
                extra={"outcome": Outcome.RETRIED.value, "reason": str(exc)},
                exc_info=True,
            )
            raise
        except Exception as exc:
            _remember_failure(record, exc)
            _count(Outcome.FAILED)
            # The reason, and the payload's field at fault when one is, on the failure's own
            # line: what the dead letter needs to be understood without the traceback.
            logger.exception(
                "failed; the record goes back to SQS and then its DLQ",
                extra={
                    "outcome": Outcome.FAILED.value,
                    "reason": str(exc) or type(exc).__name__,
                    "field": exc.field if isinstance(exc, InvalidFieldError) else None,
                },
            )
            raise
        for processed in results:
            _count(processed.outcome)
            if processed.amount_disagrees:
                # Two event types named one payment with different amounts: the first counted.
                metrics.add_metric(name="amount_disagreements", unit=MetricUnit.Count, value=1)
            log = logger.warning if processed.amount_disagrees else logger.info
            log(
                processed.detail or processed.outcome.value,
                extra={
                    "event_id": processed.delivery.event_id,
                    "event_type": processed.delivery.event_type,
                    "effect_key": processed.effect_key,
                    "order_id": processed.order_id,
                    "outcome": processed.outcome.value,
                },
            )
        return results


@cache
def failure_records() -> FailureRecords:
    return FailureRecords(
        boto3.client("dynamodb"), ProcessSettings.from_env().ledger_table, time.time
    )


def _remember_failure(record: SQSRecord, error: BaseException) -> None:
    """The reason a dead letter shows (functions/shared/failures.py). Best effort: the
    record's own failure is what SQS must see, whatever happens here."""
    event_id = record.message_attributes["event_id"]
    try:
        failure_records().remember(
            record.message_id,
            event_id.string_value if event_id else None,
            error,
            _receives(record),
        )
    except Exception:
        logger.warning("could not record why the record failed", exc_info=True)


def _keep_rechecking(record: SQSRecord, results: list[Processed], waiting: Waiting) -> None:
    """Objects still unsettled are watched (the waiting function re-drives this delivery
    later); a re-check that found its object settled ends its watch."""
    unsettled = {p.recheck for p in results if p.recheck}
    if unsettled:
        waiting.watch(_message_of(record), unsettled)
        metrics.add_metric(name="rechecks_scheduled", unit=MetricUnit.Count, value=1)
        return
    attributes = record.message_attributes
    watched, generation = attributes[RECHECK_OBJECT], attributes[RECHECK_GENERATION]
    if watched and watched.string_value and generation and generation.string_value:
        waiting.unwatch(_provider_of(record), watched.string_value, generation.string_value)


def _receives(record: SQSRecord) -> int:
    return int(record.attributes.approximate_receive_count or 1)


def park_after_receives() -> int:
    return ProcessSettings.from_env().park_after_receives or PARK_AFTER_RECEIVES


def _message_of(record: SQSRecord) -> Message:
    """The ingest -> process message; a Stripe event EventBridge delivered carries no
    attributes (functions/process/eventbridge.py) and is read as ingest would have sent it."""
    attributes = record.message_attributes
    if attributes["provider"] is None:
        carried = stripe_event_of(record.body)
        return Message("stripe", carried.body, carried.event_id, carried.event_type)

    def text(name: str) -> str:
        value = attributes[name]
        return value.string_value if value and value.string_value else ""

    return Message(
        _provider_of(record), record.body, text("event_id") or record.message_id, text("event_type")
    )


def _of_the_other_mode(record: SQSRecord, message: Message) -> bool:
    """A Stripe event EventBridge delivered whose `livemode` is not the stack's (ingest
    checks a webhook's)."""
    if record.message_attributes["provider"] is not None:
        return False
    live = ProcessSettings.from_env().payment_mode is PaymentMode.LIVE
    return stripe_event_of(record.body).livemode is not live


def _provider_of(record: SQSRecord) -> str:
    provider = record.message_attributes["provider"]
    if provider is None or not provider.string_value:
        raise MalformedEventError("message has no 'provider' attribute")
    return provider.string_value


def _count(outcome: Outcome) -> None:
    metrics.add_metric(name=outcome.value, unit=MetricUnit.Count, value=1)


@cache
def waiting_room() -> Waiting:
    return waiting_from_env()


@tracer.capture_method
def record_handler(record: SQSRecord) -> list[Processed]:
    return handle_message(record, effect_processor(), waiting_room())


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
