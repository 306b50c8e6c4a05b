"""The SNS topic every alarm notifies, encrypted with a key CloudWatch may use (it cannot use
the AWS-managed SNS key), both granted to this account's alarms only."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.removal import kept


def alarm_topic_key(scope: Construct, retain: bool) -> kms.Key:
    """A key CloudWatch may encrypt alarm notifications with, only for this account's alarms
    in this region (the AWS-managed SNS key grants no service principal: alarms were dropped)."""
    key = kms.Key(
        scope,
        "AlarmTopicKey",
        description="umavez alarm topic: CloudWatch alarms publish with it",
        enable_key_rotation=True,
        removal_policy=kept(retain),
    )
    key.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchAlarmsPublishToTheTopic",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy, "*" is this key
            conditions=on_behalf_of_this_accounts_alarms(),
        )
    )
    return key


def on_behalf_of_this_accounts_alarms() -> dict[str, dict[str, str]]:
    """A service principal's grant, limited to CloudWatch alarms of this account and region
    (the confused-deputy guard: another account's alarm cannot use it)."""
    return {
        "StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID},
        "ArnLike": {
            "aws:SourceArn": (
                f"arn:{cdk.Aws.PARTITION}:cloudwatch:{cdk.Aws.REGION}:{cdk.Aws.ACCOUNT_ID}:alarm:*"
            )
        },
    }


def alarm_topic(scope: Construct, key: kms.IKey) -> sns.Topic:
    """The topic every alarm notifies. Its policy must allow CloudWatch to publish: a topic
    policy replaces SNS's default one, and `enforce_ssl` writes a policy holding only the
    TLS-only Deny, so without this Allow every alarm action fails with "not authorized to
    perform SNS:Publish" and no alarm reaches anyone."""
    topic = sns.Topic(
        scope, "Alarms", display_name="umavez alarms", enforce_ssl=True, master_key=key
    )
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions=on_behalf_of_this_accounts_alarms(),
        )
    )
    return topic
