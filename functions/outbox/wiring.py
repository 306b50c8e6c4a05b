"""Builds the sender from the stack's environment; shared by the stream and sweeper handlers.

EVENT_BUS_NAME: EventBridge bus for domain events (always on). EMAIL_SENDER: SES from-address;
e-mail is sent when set and the item has a recipient; EMAIL_CONFIGURATION_SET, the SES
configuration set each e-mail names (optional). NOTIFY_URL: optional HTTP sink.
OUTBOX_LEASE_SECONDS, OUTBOX_BACKOFF_BASE_SECONDS, OUTBOX_BACKOFF_CAP_SECONDS,
SWEEP_GRACE_SECONDS override the send policy (the embedded local stack shortens them to fit a
drill in minutes). OUTBOX_GIVE_UP_HOURS (an item is dead when a send fails past this age) and
RETENTION_DAYS (how long a sent item is kept) come from the stack: functions/shared/settings.py.
"""

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
from functions.shared import settings
from functions.shared.tables import TableNames


def channels_from_env() -> list[Channel]:
    # Every send bounded (functions/outbox/budget.py): an item's worst case is known.
    channels: list[Channel] = [
        EventBridgeChannel(
            boto3.client("events", config=SEND_CLIENT_CONFIG),
            os.environ.get("EVENT_BUS_NAME", "default"),
        )
    ]
    if sender := os.environ.get("EMAIL_SENDER"):
        channels.append(
            SesEmailChannel(
                boto3.client("sesv2", config=SEND_CLIENT_CONFIG),
                sender,
                configuration_set=os.environ.get("EMAIL_CONFIGURATION_SET") or None,
            )
        )
    if url := os.environ.get("NOTIFY_URL"):
        channels.append(HttpChannel(url, timeout_seconds=HTTP_TIMEOUT_SECONDS))
    return channels


def policy_from_env(environ: Mapping[str, str] = os.environ) -> SendPolicy:
    defaults = SendPolicy()
    return SendPolicy(
        lease_seconds=int(environ.get("OUTBOX_LEASE_SECONDS", defaults.lease_seconds)),
        backoff_base_seconds=int(
            environ.get("OUTBOX_BACKOFF_BASE_SECONDS", defaults.backoff_base_seconds)
        ),
        backoff_cap_seconds=int(
            environ.get("OUTBOX_BACKOFF_CAP_SECONDS", defaults.backoff_cap_seconds)
        ),
        give_up_seconds=settings.outbox_give_up_seconds(environ),
        retention_seconds=settings.retention_seconds(environ),
    )


def sweep_grace_seconds() -> int:
    return int(os.environ.get("SWEEP_GRACE_SECONDS", "120"))


def sender_from_env() -> OutboxSender:
    names = TableNames.from_env()
    return OutboxSender(
        boto3.client("dynamodb", config=DYNAMODB_CLIENT_CONFIG),
        names.outbox,
        channels_from_env(),
        time.time,
        policy_from_env(),
        ledger_table=names.ledger,
    )
