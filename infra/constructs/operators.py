"""What on-call may do to this stack, as two IAM managed policies to attach to their role (named
with the region too: IAM names are the account's, and a stack of the same name may be deployed
in another region):

- `<stack>-operator-read-<region>`: `umavez status`, `trace`, `show order|waiting|unmatched`,
  `dlq list` and `preflight`, which only read (a DLQ listing hides each letter for a moment
  and shows it again: ChangeMessageVisibility; status and preflight read the Asaas API key, to
  ask Asaas's webhooks API whether its queue is paused);
- `<stack>-operator-repair-<region>`: `umavez dlq redrive`, `outbox revive`, `attach`,
  `replay` and `preflight --test-alarm`, which move letters back to the webhook queue, make
  dead notifications pending again, bind a payment to its order, enqueue the provider's
  events again (reading the stack's API credentials) and set the test alarm to ALARM.

Each grant is what those commands call on this stack's resources, as recorded while they run
(tests/support/ops_calls.py) and held against these policies by
tests/infra/test_operator_policy.py: every recorded call allowed, every grant used or listed
with its reason there. Every command also reads the stack's outputs (DescribeStacks).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from functions.shared import tables
from infra.config import sender_identities
from infra.constructs.pipeline import Pipeline
from infra.nag import PACK, acknowledge
from infra.settings import (
    BOOTSTRAP_VERSION_PARAMETER,
    pinned_powertools_version,
    powertools_layer_parameter,
)

NO_NAME = cdk.ArnFormat.NO_RESOURCE_NAME


class OperatorPolicies(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: Pipeline,
        state_machine: sfn.IStateMachine,
        alarm_topic: sns.ITopic,
        test_alarm: cloudwatch.IAlarm,
        email_sender: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        preflight = preflight_statements(
            cdk.Stack.of(self), pipeline, alarm_topic, test_alarm, email_sender
        )
        self.read = self._read(pipeline, state_machine, preflight)
        self.repair = self._repair(pipeline, test_alarm)

    def _read(
        self,
        pipeline: Pipeline,
        state_machine: sfn.IStateMachine,
        preflight: list[iam.PolicyStatement],
    ) -> iam.ManagedPolicy:
        stack = cdk.Stack.of(self)
        ledger = pipeline.storage.ledger.table_arn
        dead_letters = pipeline.queues.dead_letters.queue_arn
        # Where `umavez trace` reads the functions' lines (FunctionLogGroups).
        function_logs = [f.log_group.log_group_arn for f in pipeline.functions]
        read = iam.ManagedPolicy(
            self,
            "Read",
            managed_policy_name=f"{stack.stack_name}-operator-read-{cdk.Aws.REGION}",
            description="umavez status, trace, show, dlq list, preflight: read this stack only",
            statements=[
                allow(["cloudformation:DescribeStacks"], [stack.stack_id]),  # the stack's ARN
                # status: the last books check, the ledger's waiting items, the due outbox
                allow(["dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"], [ledger]),
                allow(["dynamodb:BatchGetItem"], [pipeline.storage.outbox.table_arn]),
                allow(["dynamodb:Query"], [due_index(pipeline)]),
                allow(["sqs:GetQueueAttributes"], [pipeline.queues.queue.queue_arn, dead_letters]),
                allow(["sqs:ReceiveMessage", "sqs:ChangeMessageVisibility"], [dead_letters]),
                allow(["states:ListExecutions"], [state_machine.state_machine_arn]),
                allow(["logs:StartQuery"], function_logs),
                # status and preflight: Asaas's webhooks API answers to the account's key only.
                allow(
                    ["secretsmanager:GetSecretValue"], [pipeline.secrets.asaas_api_key.secret_arn]
                ),
                # Resource-less in IAM: a query's results by its id; alarms and metrics read
                # by this stack's names (`<stack>-...`) and namespace; the account's Lambda
                # concurrency and SES sending (preflight).
                allow(
                    [
                        "logs:GetQueryResults",
                        "cloudwatch:DescribeAlarms",
                        "cloudwatch:GetMetricStatistics",
                        "lambda:GetAccountSettings",
                        "ses:GetAccount",
                    ],
                    ["*"],
                ),
                *preflight,
            ],
        )
        acknowledge(
            read,
            f"{PACK}IAM5[Resource::*]",
            "logs:GetQueryResults and CloudWatch's metric statistics take no resource; alarms"
            " are read by this stack's name prefix",
        )
        return read

    def _repair(self, pipeline: Pipeline, test_alarm: cloudwatch.IAlarm) -> iam.ManagedPolicy:
        stack = cdk.Stack.of(self)
        secrets = pipeline.secrets
        return iam.ManagedPolicy(
            self,
            "Repair",
            managed_policy_name=f"{stack.stack_name}-operator-repair-{cdk.Aws.REGION}",
            description="umavez dlq redrive, outbox revive, attach, replay: repair this stack only",
            statements=[
                allow(["cloudformation:DescribeStacks"], [stack.stack_id]),
                # ChangeMessageVisibility shows again the letters it was not asked to move.
                allow(
                    ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"],
                    [pipeline.queues.dead_letters.queue_arn],
                ),
                allow(["sqs:SendMessage"], [pipeline.queues.queue.queue_arn]),
                # BatchGetItem: a redrive names each letter's last failure as it moves it, a
                # replay reads each event's outcome. `attach` reads the waiting partitions,
                # writes the binding and takes each re-driven delivery out of its partition.
                allow(
                    [
                        "dynamodb:BatchGetItem",
                        "dynamodb:Query",
                        "dynamodb:PutItem",
                        "dynamodb:DeleteItem",
                    ],
                    [pipeline.storage.ledger.table_arn],
                ),
                # `replay` reads the events again with the stack's own API credentials.
                allow(
                    ["secretsmanager:GetSecretValue"],
                    [
                        secrets.stripe_api_key.secret_arn,
                        secrets.mercadopago_access_token.secret_arn,
                        secrets.asaas_api_key.secret_arn,
                    ],
                ),
                allow(["dynamodb:Query"], [due_index(pipeline)]),
                allow(["dynamodb:UpdateItem"], [pipeline.storage.outbox.table_arn]),
                # `preflight --test-alarm` sets the test alarm to ALARM: it pages the
                # subscribers, so it is a repair's, not a read's.
                allow(["cloudwatch:SetAlarmState"], [test_alarm.alarm_arn]),
            ],
        )


def preflight_statements(
    stack: cdk.Stack,
    pipeline: Pipeline,
    alarm_topic: sns.ITopic,
    test_alarm: cloudwatch.IAlarm,
    email_sender: str | None,
) -> list[iam.PolicyStatement]:
    """preflight: the account's readiness, then the stack's secrets (described; only the
    Asaas key is read, by the read policy), its alarm topic's subscriptions and the test
    alarm's history; the sender's SES identities and Stripe's partner event source when set."""
    secrets = pipeline.secrets
    statements = [
        *account_readiness(stack),
        allow(
            ["secretsmanager:DescribeSecret"],
            [
                *(s.secret_arn for s in secrets.webhook.values()),
                secrets.mercadopago_access_token.secret_arn,
                secrets.stripe_api_key.secret_arn,
                secrets.asaas_api_key.secret_arn,
                *([secrets.notify_signing.secret_arn] if secrets.notify_signing else []),
            ],
        ),
        allow(["sns:ListSubscriptionsByTopic"], [alarm_topic.topic_arn]),
        allow(["cloudwatch:DescribeAlarmHistory"], [test_alarm.alarm_arn]),
    ]
    if email_sender:
        identities = [
            stack.format_arn(service="ses", resource="identity", resource_name=identity)
            for identity in sender_identities(email_sender)
        ]
        statements.append(allow(["ses:GetEmailIdentity"], identities))
    if pipeline.stripe_event_source:
        event_source = stack.format_arn(
            service="events",
            account="",
            resource="event-source",
            resource_name=pipeline.stripe_event_source,
        )
        statements.append(allow(["events:DescribeEventSource"], [event_source]))
    return statements


def account_readiness(stack: cdk.Stack) -> list[iam.PolicyStatement]:
    """The bootstrap's version, the Powertools layer's public parameter and the region's API
    Gateway logging role."""
    bootstrap = stack.format_arn(
        service="ssm",
        resource="parameter",
        resource_name=BOOTSTRAP_VERSION_PARAMETER.lstrip("/"),
    )
    layer = stack.format_arn(
        service="ssm",
        account="",
        resource="parameter",
        resource_name=powertools_layer_parameter(pinned_powertools_version()).lstrip("/"),
    )
    api_gateway_account = stack.format_arn(
        service="apigateway", account="", resource="/account", arn_format=NO_NAME
    )
    return [
        allow(["ssm:GetParameter"], [bootstrap, layer]),
        allow(["apigateway:GET"], [api_gateway_account]),
    ]


def due_index(pipeline: Pipeline) -> str:
    return f"{pipeline.storage.outbox.table_arn}/index/{tables.OUTBOX_DUE_INDEX}"


def allow(actions: list[str], resources: list[str]) -> iam.PolicyStatement:
    return iam.PolicyStatement(actions=actions, resources=resources)
