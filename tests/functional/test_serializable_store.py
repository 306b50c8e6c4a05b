"""The local DynamoDBs the parallel tests use are serializable, like the real one: moto behind
the lock of tests/support/clients.py, and the in-memory store (devstack/memory/) as it is."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest
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


@pytest.mark.parametrize(
    ("tables", "wrapped"),
    [("moto_dynamodb", serialized), ("dynamodb", lambda client: client)],
    ids=["moto-serialized", "memory-bare"],
)
def test_concurrent_identical_transactions_have_exactly_one_winner(
    request: pytest.FixtureRequest,
    tables: str,
    wrapped: Callable[[DynamoDBClient], DynamoDBClient],
) -> None:
    # Given a client the parallel tests use: moto behind its lock, or the memory store bare
    dynamodb: DynamoDBClient = request.getfixturevalue(tables)
    store = wrapped(dynamodb)

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
