"""The notification sinks on moto, read back as "how many times did each key arrive"."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import TYPE_CHECKING

import boto3
from moto.ses.models import ses_backends

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

EMAIL_SENDER = "loja@example.com"
MOTO_ACCOUNT_ID = "123456789012"  # the account every moto backend answers for
REFERENCE = re.compile(r"Reference: (obx_[0-9a-f]{64})")


class Sinks:
    """An EventBridge bus whose rule copies every umavez event to a queue, and SES."""

    def __init__(self, bus_name: str = "umavez-test-bus") -> None:
        self.bus_name = bus_name
        events = boto3.client("events")
        events.create_event_bus(Name=bus_name)
        self._sqs: SQSClient = boto3.client("sqs")
        self._queue_url = self._sqs.create_queue(QueueName="umavez-test-events")["QueueUrl"]
        queue_arn = self._sqs.get_queue_attributes(
            QueueUrl=self._queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        events.put_rule(
            Name="all", EventBusName=bus_name, EventPattern=json.dumps({"source": ["umavez"]})
        )
        events.put_targets(
            Rule="all", EventBusName=bus_name, Targets=[{"Id": "q", "Arn": queue_arn}]
        )
        boto3.client("sesv2").create_email_identity(EmailIdentity=EMAIL_SENDER)
        self._events_seen: Counter[str] = Counter()
        self.details: dict[str, dict[str, object]] = {}

    def events_by_key(self) -> Counter[str]:
        while messages := self._sqs.receive_message(
            QueueUrl=self._queue_url, MaxNumberOfMessages=10
        ).get("Messages", []):
            for message in messages:
                detail = json.loads(message["Body"])["detail"]
                self._events_seen[detail["idempotency_key"]] += 1
                self.details[detail["idempotency_key"]] = detail
                self._sqs.delete_message(
                    QueueUrl=self._queue_url, ReceiptHandle=message["ReceiptHandle"]
                )
        return Counter(self._events_seen)

    @staticmethod
    def emails() -> dict[str, tuple[list[str], str]]:
        """Outbox key -> (to addresses, body) of the e-mails SES took."""
        sent = ses_backends[MOTO_ACCOUNT_ID]["us-east-1"].sent_messages
        return {
            key: (list(message.destinations["ToAddresses"]), message.body)
            for message in sent
            for key in REFERENCE.findall(message.body)
        }

    @staticmethod
    def emails_by_key() -> Counter[str]:
        sent = ses_backends[MOTO_ACCOUNT_ID]["us-east-1"].sent_messages
        return Counter(key for message in sent for key in REFERENCE.findall(message.body))
