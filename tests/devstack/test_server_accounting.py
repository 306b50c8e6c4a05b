"""The local server's accounting (`--account-capacity`): every request under the function that
made it, DynamoDB units read from moto's own items; off by default."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.accounting import CALLER_HEADER
from devstack.local_aws import LocalAws
from devstack.resources import client


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    server = LocalAws(account_capacity=True).start()
    yield server
    server.stop()


def _tagged(service: str, endpoint_url: str, caller: str) -> Any:
    tagged = client(service, endpoint_url)

    def tag(request: Any, **_: Any) -> None:
        request.headers[CALLER_HEADER] = caller

    tagged.meta.events.register("before-send", tag)
    return tagged


def test_requests_are_billed_to_their_caller_with_units_from_the_items(aws: LocalAws) -> None:
    # Given a table with a keys-only index, and a client that says it is `process`
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.create_table(
        TableName="accounted",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "due", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_due",
                "KeySchema": [{"AttributeName": "due", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    process = _tagged("dynamodb", aws.endpoint_url, "process")

    # When it writes a 1.5 KB item in the index, updates it out of the index, reads it
    process.put_item(
        TableName="accounted",
        Item={"pk": {"S": "a"}, "due": {"N": "1"}, "body": {"S": "x" * 1500}},
    )
    process.update_item(
        TableName="accounted", Key={"pk": {"S": "a"}}, UpdateExpression="REMOVE due"
    )
    process.get_item(TableName="accounted", Key={"pk": {"S": "a"}}, ConsistentRead=True)

    # Then each request is under `process`, with what DynamoDB would bill
    rows = {
        (r["caller"], r["operation"]): r["units"]
        for r in aws.stats()["accounting"]
        if r["resource"] == "accounted"
    }
    put, update, get = (rows[("process", op)] for op in ("PutItem", "UpdateItem", "GetItem"))
    assert put["wru_standard:accounted"] == 2  # 1.5 KB
    assert put["wru_index:accounted/by_due"] == 1  # entered the index
    assert update["wru_standard:accounted"] == 2  # the larger of before and after
    assert update["wru_index:accounted/by_due"] == 1  # left it
    assert get == {"requests": 1, "rru_strong:accounted": 1}
    assert ("", "CreateTable") in rows  # untagged: the local stack's own
    assert aws.stats()["accounting_errors"] == 0


def test_without_the_flag_the_server_accounts_nothing() -> None:
    server = LocalAws().start()
    try:
        client("sqs", server.endpoint_url).create_queue(QueueName="q")
        stats = server.stats()
    finally:
        server.stop()
    assert "accounting" not in stats
    assert stats["requests"]["CreateQueue"] == 1
