"""Fixtures of the functional tests: the webhook queue on moto, the waiting room on the
injected clock, and the process Lambda's environment naming the test tables."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import boto3
import pytest

from functions.process import wiring
from functions.process.waiting import Waiting
from tests.support.clock import FakeClock
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient


@pytest.fixture
def queue(world: World) -> tuple[SQSClient, str]:
    sqs: SQSClient = boto3.client("sqs")
    return sqs, sqs.create_queue(QueueName="umavez-test-webhooks")["QueueUrl"]


@pytest.fixture
def room(world: World, queue: tuple[SQSClient, str], clock: FakeClock) -> Waiting:
    sqs, url = queue
    return Waiting(world.dynamodb, sqs, TABLES, url, clock)


@pytest.fixture
def deployed_tables(dynamodb: DynamoDBClient, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process Lambda's environment naming the test tables, its cached clients made anew."""
    monkeypatch.setenv("LEDGER_TABLE", TABLES.ledger)
    monkeypatch.setenv("OUTBOX_TABLE", TABLES.outbox)
    wiring.effect_processor.cache_clear()
    wiring.failure_records.cache_clear()
    yield
    wiring.effect_processor.cache_clear()
    wiring.failure_records.cache_clear()
