"""The in-memory DynamoDB's streams (`devstack/memory/streams.py`) and the WSGI app that serves
the store over HTTP (`devstack/memory/wsgi.py`): what a write records, what a refused write
does not, and the records read back through boto3's own clients on loopback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError
from werkzeug.serving import make_server

from devstack.memory.operations import MemoryDynamoDB
from devstack.memory.tables import DynamoError
from devstack.memory.wsgi import MemoryApp, dispatching
from devstack.resources import client

TABLE = "streamed"


def streamed_table(store: MemoryDynamoDB, view: str = "NEW_AND_OLD_IMAGES") -> str:
    """A table keyed by `pk` whose stream carries `view`; its stream's ARN."""
    created = store.handle(
        "CreateTable",
        {
            "TableName": TABLE,
            "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
            "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST",
            "StreamSpecification": {"StreamEnabled": True, "StreamViewType": view},
        },
    )
    return str(created["TableDescription"]["LatestStreamArn"])


def records(store: MemoryDynamoDB, arn: str, **start: Any) -> list[dict[str, Any]]:
    """Every record of the stream, from TRIM_HORIZON (or `start`'s iterator type) on."""
    shard = store.handle_streams("DescribeStream", {"StreamArn": arn})["StreamDescription"]
    iterator = store.handle_streams(
        "GetShardIterator",
        {
            "StreamArn": arn,
            "ShardId": shard["Shards"][0]["ShardId"],
            "ShardIteratorType": "TRIM_HORIZON",
            **start,
        },
    )["ShardIterator"]
    found: list[dict[str, Any]] = []
    while True:
        page = store.handle_streams("GetRecords", {"ShardIterator": iterator, "Limit": 2})
        found += page["Records"]
        if not page["Records"]:
            return found
        iterator = page["NextShardIterator"]


def put(pk: str, **fields: Any) -> dict[str, Any]:
    return {"TableName": TABLE, "Item": {"pk": {"S": pk}, **fields}}


def test_writes_record_in_write_order_with_the_images_of_the_view_type() -> None:
    # Given a table streaming old and new images
    store = MemoryDynamoDB()
    arn = streamed_table(store)

    # When an item is put, updated, and deleted, and another put
    store.handle("PutItem", put("a", n={"N": "1"}))
    store.handle(
        "UpdateItem",
        {
            "TableName": TABLE,
            "Key": {"pk": {"S": "a"}},
            "UpdateExpression": "SET n = :two",
            "ExpressionAttributeValues": {":two": {"N": "2"}},
        },
    )
    store.handle("DeleteItem", {"TableName": TABLE, "Key": {"pk": {"S": "a"}}})
    store.handle("PutItem", put("b"))

    # Then the stream holds one record per write, in order, each with its images
    read = records(store, arn)
    assert [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in read] == [
        ("INSERT", "a"),
        ("MODIFY", "a"),
        ("REMOVE", "a"),
        ("INSERT", "b"),
    ]
    images = [(r["dynamodb"].get("OldImage"), r["dynamodb"].get("NewImage")) for r in read]
    assert images == [
        (None, {"pk": {"S": "a"}, "n": {"N": "1"}}),
        ({"pk": {"S": "a"}, "n": {"N": "1"}}, {"pk": {"S": "a"}, "n": {"N": "2"}}),
        ({"pk": {"S": "a"}, "n": {"N": "2"}}, None),
        (None, {"pk": {"S": "b"}}),
    ]
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in read]
    assert sequence == sorted(sequence)
    assert len(set(sequence)) == 4
    assert {r["dynamodb"]["StreamViewType"] for r in read} == {"NEW_AND_OLD_IMAGES"}


def test_a_keys_only_stream_carries_no_image_and_a_new_image_stream_no_old_one() -> None:
    # Given two stores, one streaming keys only and one new images
    for view, expected in (("KEYS_ONLY", set()), ("NEW_IMAGE", {"NewImage"})):
        store = MemoryDynamoDB()
        arn = streamed_table(store, view)

        # When an item is written twice
        store.handle("PutItem", put("k", v={"S": "1"}))
        store.handle("PutItem", put("k", v={"S": "2"}))

        # Then each record holds the keys, and only the images the view asks for
        for record in records(store, arn):
            assert record["dynamodb"]["Keys"] == {"pk": {"S": "k"}}
            assert {"NewImage", "OldImage"} & set(record["dynamodb"]) == expected


