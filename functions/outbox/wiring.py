"""Builds the sender from the stack's environment (SenderSettings, SweeperSettings in
functions/shared/environment.py: each variable, its meaning and default); shared by the stream
and sweeper handlers. EventBridge is always on; e-mail when a sender address is set; HTTP when
a URL is."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

import boto3

from functions.outbox.budget import (
    DYNAMODB_CLIENT_CONFIG,
    HTTP_TIMEOUT_SECONDS,
    SEND_CLIENT_CONFIG,
)
from functions.outbox.channels import Channel, EventBridgeChannel, HttpChannel, SesEmailChannel
from functions.outbox.sender import OutboxSender, SendPolicy
from functions.shared.environment import SenderSettings, SweeperSettings


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
        channels.append(HttpChannel(settings.notify_url, timeout_seconds=HTTP_TIMEOUT_SECONDS))
    return channels


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


def sender_from_env() -> OutboxSender:
    names = SenderSettings.from_env().tables
    return OutboxSender(
        boto3.client("dynamodb", config=DYNAMODB_CLIENT_CONFIG),
        names.outbox,
        channels_from_env(),
        time.time,
        policy_from_env(),
        ledger_table=names.ledger,
    )
