"""The ledger and the outbox tables, with the key names the functions and tests use."""

from __future__ import annotations

from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from functions.shared import tables
from infra.removal import kept_protected


class Storage(Construct):
    """Both tables expire items through `expires_at` (TTL): the functions set it only on what
    may go (delivery audits, sent notifications), never on an effect key or an order."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        pitr = dynamodb.PointInTimeRecoverySpecification(point_in_time_recovery_enabled=True)
        removal = kept_protected(retain)
        self.ledger = dynamodb.TableV2(
            self,
            "Ledger",
            partition_key=dynamodb.Attribute(
                name=tables.PARTITION_KEY, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=tables.SORT_KEY, type=dynamodb.AttributeType.STRING),
            # Orders by the hour they last changed: the reconciliation checks only those.
            global_secondary_indexes=[
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=tables.LEDGER_CHANGES_INDEX,
                    partition_key=dynamodb.Attribute(
                        name=tables.CHANGES_BUCKET, type=dynamodb.AttributeType.STRING
                    ),
                    projection_type=dynamodb.ProjectionType.KEYS_ONLY,
                ),
            ],
            time_to_live_attribute=tables.EXPIRES_AT,
            billing=dynamodb.Billing.on_demand(),
            point_in_time_recovery_specification=pitr,
            deletion_protection=retain,
            removal_policy=removal,
        )
        # The sender reads new items only, so the stream carries the new image (TTL deletions
        # reach the stream as REMOVE records, which the sender's filter drops).
        self.outbox = dynamodb.TableV2(
            self,
            "Outbox",
            partition_key=dynamodb.Attribute(
                name=tables.OUTBOX_KEY, type=dynamodb.AttributeType.STRING
            ),
            dynamo_stream=dynamodb.StreamViewType.NEW_IMAGE,
            global_secondary_indexes=[
                dynamodb.GlobalSecondaryIndexPropsV2(
                    index_name=tables.OUTBOX_DUE_INDEX,
                    partition_key=dynamodb.Attribute(
                        name=tables.OUTBOX_DUE_BUCKET, type=dynamodb.AttributeType.STRING
                    ),
                    sort_key=dynamodb.Attribute(
                        name=tables.OUTBOX_DUE_AT, type=dynamodb.AttributeType.NUMBER
                    ),
                    projection_type=dynamodb.ProjectionType.KEYS_ONLY,
                ),
            ],
            time_to_live_attribute=tables.EXPIRES_AT,
            billing=dynamodb.Billing.on_demand(),
            point_in_time_recovery_specification=pitr,
            deletion_protection=retain,
            removal_policy=removal,
        )
