"""The local DynamoDB the parallel tests use is serializable, like the real one."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from tests.support.clients import serialized
from tests.support.world import TABLES

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CLIENTS = 8
ROUNDS = 25


def race_one_transaction(client: DynamoDBClient, key: str) -> list[str]:
    """CLIENTS threads send the same reserve-and-increment transaction; returns each result."""
    start = threading.Barrier(CLIENTS)
    results: list[str] = []

    def send() -> None:
        start.wait()
        try:
            client.transact_write_items(
                TransactItems=[
                    {
                        "Put": {
                            "TableName": TABLES.ledger,
                            "Item": {"pk": {"S": key}, "sk": {"S": "K"}},
                            "ConditionExpression": "attribute_not_exists(pk)",
                        }
                    },
                    {
                        "Update": {
                            "TableName": TABLES.ledger,
                            "Key": {"pk": {"S": "counter"}, "sk": {"S": key}},
                            "UpdateExpression": "ADD wins :one",
                            "ExpressionAttributeValues": {":one": {"N": "1"}},
                        }
                    },
                ]
            )
            results.append("committed")
        except ClientError as exc:
            results.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=send) for _ in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(results)


def test_concurrent_identical_transactions_have_exactly_one_winner(
    dynamodb: DynamoDBClient,
) -> None:
    # Given the serialized client the parallel tests use
    store = serialized(dynamodb)

    # When eight clients send the same conditional transaction at once, round after round
    rounds = [race_one_transaction(store, f"key-{n}") for n in range(ROUNDS)]

    # Then every round has exactly one winner, and its increment is the only one
    one_winner = ["TransactionCanceledException"] * (CLIENTS - 1) + ["committed"]
    assert rounds == [one_winner] * ROUNDS
    counters = [
        dynamodb.get_item(
            TableName=TABLES.ledger, Key={"pk": {"S": "counter"}, "sk": {"S": f"key-{n}"}}
        )
        for n in range(ROUNDS)
    ]
    assert [c["Item"]["wins"]["N"] for c in counters] == ["1"] * ROUNDS
