"""Exactly what a function may do: statements naming the actions its code calls and the resources
it calls them on (tests/infra/test_permissions.py holds each role to its recorded calls)."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_

from infra.config import sender_identities


def grant(function: lambda_.Function, actions: list[str], resources: list[str]) -> None:
    function.add_to_role_policy(iam.PolicyStatement(actions=actions, resources=resources))


def allow(
    function: lambda_.Function, table: dynamodb.ITableV2, *actions: str, index: str | None = None
) -> None:
    """Exactly these DynamoDB actions, on the table itself or one named index: no wildcards."""
    resource = f"{table.table_arn}/index/{index}" if index else table.table_arn
    function.add_to_role_policy(
        iam.PolicyStatement(actions=[f"dynamodb:{a}" for a in actions], resources=[resource])
    )


def ses_configuration_sets(name: str | None) -> list[str]:
    """SES authorizes a send against the configuration set it uses too (the identity's
    default one included): without this, every e-mail of such an identity is AccessDenied."""
    if not name:
        return []
    return [
        f"arn:{cdk.Aws.PARTITION}:ses:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:configuration-set/{name}"
    ]


def ses_identities(sender: str) -> list[str]:
    """SES checks IAM against the identity it sends as: the address when that is verified,
    else its domain. Both, so whichever the operator verified works; a display name is not
    an identity (`Loja <loja@example.com>` sends as loja@example.com or example.com)."""
    address, domain = sender_identities(sender)
    return [
        f"arn:{cdk.Aws.PARTITION}:ses:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:identity/{identity}"
        for identity in (domain, address)
    ]
