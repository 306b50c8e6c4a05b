"""The pipeline after ingest, in-process: the tables (on moto, or on the project's own
in-memory DynamoDB, devstack/memory/), the webhook queue and its DLQ on moto (the stack's
redrive policy), the providers' fake APIs on loopback, the secrets the stack names, and the
real process Lambda fed the way its SQS event source mapping feeds it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from moto import mock_aws

from devstack.memory.hook import MOTO_PASSES_DYNAMODB, memory_dynamodb
from devstack.memory.operations import MemoryDynamoDB
from devstack.provider_apis import FakeProviderApis
from fixtures.lambda_events import FakeLambdaContext, sqs_event, sqs_record
from functions.process import handler, wiring
from functions.shared.tables import create_table_requests
from infra.settings import MAX_RECEIVE_COUNT, PROCESS_BATCH_SIZE
from tests.support.clients import serialized
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

STAGE = "test"
STRIPE_KEY = "rk_test_pipeline_only"
MERCADOPAGO_TOKEN = "APP_USR-pipeline-test-only"
ASAAS_KEY = "aact_pipeline_test_only"
PROCESS_ROUNDS = 60


@dataclass
class Pipeline:
    world: World
    sqs: SQSClient
    queue_url: str
    dead_letter_url: str
    apis: FakeProviderApis
    processed: list[MessageTypeDef] = field(default_factory=list)
    # The in-memory DynamoDB the tables are on, if they are not on moto.
    memory: MemoryDynamoDB | None = None

    def process(self) -> int:
        """Feeds the process Lambda until the queue is empty; returns how many records it got.

        The queue's visibility timeout is 0: a failed record comes back at once, and after
        `MAX_RECEIVE_COUNT` receives SQS moves it to the DLQ, as in the stack.
        """
        handled = 0
        for _ in range(PROCESS_ROUNDS):
            messages = self.sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=PROCESS_BATCH_SIZE,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            if not messages:
                return handled
            self.processed += messages
            response = handler.lambda_handler(
                sqs_event(*map(_lambda_record, messages)), FakeLambdaContext()
            )
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            for message in messages:
                if message["MessageId"] not in failed:
                    self.sqs.delete_message(
                        QueueUrl=self.queue_url, ReceiptHandle=message["ReceiptHandle"]
                    )
            handled += len(messages)
        raise AssertionError(f"the queue did not empty in {PROCESS_ROUNDS} rounds")

    def attributes(self, message: MessageTypeDef) -> dict[str, str]:
        return {
            name: value["StringValue"]
            for name, value in message.get("MessageAttributes", {}).items()
        }

    def dead_letters(self) -> int:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=self.dead_letter_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return sum(int(n) for n in attributes.values())


def _lambda_record(message: MessageTypeDef) -> dict[str, Any]:
    attributes = {n: v["StringValue"] for n, v in message.get("MessageAttributes", {}).items()}
    receives = int(message.get("Attributes", {}).get("ApproximateReceiveCount", 1))
    record = sqs_record(message["Body"], attributes, receives)
    record |= {"messageId": message["MessageId"], "receiptHandle": message["ReceiptHandle"]}
    return record


@contextmanager
def pipeline_on_moto(
    monkeypatch: pytest.MonkeyPatch, *, tables_in_memory: bool = False
) -> Iterator[Pipeline]:
    """The pipeline; with `tables_in_memory`, its tables on the in-memory DynamoDB (its
    contract with moto: tests/devstack/test_memory_store.py), ten times cheaper a request."""
    apis = FakeProviderApis(
        mercadopago_token=MERCADOPAGO_TOKEN, stripe_key=STRIPE_KEY, asaas_key=ASAAS_KEY
    ).start()
    moto = mock_aws(config=MOTO_PASSES_DYNAMODB) if tables_in_memory else mock_aws()
    with moto, memory_dynamodb() if tables_in_memory else nullcontext() as memory:
        dynamodb = boto3.client("dynamodb")
        for request in create_table_requests(TABLES):
            dynamodb.create_table(**request)
        sqs = boto3.client("sqs")
        dead_letter_url = sqs.create_queue(QueueName="test-dead-letters")["QueueUrl"]
        dead_letter_arn = sqs.get_queue_attributes(
            QueueUrl=dead_letter_url, AttributeNames=["QueueArn"]
        )["Attributes"]["QueueArn"]
        queue_url = sqs.create_queue(
            QueueName="test-webhooks",
            Attributes={
                "VisibilityTimeout": "0",
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
                ),
            },
        )["QueueUrl"]
        secrets = boto3.client("secretsmanager")
        for name, value in (
            ("stripe/api-key", STRIPE_KEY),
            ("mercadopago/access-token", MERCADOPAGO_TOKEN),
            ("asaas/api-key", ASAAS_KEY),
        ):
            secrets.create_secret(Name=f"umavez/{STAGE}/{name}", SecretString=value)
        environment = {
            "LEDGER_TABLE": TABLES.ledger,
            "OUTBOX_TABLE": TABLES.outbox,
            "WEBHOOK_QUEUE_URL": queue_url,
            "STRIPE_API_KEY_SECRET": f"umavez/{STAGE}/stripe/api-key",
            "MERCADOPAGO_ACCESS_TOKEN_SECRET": f"umavez/{STAGE}/mercadopago/access-token",
            "STRIPE_API_URL": apis.url,
            "MERCADOPAGO_API_URL": apis.url,
            "ASAAS_API_KEY_SECRET": f"umavez/{STAGE}/asaas/api-key",
            "ASAAS_API_URL": apis.url,
        }
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        wiring.effect_processor.cache_clear()
        wiring.waiting_room.cache_clear()
        wiring.failure_records.cache_clear()
        # The in-memory store is serializable by construction; moto needs the lock.
        client = dynamodb if memory is not None else serialized(dynamodb)
        world = World(client, TABLES, lambda db, names: wiring.effect_processor())
        try:
            yield Pipeline(world, sqs, queue_url, dead_letter_url, apis, memory=memory)
        finally:
            wiring.effect_processor.cache_clear()
            wiring.waiting_room.cache_clear()
            wiring.failure_records.cache_clear()
            apis.stop()
