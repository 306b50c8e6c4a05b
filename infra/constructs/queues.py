"""The webhook queue and its dead-letter queue: encrypted, TLS only."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from infra.settings import MAX_RECEIVE_COUNT


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
        self, scope: Construct, construct_id: str, *, consumer_timeout: cdk.Duration
    ) -> None:
        super().__init__(scope, construct_id)
        self.dead_letters = secure_queue(
            self, "DeadLetters", retention_period=cdk.Duration.days(14)
        )
        self.visibility_timeout = cdk.Duration.seconds(6 * consumer_timeout.to_seconds())
        self.queue = secure_queue(
            self,
            "Webhooks",
            # AWS's rule for Lambda consumers: at least six times the function's timeout.
            visibility_timeout=self.visibility_timeout,
            retention_period=cdk.Duration.days(4),
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letters, max_receive_count=MAX_RECEIVE_COUNT
            ),
        )
