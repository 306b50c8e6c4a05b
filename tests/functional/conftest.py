"""Fixtures of the functional tests that wait: the webhook queue on moto and the waiting room
on the injected clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

import boto3
import pytest

from functions.process.waiting import Waiting
from tests.support.clock import FakeClock
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


@pytest.fixture
def queue(world: World) -> tuple[SQSClient, str]:
    sqs: SQSClient = boto3.client("sqs")
    return sqs, sqs.create_queue(QueueName="umavez-test-webhooks")["QueueUrl"]


@pytest.fixture
def room(world: World, queue: tuple[SQSClient, str], clock: FakeClock) -> Waiting:
    sqs, url = queue
    return Waiting(world.dynamodb, sqs, TABLES, url, clock)
