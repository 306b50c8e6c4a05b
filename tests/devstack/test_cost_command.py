"""`umavez cost` end to end, tiny: the embedded stack, every scenario, every service billed."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterator

import pytest

from costmodel.measurement import KINDS, MIX, CostOptions, Prices, payer
from costmodel.model import bill, render_block
from costmodel.scenarios import measure
from devstack.resources import WEBHOOK_QUEUE_NAME


@pytest.fixture(autouse=True)
def _own_environment() -> Iterator[None]:
    """The run restores the environment, stdout and boto3's default session."""
    import boto3

    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    stdout, session = sys.stdout, boto3.DEFAULT_SESSION
    yield
    assert {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"} == before
    assert sys.stdout is stdout
    assert boto3.DEFAULT_SESSION is session


def test_a_tiny_cost_run_bills_every_service_per_kind_and_for_the_mix() -> None:
    # When the cost model runs two deliveries per kind and the mix of two orders
    measurement = measure(CostOptions(orders=2, per_kind=2), err=io.StringIO())

    # Then every kind and the mix were measured, with their deliveries
    scenarios = measurement.scenarios()
    assert set(scenarios) == {*KINDS, MIX}
    assert all(scenarios[kind].events == 2 for kind in KINDS)
    assert scenarios[MIX].events >= 2
    # and every service of the pipeline was billed to a function or an event source
    billed = {
        (payer(key, WEBHOOK_QUEUE_NAME), key[1])
        for sample in [*measurement.kinds.values(), measurement.mix]
        if sample is not None
        for key in sample.aws
        if payer(key, WEBHOOK_QUEUE_NAME) is not None
    }
    assert {
        ("ingest", "sqs"),
        ("process (event source)", "sqs"),
        ("process", "dynamodb"),
        ("outbox", "dynamodb"),
        ("outbox", "events"),
        ("outbox", "sesv2"),
        ("reconciliation", "dynamodb"),
    } <= billed
    assert set(measurement.idle) == {"sweeper", "waiting", "reconciliation"}
    # and each kind's bill has the lines it must have (no timing asserted)
    prices = Prices.load()
    bills = {name: bill(sample, prices, WEBHOOK_QUEUE_NAME) for name, sample in scenarios.items()}
    for name, charged in bills.items():
        for line in ("API Gateway HTTP API", "Lambda requests", "SQS", "CloudWatch Logs"):
            assert charged.per_million[line] > 0, (name, line)
        assert charged.rest_total > charged.http_total > 0, name
    new, duplicate = bills["new payment"].quantities, bills["duplicate"].quantities
    assert new["DynamoDB transactions"] > 0
    assert new["DynamoDB index writes"] > 0
    assert new["EventBridge"] == 1
    assert new["SES e-mail"] == 1
    # A duplicate is found by the read before writing: no transaction, no write at all
    assert duplicate["DynamoDB transactions"] == 0
    assert duplicate["DynamoDB reads"] > 0
    assert duplicate["EventBridge"] == 0
    assert duplicate["DynamoDB index writes"] == 0
    assert bills["stale"].quantities["DynamoDB transactions"] > 0
    assert bills["refund"].quantities["DynamoDB reads"] > new["DynamoDB reads"]  # its lookup
    block = render_block(measurement, prices, WEBHOOK_QUEUE_NAME)
    assert all(f"| {kind} " in block for kind in KINDS)
