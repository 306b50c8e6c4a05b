"""What on-call may do to this stack, as two IAM managed policies to attach to their role (named
with the region too: IAM names are the account's, and a stack of the same name may be deployed
in another region):

- `<stack>-operator-read-<region>`: `umavez status`, `trace`, `show waiting` and `dlq list`,
  which only read (a DLQ listing hides each letter for a moment and shows it again:
  ChangeMessageVisibility);
- `<stack>-operator-repair-<region>`: `umavez dlq redrive` and `outbox revive`, which move
  letters back to the webhook queue and make dead notifications pending again.

Each grant is what those commands call on this stack's resources, as recorded while they run
(tests/support/ops_calls.py) and held against these policies by
tests/infra/test_operator_policy.py: every recorded call allowed, every grant used or listed
with its reason there. Every command also reads the stack's outputs (DescribeStacks).
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_stepfunctions as sfn
from constructs import Construct

from functions.shared import tables
from infra.constructs.pipeline import Pipeline
from infra.nag import PACK, acknowledge


class OperatorPolicies(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: Pipeline,
        state_machine: sfn.IStateMachine,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = cdk.Stack.of(self)
        ledger = pipeline.storage.ledger.table_arn
        outbox = pipeline.storage.outbox.table_arn
        due_index = f"{outbox}/index/{tables.OUTBOX_DUE_INDEX}"
        queue = pipeline.queues.queue.queue_arn
        dead_letters = pipeline.queues.dead_letters.queue_arn
        this_stack = stack.stack_id  # its ARN
        # Where `umavez trace` reads the functions' lines (FunctionLogGroups).
        function_logs = [f.log_group.log_group_arn for f in pipeline.functions]

        def allow(actions: list[str], resources: list[str]) -> iam.PolicyStatement:
            return iam.PolicyStatement(actions=actions, resources=resources)

        read_anywhere = allow(
            ["logs:GetQueryResults", "cloudwatch:DescribeAlarms", "cloudwatch:GetMetricStatistics"],
            ["*"],
        )
        self.read = iam.ManagedPolicy(
            self,
            "Read",
            managed_policy_name=f"{stack.stack_name}-operator-read-{cdk.Aws.REGION}",
            description="umavez status, trace, show waiting, dlq list: read this stack only",
            statements=[
                allow(["cloudformation:DescribeStacks"], [this_stack]),
                # status: the last books check, the ledger's waiting items, the due outbox
                allow(["dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"], [ledger]),
                allow(["dynamodb:BatchGetItem"], [outbox]),
                allow(["dynamodb:Query"], [due_index]),
                allow(["sqs:GetQueueAttributes"], [queue, dead_letters]),
                allow(["sqs:ReceiveMessage", "sqs:ChangeMessageVisibility"], [dead_letters]),
                allow(["states:ListExecutions"], [state_machine.state_machine_arn]),
                allow(["logs:StartQuery"], function_logs),
                # Resource-less in IAM: a query's results by its id; alarms and metrics read
                # by this stack's names (`<stack>-...`) and namespace.
                read_anywhere,
            ],
        )
        acknowledge(
            self.read,
            f"{PACK}IAM5[Resource::*]",
            "logs:GetQueryResults and CloudWatch's metric statistics take no resource; alarms"
            " are read by this stack's name prefix",
        )
        self.repair = iam.ManagedPolicy(
            self,
            "Repair",
            managed_policy_name=f"{stack.stack_name}-operator-repair-{cdk.Aws.REGION}",
            description="umavez dlq redrive, outbox revive: repair this stack only",
            statements=[
                allow(["cloudformation:DescribeStacks"], [this_stack]),
                # ChangeMessageVisibility shows again the letters it was not asked to move.
                allow(
                    ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"],
                    [dead_letters],
                ),
                allow(["sqs:SendMessage"], [queue]),
                allow(["dynamodb:Query"], [due_index]),
                allow(["dynamodb:UpdateItem"], [outbox]),
            ],
        )
