"""The operator's commands find a deployed stack by its name, as SAM CLI does: its tables and
queues from its CloudFormation outputs, never copied by hand. On moto's CloudFormation, with
the stack's resources created under the names its outputs give."""

from __future__ import annotations

import json

import boto3
import pytest

from fixtures import stripe
from ops.cli import main
from ops.cli.mistakes import MISTAKE
from tests.ops.conftest import NAMES, STACK

T0 = 1_764_460_800


def test_show_waiting_reads_the_ledger_the_stack_names(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a delivery waiting in the deployed ledger (a refund whose payment no order has)
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

    # When the operator asks by the stack's name only
    code = main(["show", "waiting", "--json", "--stack-name", STACK, "--region", "us-east-1"])

    # Then it is read from the table the stack's outputs name
    assert code == 0
    [waiting] = json.loads(capsys.readouterr().out)
    assert (waiting["event_id"], waiting["waits_for"]) == ("evt_waiting", [intent])


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
