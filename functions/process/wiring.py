"""Builds the process Lambda's parts from the stack's environment (ProcessSettings in
functions/shared/environment.py): the effect processor with the providers' APIs it reads, the
waiting room, and the records of why a record failed. Each is built once per environment."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Final, TypeVar

import boto3
from aws_lambda_powertools.utilities.parameters import SecretsProvider

from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
from functions.asaas.api import AsaasApi, AsaasApiNotConfiguredError
from functions.mercadopago.api import BASE_URL as MERCADOPAGO_BASE_URL
from functions.mercadopago.api import MercadoPagoApi
from functions.mercadopago.models import DisputeBooks, nothing_booked
from functions.process.asaas_cash import LedgerCash
from functions.process.interpreters import Interpreters
from functions.process.mercadopago_disputes import LedgerDisputes
from functions.process.service import EffectProcessor
from functions.process.waiting import PARK_AFTER_RECEIVES, Waiting, waiting_from_env
from functions.shared.environment import ProcessSettings
from functions.shared.failures import FailureRecords
from functions.stripe.api import BASE_URL as STRIPE_BASE_URL
from functions.stripe.api import StripeApi

T = TypeVar("T")
SECRET_CACHE_SECONDS: Final = 300
# One record's worst case: a provider API call that times out, a second page or retry of it,
# and the DynamoDB writes. A batch takes no new record once less than this is left, so a slow
# provider API can never make the whole batch (Stripe records included) time out.
PROVIDER_API_TIMEOUT_SECONDS: Final = 4.0
RECORD_RESERVE_MS: Final = int(2 * PROVIDER_API_TIMEOUT_SECONDS * 1000) + 2000


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


@cache
def waiting_room() -> Waiting:
    return waiting_from_env()


@cache
def failure_records() -> FailureRecords:
    return FailureRecords(
        boto3.client("dynamodb"), ProcessSettings.from_env().ledger_table, time.time
    )


def park_after_receives() -> int:
    return ProcessSettings.from_env().park_after_receives or PARK_AFTER_RECEIVES


def interpreters_from_env() -> Interpreters:
    """Mercado Pago is enabled when the stack names the secret holding its access token;
    Stripe's API when it names the secret holding a read-only Stripe key; Asaas when it names
    the secret holding its API key (without one, its events are refused)."""
    settings = ProcessSettings.from_env()
    mercadopago_secret = settings.mercadopago_access_token_secret
    stripe_secret = settings.stripe_api_key_secret
    asaas_secret = settings.asaas_api_key_secret
    if not (mercadopago_secret or stripe_secret or asaas_secret):
        return Interpreters.build(asaas_payments=_asaas_not_configured)
    secrets = SecretsProvider(boto3_client=boto3.client("secretsmanager"))

    def api(make: Callable[..., T], secret_name: str, url: str | None, default: str) -> T:
        """The provider's API client, its credential read from `secret_name` when needed."""

        def credential() -> str:
            return str(secrets.get(secret_name, max_age=SECRET_CACHE_SECONDS))

        return make(
            credential, base_url=url or default, timeout_seconds=PROVIDER_API_TIMEOUT_SECONDS
        )

    mercadopago = None
    disputes: DisputeBooks = nothing_booked
    if mercadopago_secret:
        mercadopago = api(
            MercadoPagoApi, mercadopago_secret, settings.mercadopago_api_url, MERCADOPAGO_BASE_URL
        )
        disputes = LedgerDisputes(boto3.client("dynamodb"), settings.ledger_table)
    stripe = None
    if stripe_secret:
        stripe = api(StripeApi, stripe_secret, settings.stripe_api_url, STRIPE_BASE_URL)
    asaas_payments = _asaas_not_configured
    if asaas_secret:
        asaas_payments = api(AsaasApi, asaas_secret, settings.asaas_api_url, ASAAS_BASE_URL).payment
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
