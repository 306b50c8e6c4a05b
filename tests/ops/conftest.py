"""A deployed stack on moto's CloudFormation: what the operator's commands find by its name."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest
from moto import mock_aws

from functions.shared.tables import TableNames, create_table_requests

STACK = "Umavez-prod"
NAMES = TableNames("Umavez-prod-Ledger-1A2B", "Umavez-prod-Outbox-3C4D")
LOG_GROUPS = {
    f"{name}Logs": f"/aws/lambda/Umavez-prod-{name}-9Z8Y"
    for name in ("Ingest", "Process", "Outbox")
}
# A log group of the stack that is not a function's: trace never reads it.
ACCESS_LOGS = "/umavez/prod/api-access"
ALARMS = ("Umavez-prod-DeadLetters", "Umavez-prod-ProcessFailed")
# The webhook queue as the stack makes it: a record lives at most 5 receives of 180 s.
VISIBILITY_TIMEOUT_SECONDS = 180
MAX_RECEIVE_COUNT = 5


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A stack named Umavez-prod in us-east-1 whose outputs name its tables and queues, with
    its functions' log groups and two of its alarms (in state INSUFFICIENT_DATA)."""
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        for request in create_table_requests(NAMES):
            dynamodb.create_table(**request)
        sqs = boto3.client("sqs", region_name="us-east-1")
        dead = sqs.create_queue(QueueName="Umavez-prod-DeadLetters-7A8B")["QueueUrl"]
        dead_arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        queue = sqs.create_queue(
            QueueName="Umavez-prod-Webhooks-5E6F",
            Attributes={
                "VisibilityTimeout": str(VISIBILITY_TIMEOUT_SECONDS),
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dead_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
                ),
            },
        )["QueueUrl"]
        machine = boto3.client("stepfunctions", region_name="us-east-1").create_state_machine(
            name="Umavez-prod-Reconciliation",
            definition=json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Succeed"}}}),
            roleArn="arn:aws:iam::123456789012:role/Umavez-prod-ReconciliationRole",
        )["stateMachineArn"]
        outputs = {
            "LedgerTable": NAMES.ledger,
            "OutboxTable": NAMES.outbox,
            "WebhookQueueUrl": queue,
            "DeadLetterQueueUrl": dead,
            "Stage": "prod",
            "ReconciliationStateMachineArn": machine,
            "FunctionLogGroups": ",".join(LOG_GROUPS.values()),
        }
        resources: dict[str, object] = {"Topic": {"Type": "AWS::SNS::Topic"}}
        resources |= {
            logical: {"Type": "AWS::Logs::LogGroup", "Properties": {"LogGroupName": name}}
            for logical, name in {**LOG_GROUPS, "AccessLogs": ACCESS_LOGS}.items()
        }
        template = {
            "Resources": resources,
            "Outputs": {name: {"Value": value} for name, value in outputs.items()},
        }
        boto3.client("cloudformation", region_name="us-east-1").create_stack(
            StackName=STACK, TemplateBody=json.dumps(template)
        )
        # Alarms as the stack names them, `<stack>-<name>` (moto's CloudFormation makes none).
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        for name in ALARMS:
            cloudwatch.put_metric_alarm(
                AlarmName=name,
                MetricName="failed",
                Namespace="umavez",
                Statistic="Sum",
                Period=300,
                EvaluationPeriods=1,
                Threshold=1,
                ComparisonOperator="GreaterThanOrEqualToThreshold",
            )
        yield outputs
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


# The partner event source of a Stripe EventBridge destination the preflight tests' stack names.
STRIPE_SOURCE = "aws.partner/stripe.com/ed_61RM0xAHcFZJ2wBNN16RLfH3kxSJ2rGQCAgh"
