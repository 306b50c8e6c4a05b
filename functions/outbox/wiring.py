"""Builds the sender from the stack's environment; shared by the stream and sweeper handlers.

EVENT_BUS_NAME: EventBridge bus for domain events (always on). EMAIL_SENDER: SES from-address;
e-mail is sent when set and the item has a recipient. NOTIFY_URL: optional HTTP sink.
"""

from __future__ import annotations

import os
import time

import boto3

from functions.outbox.channels import Channel, EventBridgeChannel, HttpChannel, SesEmailChannel
from functions.outbox.sender import OutboxSender
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


def sender_from_env() -> OutboxSender:
    return OutboxSender(
        boto3.client("dynamodb"), TableNames.from_env().outbox, channels_from_env(), time.time
    )
