"""The embedded stack's pollers run the event source mappings the template deploys: read from
both sides, so a value changed on one side alone fails here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.stack import EmbeddedStack
from infra.mappings import matches_pattern
from tests.infra.conftest import Synthesized
from tests.infra.test_stack import logical_id


@pytest.fixture(scope="module")
def stack() -> Iterator[EmbeddedStack]:
    with EmbeddedStack() as running:
        yield running


def mapping_of(synth: Synthesized, function: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        m["Properties"]
        for m in synth.resources("AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"]
        == {"Ref": logical_id(synth, "AWS::Lambda::Function", function)}
    ]
    [mapping] = found
    return mapping


def test_the_process_pollers_run_the_deployed_queue_mapping(
    prod: Synthesized, stack: EmbeddedStack
) -> None:
    # Given the template's mapping of the webhook queue to process (the default deployment)
    deployed = mapping_of(prod, "Process")

    # Then the local pollers take that queue's batches as it does, as many at once as it may
    pollers = stack.process_pollers
    assert len(pollers) == deployed["ScalingConfig"]["MaximumConcurrency"]
    for poller in pollers:
        mapping = poller.mapping
        assert mapping.function == "process"
        assert mapping.batch_size == deployed["BatchSize"]
        assert mapping.max_batching_window_seconds == deployed["MaximumBatchingWindowInSeconds"]
        assert mapping.report_batch_item_failures == (
            deployed["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        )
    queue = logical_id(prod, "AWS::SQS::Queue", "QueuesWebhooks")
    assert deployed["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    assert stack.resources.deployed_as()[
        "queue/" + stack.resources.queue_url.rsplit("/", 1)[-1]
    ] == ("Queues/Webhooks")


def test_the_outbox_poller_runs_the_deployed_stream_mapping(
    prod: Synthesized, stack: EmbeddedStack
) -> None:
    # Given the template's mapping of the outbox table's stream to the outbox sender
    deployed = mapping_of(prod, "Outbox")
    mapping = stack.stream_poller.mapping

    # Then the local poller reads, filters, batches, retries, bisects and gives up as it does
    assert mapping.function == "outbox"
    assert mapping.starting_position == deployed["StartingPosition"]
    assert mapping.batch_size == deployed["BatchSize"]
    assert mapping.parallelization_factor == deployed["ParallelizationFactor"]
    assert mapping.bisect_batch_on_error == deployed["BisectBatchOnFunctionError"]
    assert mapping.retry_attempts == deployed["MaximumRetryAttempts"]
    assert mapping.max_record_age_seconds == deployed["MaximumRecordAgeInSeconds"]
    assert mapping.report_batch_item_failures == (
        deployed["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    )
    [pattern] = [json.loads(f["Pattern"]) for f in deployed["FilterCriteria"]["Filters"]]
    assert pattern == mapping.filter_pattern
    # from the outbox table's stream, its failures to the queue the local one plays
    table = logical_id(prod, "AWS::DynamoDB::GlobalTable", "StorageOutbox")
    assert deployed["EventSourceArn"] == {"Fn::GetAtt": [table, "StreamArn"]}
    failures = logical_id(prod, "AWS::SQS::Queue", "OutboxStreamFailures")
    assert deployed["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [failures, "Arn"]}}
    }
    local_failures = "queue/" + stack.resources.outbox_failures_url.rsplit("/", 1)[-1]
    assert stack.resources.deployed_as()[local_failures] == "OutboxStreamFailures"
    assert stack.resources.deployed_as()[f"table/{stack.resources.tables.outbox}"] == (
        "Storage/Outbox"
    )


@pytest.mark.parametrize(
    ("record", "matches"),
    [
        ({"eventName": "INSERT", "dynamodb": {"NewImage": {"status": {"S": "pending"}}}}, True),
        ({"eventName": "MODIFY", "dynamodb": {"NewImage": {"status": {"S": "pending"}}}}, False),
        ({"eventName": "INSERT", "dynamodb": {"NewImage": {"status": {"S": "sent"}}}}, False),
        ({"eventName": "INSERT", "dynamodb": {}}, False),
    ],
)
def test_the_stream_poller_filters_as_lambda_filters_the_deployed_pattern(
    prod: Synthesized, record: dict[str, Any], matches: bool
) -> None:
    # Given the deployed filter pattern, read back from the template
    [pattern] = [
        json.loads(f["Pattern"]) for f in mapping_of(prod, "Outbox")["FilterCriteria"]["Filters"]
    ]

    # Then the local matcher lets through exactly the new pending items
    assert matches_pattern(pattern, record) is matches
