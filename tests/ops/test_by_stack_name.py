"""The operator's commands find a deployed stack by its name, as SAM CLI does: its tables and
queues from its CloudFormation outputs, never copied by hand. On moto's CloudFormation, with
the stack's resources created under the names its outputs give."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import boto3
import pytest

from devstack.provider_apis import FakeProviderApis
from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
)
from fixtures import stripe
from fixtures.shapes import EVENTS_DIR, shape
from functions.asaas.models import BRAZIL
from functions.shared import tables
from ops.cli import main
from ops.cli.mistakes import MISTAKE
from tests.ops.conftest import NAMES, STACK

T0 = 1_764_460_800


def test_show_waiting_reads_the_ledger_the_stack_names(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a delivery waiting in the deployed ledger (a refund whose payment no order has)
    intent = park_a_waiting_refund()

    # When the operator asks by the stack's name only
    code = main(["show", "waiting", "--json", "--stack-name", STACK, "--region", "us-east-1"])

    # Then it is read from the table the stack's outputs name
    assert code == 0
    [waiting] = json.loads(capsys.readouterr().out)
    assert (waiting["event_id"], waiting["waits_for"]) == ("evt_waiting", [intent])


def park_a_waiting_refund() -> str:
    """A refund whose payment no order has, waiting in the deployed ledger: its payment."""
    intent = stripe.unique("pi")
    body = stripe.refund_created(intent, stripe.unique("re"), 1000, T0)
    boto3.client("dynamodb").put_item(
        TableName=NAMES.ledger,
        Item={
            "pk": {"S": "WAITING"},
            "sk": {"S": "stripe#evt_waiting"},
            "provider": {"S": "stripe"},
            "event_id": {"S": "evt_waiting"},
            "event_type": {"S": "refund.created"},
            "body": {"S": body},
            "objects": {"L": [{"S": intent}]},
            "waiting_since": {"N": str(T0)},
        },
    )
    return intent


def test_attach_binds_in_the_ledger_and_redrives_to_the_queue_the_stack_names(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a refund waiting for its payment in the deployed ledger, and the order it belongs to
    intent, order = park_a_waiting_refund(), stripe.unique("ord")
    boto3.client("dynamodb").put_item(
        TableName=NAMES.ledger,
        Item={"pk": {"S": tables.order_pk(order)}, "sk": {"S": tables.ORDER_SORT}},
    )

    # When the operator attaches the payment to its order by the stack's name, then reads it
    by_name = ["--stack-name", STACK, "--region", "us-east-1"]
    code = main(["attach", "stripe", intent, order, *by_name])
    shown = [
        main(["show", *what, "--json", *by_name]) for what in (("order", order), ("unmatched",))
    ]

    # Then the binding is in the stack's ledger, the delivery in its webhook queue, and the
    # order and the unmatched list were read from that ledger
    assert (code, shown) == (0, [0, 0])
    binding = boto3.client("dynamodb").get_item(
        TableName=NAMES.ledger, Key={"pk": {"S": f"REF#stripe#{intent}"}, "sk": {"S": "REF"}}
    )["Item"]
    assert binding["order_id"]["S"] == order
    [redriven] = boto3.client("sqs").receive_message(QueueUrl=deployed["WebhookQueueUrl"])[
        "Messages"
    ]
    assert intent in redriven["Body"]


def test_replay_reads_the_key_and_enqueues_into_the_queue_the_stack_names(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack's Stripe API key, Mercado Pago token and Asaas key, and a payment each
    # provider knows, never delivered
    secrets = boto3.client("secretsmanager")
    secrets.create_secret(
        Name="umavez/prod/stripe/api-key", SecretString=STRIPE_DEVELOPMENT_API_KEY
    )
    secrets.create_secret(
        Name="umavez/prod/mercadopago/access-token", SecretString=MERCADOPAGO_DEVELOPMENT_TOKEN
    )
    secrets.create_secret(Name="umavez/prod/asaas/api-key", SecretString=ASAAS_DEVELOPMENT_API_KEY)
    now = int(time.time())
    apis = FakeProviderApis().start()
    try:
        apis.events.append(
            json.loads(
                stripe.payment_intent_succeeded(
                    stripe.unique("ord"), stripe.unique("pi"), 5000, now
                )
            )
        )
        payment = json.loads((EVENTS_DIR / "mercadopago" / "payment.json").read_text())
        payment["date_last_updated"] = datetime.fromtimestamp(now, tz=UTC).isoformat()
        apis.payments[str(payment["id"])] = payment
        received: dict[str, object] = shape("asaas/PAYMENT_RECEIVED.json")["payment"]
        today = datetime.fromtimestamp(now, tz=BRAZIL).date().isoformat()
        received.update({"dateCreated": today, "paymentDate": today})
        apis.asaas_payments[str(received["id"])] = received

        # When the operator replays the last hour of each provider by the stack's name
        since = datetime.fromtimestamp(now - 3600, tz=UTC).isoformat()
        window = ["--since", since, "--wait", "0", "--api-url", apis.url]
        by_name = ["--stack-name", STACK, "--region", "us-east-1"]
        codes = [
            main(["replay", source, *window, *by_name])
            for source in ("stripe", "mercadopago", "asaas")
        ]
    finally:
        apis.stop()

    # Then each was enqueued into the stack's webhook queue
    assert codes == [0, 0, 0]
    sqs = boto3.client("sqs")
    enqueued = sqs.receive_message(
        QueueUrl=deployed["WebhookQueueUrl"], MaxNumberOfMessages=10, MessageAttributeNames=["All"]
    )
    providers = [m["MessageAttributes"]["provider"]["StringValue"] for m in enqueued["Messages"]]
    assert sorted(providers) == ["asaas", "mercadopago", "stripe"]


def test_dlq_list_reads_the_dead_letter_queue_the_stack_names(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one dead letter in the deployed DLQ
    boto3.client("sqs").send_message(
        QueueUrl=deployed["DeadLetterQueueUrl"],
        MessageBody="{}",
        MessageAttributes={"provider": {"DataType": "String", "StringValue": "stripe"}},
    )

    # When the operator lists the DLQ by the stack's name
    code = main(["dlq", "list", "--json", "--stack-name", STACK, "--region", "us-east-1"])

    # Then the message is listed from that queue
    assert code == 0
    [letter] = json.loads(capsys.readouterr().out)
    assert letter["provider"] == "stripe"


def test_dlq_redrive_moves_the_letters_back_to_the_queue_the_stack_names(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given one dead letter in the deployed DLQ
    sqs = boto3.client("sqs")
    sqs.send_message(
        QueueUrl=deployed["DeadLetterQueueUrl"],
        MessageBody="{}",
        MessageAttributes={"provider": {"DataType": "String", "StringValue": "stripe"}},
    )

    # When the operator redrives the DLQ by the stack's name
    code = main(["dlq", "redrive", "--all", "--stack-name", STACK, "--region", "us-east-1"])

    # Then the letter is in the webhook queue, with its attributes, and no longer in the DLQ
    assert code == 0
    [moved] = sqs.receive_message(
        QueueUrl=deployed["WebhookQueueUrl"], MessageAttributeNames=["All"]
    )["Messages"]
    assert moved["MessageAttributes"]["provider"]["StringValue"] == "stripe"
    left = sqs.receive_message(QueueUrl=deployed["DeadLetterQueueUrl"]).get("Messages", [])
    assert left == []


def test_a_physical_name_given_still_wins_over_the_outputs(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # When a command names another table than the stack's (an odd set-up)
    by_name = ["--stack-name", STACK, "--region", "us-east-1"]
    code = main(["show", "waiting", *by_name, "--ledger-table", "Another-Ledger"])

    # Then that table is read (here it does not exist: said in one line)
    assert code == MISTAKE
    assert "Check the table or queue name" in capsys.readouterr().err


def test_a_stack_that_does_not_exist_is_said_in_one_line(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["show", "waiting", "--stack-name", "Umavez-prdo", "--region", "us-east-1"])

    assert code == MISTAKE
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert "Umavez-prdo" in err
    assert "check --stack-name and --region" in err