def test_a_conditional_put_that_fails_and_a_cancelled_transaction_record_nothing() -> None:
    # Given a streamed table holding one item, its stream read to the end
    store = MemoryDynamoDB()
    arn = streamed_table(store)
    store.handle("PutItem", put("held"))
    before = records(store, arn)

    # When a conditional put finds the item, and a transaction's second condition fails
    with pytest.raises(DynamoError, match="ConditionalCheckFailed"):
        store.handle("PutItem", {**put("held"), "ConditionExpression": "attribute_not_exists(pk)"})
    with pytest.raises(DynamoError) as cancelled:
        store.handle(
            "TransactWriteItems",
            {
                "TransactItems": [
                    {"Put": put("new")},
                    {"Put": {**put("held"), "ConditionExpression": "attribute_not_exists(pk)"}},
                ]
            },
        )

    # Then neither wrote a record (nor an item), and a transaction that holds records each write
    assert cancelled.value.code == "TransactionCanceledException"
    assert records(store, arn) == before
    assert store.handle("GetItem", {"TableName": TABLE, "Key": {"pk": {"S": "new"}}}) == {}
    store.handle(
        "TransactWriteItems",
        {
            "TransactItems": [
                {"Put": put("new")},
                {"Delete": {"TableName": TABLE, "Key": {"pk": {"S": "held"}}}},
            ]
        },
    )
    assert [r["eventName"] for r in records(store, arn)] == ["INSERT", "INSERT", "REMOVE"]


def test_iterators_start_where_their_type_says() -> None:
    # Given a stream of three records
    store = MemoryDynamoDB()
    arn = streamed_table(store)
    for pk in ("x", "y", "z"):
        store.handle("PutItem", put(pk))
    second = records(store, arn)[1]["dynamodb"]["SequenceNumber"]

    # When read at, after the second record's number, and from the latest
    at = records(store, arn, ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber=second)
    after = records(store, arn, ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=second)
    latest = records(store, arn, ShardIteratorType="LATEST")

    # Then each starts where it says
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in at] == ["y", "z"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in after] == ["z"]
    assert latest == []


def test_an_emptied_store_keeps_no_records_and_an_unknown_stream_is_not_found() -> None:
    # Given a stream with a record
    store = MemoryDynamoDB()
    arn = streamed_table(store)
    store.handle("PutItem", put("a"))

    # When the store is emptied
    store.clear()

    # Then the stream is empty, and another table's stream is not found
    assert records(store, arn) == []
    with pytest.raises(DynamoError, match="ResourceNotFoundException"):
        store.handle_streams("DescribeStream", {"StreamArn": arn.replace(TABLE, "other")})


@pytest.fixture
def served() -> Iterator[tuple[str, MemoryApp]]:
    """The stores' app on loopback, their services to it and nothing else."""

    def elsewhere(environ: Any, start_response: Any) -> list[bytes]:
        start_response("418 I'm a teapot", [("Content-Type", "text/plain")])
        return [b"not the store's"]

    app = MemoryApp()
    server = make_server("127.0.0.1", 0, dispatching(app, elsewhere), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", app
    finally:
        server.shutdown()
        thread.join()


def test_boto3s_clients_read_the_served_store_and_its_stream(
    served: tuple[str, MemoryApp],
) -> None:
    # Given the served store, and boto3's DynamoDB and DynamoDB Streams clients of it
    url, app = served
    dynamodb, streams = client("dynamodb", url), client("dynamodbstreams", url)
    arn = streamed_table(app.store)

    # When an item with a binary value is written, and one refused by its condition
    dynamodb.put_item(**put("a", raw={"B": b"\x00\xff"}, n={"N": "1.50"}))
    with pytest.raises(ClientError) as refused:
        dynamodb.put_item(**put("a"), ConditionExpression="attribute_not_exists(pk)")
    listed = streams.list_streams(TableName=TABLE)["Streams"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    read = streams.get_records(ShardIterator=iterator)

    # Then the refusal is DynamoDB's error, and the stream holds the one write, as written
    assert refused.value.response["Error"]["Code"] == "ConditionalCheckFailedException"
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert [s["StreamArn"] for s in listed] == [arn]
    assert [r["dynamodb"]["NewImage"] for r in read["Records"]] == [
        {"pk": {"S": "a"}, "raw": {"B": b"\x00\xff"}, "n": {"N": "1.50"}}
    ]
    assert streams.get_records(ShardIterator=read["NextShardIterator"])["Records"] == []


def test_the_dispatch_sends_every_other_request_elsewhere(served: tuple[str, MemoryApp]) -> None:
    # Given the served store, When a Secrets Manager client calls it
    url, _ = served
    with pytest.raises(ClientError) as answered:
        client("secretsmanager", url).list_secrets()

    # Then the other app answered
    assert answered.value.response["ResponseMetadata"]["HTTPStatusCode"] == 418
