"""Hermetic AWS for every test: fake credentials, moto, tables from the shared definitions."""

from __future__ import annotations

import os

# Set before any Lambda module is imported: Powertools reads these at import time.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "umavez-tests",
        "POWERTOOLS_METRICS_NAMESPACE": "Umavez",
    }
)

from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import boto3
import pytest
from moto import mock_aws

from functions.process.service import EffectProcessor
from functions.shared.tables import TableNames, create_table_requests
from tests.support.clients import serialized
from tests.support.clock import FakeClock
from tests.support.world import ProcessorFactory, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

TABLES = TableNames(ledger="test-ledger", outbox="test-outbox")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_processor(clock: FakeClock) -> ProcessorFactory:
    return partial(EffectProcessor, clock=clock)


@pytest.fixture
def dynamodb() -> Iterator[DynamoDBClient]:
    with mock_aws():
        client = boto3.client("dynamodb")
        for request in create_table_requests(TABLES):
            client.create_table(**request)
        yield client


@pytest.fixture
def world(dynamodb: DynamoDBClient, make_processor: ProcessorFactory) -> World:
    return World(serialized(dynamodb), TABLES, make_processor)
