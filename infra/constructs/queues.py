"""The webhook queue and its dead-letter queue: encrypted, TLS only."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.removal import kept
from infra.settings import (
    MAX_RECEIVE_COUNT,
    VISIBILITY_TIMEOUT_FACTOR,
    WEBHOOK_MESSAGE_MAX_BYTES,
    WEBHOOK_QUEUE_RETENTION_DAYS,
)


def secure_queue(scope: Construct, construct_id: str, **props: object) -> sqs.Queue:
    return sqs.Queue(
        scope,
        construct_id,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        enforce_ssl=True,
        **props,  # type: ignore[arg-type]
    )


class WebhookQueues(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        consumer_timeout: cdk.Duration,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        # Accepted deliveries live only here until processed: a stack deletion keeps them.
        removal = kept(retain)
        stack = cdk.Stack.of(self)
        # The DLQ names the one queue allowed to dead-letter into it (and be redriven from it).
        # It names it by ARN built from a fixed name: a reference to the queue would make a
        # cycle, since the queue's redrive policy already references the DLQ.
        queue_name = f"{stack.stack_name}-webhooks"
        queue_arn = stack.format_arn(
            service="sqs", resource=queue_name, arn_format=cdk.ArnFormat.NO_RESOURCE_NAME
        )
        self.dead_letters = secure_queue(
            self,
            "DeadLetters",
            retention_period=cdk.Duration.days(14),
            max_message_size_bytes=WEBHOOK_MESSAGE_MAX_BYTES,
            removal_policy=removal,
            redrive_allow_policy=sqs.RedriveAllowPolicy(
                redrive_permission=sqs.RedrivePermission.BY_QUEUE,
                source_queues=[sqs.Queue.from_queue_arn(self, "WebhooksByName", queue_arn)],
            ),
        )
        self.visibility_timeout = cdk.Duration.seconds(
            VISIBILITY_TIMEOUT_FACTOR * consumer_timeout.to_seconds()
        )
        self.queue = secure_queue(
            self,
            "Webhooks",
            queue_name=queue_name,
            # AWS's rule for Lambda consumers: at least six times the function's timeout.
            visibility_timeout=self.visibility_timeout,
            retention_period=cdk.Duration.days(WEBHOOK_QUEUE_RETENTION_DAYS),
            max_message_size_bytes=WEBHOOK_MESSAGE_MAX_BYTES,
            removal_policy=removal,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=MAX_RECEIVE_COUNT
            ),
        )
