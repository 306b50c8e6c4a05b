"""Builds the sender from the stack's environment; shared by the stream and sweeper handlers.

EVENT_BUS_NAME: EventBridge bus for domain events (always on). EMAIL_SENDER: SES from-address;
e-mail is sent when set and the item has a recipient. NOTIFY_URL: optional HTTP sink.
OUTBOX_LEASE_SECONDS, OUTBOX_BACKOFF_BASE_SECONDS, OUTBOX_MAX_ATTEMPTS, SWEEP_GRACE_SECONDS
override the send policy (the embedded local stack shortens them to fit a drill in minutes).
"""

from __future__ import annotations

import os
import time

import boto3

from functions.outbox.channels import Channel, EventBridgeChannel, HttpChannel, SesEmailChannel
from functions.outbox.sender import OutboxSender, SendPolicy
from functions.shared.tables import TableNames


def channels_from_env() -> list[Channel]:
    channels: list[Channel] = [
        EventBridgeChannel(boto3.client("events"), os.environ.get("EVENT_BUS_NAME", "default"))
    ]
    if sender := os.environ.get("EMAIL_SENDER"):
        channels.append(SesEmailChannel(boto3.client("sesv2"), sender))
    if url := os.environ.get("NOTIFY_URL"):
        channels.append(HttpChannel(url))
    return channels


def policy_from_env() -> SendPolicy:
    defaults = SendPolicy()
    return SendPolicy(
        lease_seconds=int(os.environ.get("OUTBOX_LEASE_SECONDS", defaults.lease_seconds)),
        max_attempts=int(os.environ.get("OUTBOX_MAX_ATTEMPTS", defaults.max_attempts)),
        backoff_base_seconds=int(
            os.environ.get("OUTBOX_BACKOFF_BASE_SECONDS", defaults.backoff_base_seconds)
        ),
    )


def sweep_grace_seconds() -> int:
    return int(os.environ.get("SWEEP_GRACE_SECONDS", "120"))


def sender_from_env() -> OutboxSender:
    names = TableNames.from_env()
    return OutboxSender(
        boto3.client("dynamodb"),
        names.outbox,
        channels_from_env(),
        time.time,
        policy_from_env(),
        ledger_table=names.ledger,
    )
