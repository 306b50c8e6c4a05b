"""Each API operation recorded as the IAM actions AWS authorizes it as, on what it addresses."""

from __future__ import annotations

from typing import Any

import pytest

from devstack.calls import permissions_needed

STREAM = "arn:aws:dynamodb:us-east-1:123456789012:table/umavez-outbox/stream/2026-01-01T00:00"


@pytest.mark.parametrize(
    ("service", "operation", "request_", "needed"),
    [
        (
            "dynamodb",
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": {"TableName": "ledger"}},
                    {"Update": {"TableName": "ledger"}},
                    {"ConditionCheck": {"TableName": "ledger"}},
                    {"Put": {"TableName": "outbox"}},
                    {"Delete": {"TableName": "ledger"}},
                ]
            },
            [
                ("dynamodb:ConditionCheckItem", "table/ledger"),
                ("dynamodb:DeleteItem", "table/ledger"),
                ("dynamodb:PutItem", "table/ledger"),
                ("dynamodb:PutItem", "table/outbox"),
                ("dynamodb:UpdateItem", "table/ledger"),
            ],
        ),
        (
            "dynamodb",
            "BatchGetItem",
            {"RequestItems": {"outbox": {}, "ledger": {}}},
            [("dynamodb:BatchGetItem", "table/ledger"), ("dynamodb:BatchGetItem", "table/outbox")],
        ),
        (
            "dynamodb",
            "Query",
            {"TableName": "outbox", "IndexName": "due"},
            [("dynamodb:Query", "table/outbox/index/due")],
        ),
        (
            "sqs",
            "SendMessageBatch",
            {"QueueUrl": "http://127.0.0.1:1/000000000000/webhooks"},
            [("sqs:SendMessage", "queue/webhooks")],
        ),
        (
            "sqs",
            "DeleteMessageBatch",
            {"QueueUrl": "http://h/1/q"},
            [("sqs:DeleteMessage", "queue/q")],
        ),
        (
            "sqs",
            "ChangeMessageVisibilityBatch",
            {"QueueUrl": "http://h/1/q"},
            [("sqs:ChangeMessageVisibility", "queue/q")],
        ),
        (
            "sesv2",
            "SendEmail",
            {"FromEmailAddress": "Loja <loja@example.com>", "ConfigurationSetName": "set"},
            [
                ("ses:SendEmail", "identity/loja@example.com"),
                ("ses:SendEmail", "configuration-set/set"),
            ],
        ),
        (
            "events",
            "PutEvents",
            {"Entries": [{"EventBusName": "bus"}, {"EventBusName": "bus"}]},
            [("events:PutEvents", "event-bus/bus")],
        ),
        (
            "secretsmanager",
            "GetSecretValue",
            {"SecretId": "umavez/local/stripe/webhook"},
            [("secretsmanager:GetSecretValue", "secret/umavez/local/stripe/webhook")],
        ),
        ("dynamodbstreams", "ListStreams", {}, [("dynamodb:ListStreams", "*")]),
        (
            "dynamodbstreams",
            "GetShardIterator",
            {"StreamArn": STREAM},
            [("dynamodb:GetShardIterator", "table/umavez-outbox/stream")],
        ),
        ("monitoring", "PutMetricData", {}, [("cloudwatch:PutMetricData", "*")]),
    ],
)
def test_an_operation_needs_the_actions_aws_authorizes_it_as(
    service: str, operation: str, request_: dict[str, Any], needed: list[tuple[str, str]]
) -> None:
    assert permissions_needed(service, operation, request_, {}) == needed


def test_a_get_records_is_on_the_stream_its_iterator_was_handed_out_for() -> None:
    # Given an iterator the server handed out for the outbox table's stream
    streams = {"iterator-1": STREAM}

    # Then reading records with it needs GetRecords on that stream
    assert permissions_needed(
        "dynamodbstreams", "GetRecords", {"ShardIterator": "iterator-1"}, streams
    ) == [("dynamodb:GetRecords", "table/umavez-outbox/stream")]
