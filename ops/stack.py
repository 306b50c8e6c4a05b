"""A deployed stack found by its name, as SAM CLI finds one: its tables, queues and stage read
from its CloudFormation outputs, so an operator never copies physical names by hand."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, Final

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE

# Where each option of the commands comes from: the stack's output of that name.
FROM_OUTPUTS: Final = {
    "ledger_table": "LedgerTable",
    "outbox_table": "OutboxTable",
    "queue_url": "WebhookQueueUrl",
    "dlq_url": "DeadLetterQueueUrl",
    "stage": "Stage",
    "state_machine_arn": "ReconciliationStateMachineArn",
}
# What an option holds when the operator did not give it: only those are filled in, so a
# physical name given on the command line still wins (odd set-ups).
UNSET: Final = frozenset({None, DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE})


def stack_outputs(cloudformation: Any, stack_name: str) -> dict[str, str]:
    """The stack's outputs by key (DescribeStacks; a stack that does not exist raises
    CloudFormation's ValidationError, which the CLI answers in one line)."""
    [stack] = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def point_at_stack(args: argparse.Namespace, outputs: Mapping[str, str]) -> None:
    """The command's options filled from the stack's outputs, pointed at AWS."""
    args.endpoint_url = "aws"
    for option, output in FROM_OUTPUTS.items():
        if hasattr(args, option) and getattr(args, option) in UNSET and output in outputs:
            setattr(args, option, outputs[output])


def resolve(args: argparse.Namespace) -> None:
    """`--stack-name NAME [--region R] [--profile P]`: every client of the command uses that
    profile and region, and its resources are the stack's."""
    import boto3

    boto3.setup_default_session(profile_name=args.profile, region_name=args.region)
    cloudformation = boto3.client("cloudformation")
    point_at_stack(args, stack_outputs(cloudformation, args.stack_name))
    if hasattr(args, "stack_created_at"):  # status: a stack without a run yet, since when
        [stack] = cloudformation.describe_stacks(StackName=args.stack_name)["Stacks"]
        args.stack_created_at = stack["CreationTime"].timestamp()
