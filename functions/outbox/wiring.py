"""Builds the sender from the stack's environment (SenderSettings, SweeperSettings in
functions/shared/environment.py: each variable, its meaning and default); shared by the stream
and sweeper handlers. EventBridge is always on; e-mail when a sender address is set; HTTP when
a URL is."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import boto3
from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.parameters import SecretsProvider

from functions.outbox.budget import (
    DYNAMODB_CLIENT_CONFIG,
    HTTP_TIMEOUT_SECONDS,
    SEND_CLIENT_CONFIG,
)
from functions.outbox.channels import Channel, EventBridgeChannel, HttpChannel, SesEmailChannel
from functions.outbox.sender import OnSinkGone, OutboxSender, SendPolicy
from functions.shared.environment import SenderSettings, SweeperSettings

SECRET_CACHE_SECONDS: Final = 300


def channels_from_env() -> list[Channel]:
    settings = SenderSettings.from_env()
    # Every send bounded (functions/outbox/budget.py): an item's worst case is known.
    channels: list[Channel] = [
        EventBridgeChannel(
            boto3.client("events", config=SEND_CLIENT_CONFIG), settings.event_bus_name
        )
    ]
    if settings.email_sender:
        channels.append(
            SesEmailChannel(
                boto3.client("sesv2", config=SEND_CLIENT_CONFIG),
                settings.email_sender,
                configuration_set=settings.email_configuration_set or None,
            )
        )
    if settings.notify_url:
        channels.append(
            HttpChannel(
                settings.notify_url,
                signing_secrets(settings.notify_signing_secret),
                time.time,
                timeout_seconds=HTTP_TIMEOUT_SECONDS,
                allow_loopback_http=settings.notify_allow_loopback_http,
            )
        )
    return channels


def signing_secrets(secret_name: str | None) -> Callable[[], tuple[str, ...]]:
    """The active signing secrets, read through Powertools Parameters (cached; a secret
    removed from `active` stops signing within SECRET_CACHE_SECONDS). No secret named: none,
    and the HTTP channel sends nothing unsigned."""
    if not secret_name:
        return tuple
    provider = SecretsProvider(boto3_client=boto3.client("secretsmanager"))
    return lambda: active_secrets(provider.get(secret_name, max_age=SECRET_CACHE_SECONDS))


def active_secrets(value: Any) -> tuple[str, ...]:
    """`{"active": ["newest", "previous"]}`, or one plain secret."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = [value]
    if isinstance(value, dict):
        value = value.get("active", [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(s.strip() for s in value if isinstance(s, str) and s.strip())


def policy_from_env(environ: Mapping[str, str] = os.environ) -> SendPolicy:
    settings = SenderSettings.from_env(environ)
    defaults = SendPolicy()
    return SendPolicy(
        lease_seconds=settings.outbox_lease_seconds or defaults.lease_seconds,
        backoff_base_seconds=settings.outbox_backoff_base_seconds or defaults.backoff_base_seconds,
        backoff_cap_seconds=settings.outbox_backoff_cap_seconds or defaults.backoff_cap_seconds,
        give_up_seconds=settings.outbox_give_up_hours * 3600,
        retention_seconds=settings.retention_seconds,
    )


def sweep_grace_seconds() -> int:
    return SweeperSettings.from_env().sweep_grace_seconds


def sender_from_env(on_sink_gone: OnSinkGone | None = None) -> OutboxSender:
    names = SenderSettings.from_env().tables
    return OutboxSender(
        boto3.client("dynamodb", config=DYNAMODB_CLIENT_CONFIG),
        names.outbox,
        channels_from_env(),
        time.time,
        policy_from_env(),
        ledger_table=names.ledger,
        on_sink_gone=on_sink_gone,
    )


SINK_GONE_METRIC: Final = "notify_sink_gone"


def sink_gone_reporter(logger: Logger, metrics: Metrics) -> OnSinkGone:
    """A sink that answered 410 Gone: an error line and the `notify_sink_gone` metric (its
    alarm pages). Its items are not retried on it; the sink's owner must say where to send."""

    def report(outbox_id: str, channel: str, why: str) -> None:
        metrics.add_metric(name=SINK_GONE_METRIC, unit=MetricUnit.Count, value=1)
        logger.error(
            "the notification sink is gone; this item is not retried on it",
            extra={"outbox_id": outbox_id, "channel": channel, "error": why},
        )

    return report
