"""The local stack's AWS is serializable and its fast transactions are atomic."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar
from unittest.mock import patch

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devstack.local_aws import YIELDING_NICENESS, LocalAws
from devstack.resources import client, provision
from tests.support.clients import queue_depth

T = TypeVar("T")
TABLE = "local-ledger"
STREAMED = "local-outbox"


@pytest.fixture(scope="module")
def aws() -> Iterator[LocalAws]:
    server = LocalAws().start()
    dynamodb = client("dynamodb", server.endpoint_url)
    dynamodb.create_table(
        TableName=TABLE,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.create_table(
        TableName=STREAMED,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    yield server
    server.stop()


def create_table(dynamodb: Any, name: str, *keys: tuple[str, str]) -> None:
    """A pay-per-request table keyed by (attribute, type) pairs: the hash key, then the range."""
    dynamodb.create_table(
        TableName=name,
        KeySchema=[
            {"AttributeName": attribute, "KeyType": kind}
            for (attribute, _), kind in zip(keys, ("HASH", "RANGE"), strict=False)
        ],
        AttributeDefinitions=[{"AttributeName": a, "AttributeType": t} for a, t in keys],
        BillingMode="PAY_PER_REQUEST",
    )


def filled_alike_and_read_by_bare_moto(
    aws: LocalAws, fill: Callable[[Any], None], read: Callable[[Any], T]
) -> tuple[Any, T]:
    """A DynamoDB client of the local server and bare moto's answer to `read`, both filled by
    `fill`."""
    local = client("dynamodb", aws.endpoint_url)
    fill(local)
    with mock_aws():
        bare = boto3.client("dynamodb", region_name="us-east-1")
        fill(bare)
        return local, read(bare)


def reserve(key: str) -> list[dict[str, Any]]:
    return [
        {
            "Put": {
                "TableName": TABLE,
                "Item": {"pk": {"S": key}},
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        },
        {
            "Update": {
                "TableName": TABLE,
                "Key": {"pk": {"S": f"{key}-count"}},
                "UpdateExpression": "ADD wins :one",
                "ExpressionAttributeValues": {":one": {"N": "1"}},
            }
        },
        {"Put": {"TableName": STREAMED, "Item": {"pk": {"S": key}}}},
    ]


def race(clients: list[Any], key: str) -> list[str]:
    """Every client sends the same transaction at the same instant; returns each result."""
    start, results = threading.Barrier(len(clients)), []

    def send(dynamodb: Any) -> None:
        start.wait()
        try:
            dynamodb.transact_write_items(TransactItems=reserve(key))
            results.append("committed")
        except ClientError as exc:
            results.append(exc.response["Error"]["Code"])

    threads = [threading.Thread(target=send, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(results)


def test_eight_clients_racing_the_same_transaction_have_one_winner(aws: LocalAws) -> None:
    # Given eight clients of the local server, each with its own connection
    clients = [client("dynamodb", aws.endpoint_url) for _ in range(8)]

    # When they send the same conditional transaction at once, round after round
    rounds = [race(clients, f"race-{n}") for n in range(15)]

    # Then each round had exactly one winner, and its increment is the only one
    assert rounds == [["TransactionCanceledException"] * 7 + ["committed"]] * 15
    counts = [
        clients[0].get_item(TableName=TABLE, Key={"pk": {"S": f"race-{n}-count"}})["Item"]["wins"][
            "N"
        ]
        for n in range(15)
    ]
    assert counts == ["1"] * 15


def test_cancelled_transaction_writes_nothing_and_streams_nothing(aws: LocalAws) -> None:
    # Given a reserved key, and the stream read to its end
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.transact_write_items(TransactItems=reserve("taken"))
    streams = client("dynamodbstreams", aws.endpoint_url)
    arn = dynamodb.describe_table(TableName=STREAMED)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    before = len(streams.get_records(ShardIterator=iterator)["Records"])

    # When a transaction whose first condition fails is sent
    with pytest.raises(ClientError) as cancelled:
        dynamodb.transact_write_items(TransactItems=reserve("taken"))

    # Then it is cancelled by position, and neither the table nor the stream changed
    reasons = [r["Code"] for r in cancelled.value.response["CancellationReasons"]]
    assert reasons == ["ConditionalCheckFailed", "None", "None"]
    count = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "taken-count"}})["Item"]["wins"][
        "N"
    ]
    assert count == "1"
    fresh = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    assert len(streams.get_records(ShardIterator=fresh)["Records"]) == before


def test_a_write_failing_midway_is_rolled_back(aws: LocalAws) -> None:
    # Given a transaction whose second write is invalid (a number added to a string)
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "text"}, "wins": {"S": "not a number"}})
    items = reserve("midway")
    items[1]["Update"]["Key"] = {"pk": {"S": "text"}}

    # When it is sent, Then it fails and its first write is undone
    with pytest.raises(ClientError):
        dynamodb.transact_write_items(TransactItems=items)
    assert "Item" not in dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "midway"}})


def test_a_partition_query_answers_like_moto_reading_only_its_partition(aws: LocalAws) -> None:
    # Given a table with a range key: three partitions, one with items written out of order
    dynamodb = client("dynamodb", aws.endpoint_url)
    create_table(dynamodb, "local-ranged", ("pk", "S"), ("sk", "S"))
    for pk in ("A", "B", "C"):
        for sk in ("EFFECT#3", "ORDER", "EFFECT#1", "EFFECT#2"):
            dynamodb.put_item(
                TableName="local-ranged",
                Item={"pk": {"S": pk}, "sk": {"S": sk}, "n": {"N": str(len(sk))}},
            )

    def query(pk: str = "B", **extra: Any) -> list[tuple[str, str]]:
        pages = dynamodb.get_paginator("query").paginate(
            TableName="local-ranged",
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": pk}},
            **extra,
        )
        return [(i["pk"]["S"], i["sk"]["S"]) for page in pages for i in page["Items"]]

    # When one partition is queried: whole, backwards, by prefix, two items a page
    whole = query()
    backwards = query(ScanIndexForward=False)
    paged = query(PaginationConfig={"PageSize": 2})
    effects = dynamodb.query(
        TableName="local-ranged",
        KeyConditionExpression="pk = :pk AND begins_with(sk, :effect)",
        ExpressionAttributeValues={":pk": {"S": "B"}, ":effect": {"S": "EFFECT#"}},
    )["Items"]
    missing = query("nope")

    # Then it holds that partition's items only, in range key order, however it is read
    expected = [("B", "EFFECT#1"), ("B", "EFFECT#2"), ("B", "EFFECT#3"), ("B", "ORDER")]
    assert whole == paged == expected
    assert backwards == expected[::-1]
    assert [i["sk"]["S"] for i in effects] == ["EFFECT#1", "EFFECT#2", "EFFECT#3"]
    assert missing == []


def test_sends_and_receives_answer_as_moto_does_without_counting_the_queue(aws: LocalAws) -> None:
    # Given a standard queue and a FIFO queue with content-based deduplication
    sqs = client("sqs", aws.endpoint_url)
    standard = sqs.create_queue(QueueName="local-depth")["QueueUrl"]
    fifo = sqs.create_queue(
        QueueName="local-dedup.fifo",
        Attributes={"FifoQueue": "true", "ContentBasedDeduplication": "true"},
    )["QueueUrl"]

    # When 30 messages are sent to the first, 5 received (and held), and the same body twice
    # to the second
    for n in range(30):
        sqs.send_message(QueueUrl=standard, MessageBody=f"m{n}")
    held = sqs.receive_message(QueueUrl=standard, MaxNumberOfMessages=5, VisibilityTimeout=60)
    for _ in range(2):
        sqs.send_message(QueueUrl=fifo, MessageBody="same", MessageGroupId="g")

    # Then the counts are exact, the received messages are the oldest, and the FIFO queue
    # deduplicated by content
    assert queue_depth(sqs, standard) == (25, 5)
    assert sorted(m["Body"] for m in held["Messages"]) == ["m0", "m1", "m2", "m3", "m4"]
    deduplicated = sqs.get_queue_attributes(
        QueueUrl=fifo, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    assert deduplicated == {"ApproximateNumberOfMessages": "1"}


def test_updates_sharing_one_expression_each_apply_their_own_values(aws: LocalAws) -> None:
    # Given an item, and one update expression the server has parsed before
    dynamodb = client("dynamodb", aws.endpoint_url)
    expression = "SET #n = :n, sums = if_not_exists(sums, :zero) + :n"

    def update(key: str, n: int) -> None:
        dynamodb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": key}},
            UpdateExpression=expression,
            ExpressionAttributeNames={"#n": "last"},
            ExpressionAttributeValues={":n": {"N": str(n)}, ":zero": {"N": "0"}},
        )

    # When it updates two items with other values, one of them twice
    update("same-expression-a", 5)
    update("same-expression-b", 7)
    update("same-expression-a", 2)

    # Then each item holds its own values: the kept parse carries no values of a request
    def read(key: str) -> dict[str, str]:
        item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": key}})["Item"]
        return {name: item[name]["N"] for name in ("last", "sums")}

    assert read("same-expression-a") == {"last": "2", "sums": "7"}
    assert read("same-expression-b") == {"last": "7", "sums": "7"}


def test_an_index_query_by_a_string_key_answers_like_moto_reading_only_its_items(
    aws: LocalAws,
) -> None:
    # Given a table with an index on (bucket, at): items in three buckets, some without a
    # bucket, and one whose bucket is a number refused (as DynamoDB refuses it)
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.create_table(
        TableName="local-indexed",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "bucket", "AttributeType": "S"},
            {"AttributeName": "at", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "due",
                "KeySchema": [
                    {"AttributeName": "bucket", "KeyType": "HASH"},
                    {"AttributeName": "at", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for n in range(30):
        item = {"pk": {"S": f"item-{n:02d}"}, "at": {"N": str((n * 7) % 30)}}
        if n % 5:
            item["bucket"] = {"S": f"b{n % 3}"}
        dynamodb.put_item(TableName="local-indexed", Item=item)
    with pytest.raises(ClientError, match="Type mismatch for Index Key bucket"):
        dynamodb.put_item(
            TableName="local-indexed",
            Item={"pk": {"S": "numbered"}, "bucket": {"N": "1"}, "at": {"N": "1"}},
        )

    def query(**extra: Any) -> list[str]:
        pages = dynamodb.get_paginator("query").paginate(
            TableName="local-indexed",
            IndexName="due",
            KeyConditionExpression="#b = :b",
            ExpressionAttributeNames={"#b": "bucket"},
            ExpressionAttributeValues={":b": {"S": "b1"}},
            **extra,
        )
        return [i["pk"]["S"] for page in pages for i in page["Items"]]

    # When bucket b1 is queried: whole, backwards, two a page, counted, and after a given time
    whole = query()
    backwards = query(ScanIndexForward=False)
    paged = query(PaginationConfig={"PageSize": 2})
    counted = dynamodb.query(
        TableName="local-indexed",
        IndexName="due",
        KeyConditionExpression="#b = :b",
        ExpressionAttributeNames={"#b": "bucket"},
        ExpressionAttributeValues={":b": {"S": "b1"}},
        Select="COUNT",
    )["Count"]
    later = dynamodb.query(
        TableName="local-indexed",
        IndexName="due",
        KeyConditionExpression="#b = :b AND #at > :at",
        ExpressionAttributeNames={"#b": "bucket", "#at": "at"},
        ExpressionAttributeValues={":b": {"S": "b1"}, ":at": {"N": "15"}},
    )["Items"]

    # Then it holds exactly the string-keyed items of b1, in index order, however it is read
    b1 = sorted((n for n in range(30) if n % 5 and n % 3 == 1), key=lambda n: ((n * 7) % 30, n))
    expected = [f"item-{n:02d}" for n in b1]
    assert whole == paged == expected
    assert backwards == expected[::-1]
    assert counted == len(expected)
    assert [i["pk"]["S"] for i in later] == [f"item-{n:02d}" for n in b1 if (n * 7) % 30 > 15]


def test_items_of_every_attribute_type_read_back_as_written_directly_and_through_the_stream(
    aws: LocalAws,
) -> None:
    # Given an item holding every attribute type, nested, binary included (which the server's
    # serializer shortcut leaves to moto), written to a streamed table
    dynamodb = client("dynamodb", aws.endpoint_url)
    item = {
        "pk": {"S": "every-type"},
        "n": {"N": "-12.50"},
        "yes": {"BOOL": True},
        "nothing": {"NULL": True},
        "names": {"SS": ["a", "b"]},
        "amounts": {"NS": ["1", "2.5"]},
        "raw": {"B": b"\x00\xffbytes"},
        "raws": {"BS": [b"x", b"y"]},
        "empty": {"M": {}},
        "entries": {
            "M": {
                "e1": {
                    "M": {
                        "amount": {"N": "1990"},
                        "kinds": {"L": [{"S": "payment"}, {"N": "3"}, {"L": []}]},
                        "blob": {"B": b"inside"},
                    }
                },
                "e2": {"M": {"voided": {"BOOL": False}, "note": {"S": ""}}},
            }
        },
    }
    dynamodb.put_item(TableName=STREAMED, Item=item)

    # When it is read by GetItem, BatchGetItem, Query and from the table's stream
    streams = client("dynamodbstreams", aws.endpoint_url)
    stream_arn = dynamodb.describe_table(TableName=STREAMED)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"][0]
    iterator = streams.get_shard_iterator(
        StreamArn=stream_arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    read = [
        dynamodb.get_item(TableName=STREAMED, Key={"pk": {"S": "every-type"}})["Item"],
        dynamodb.batch_get_item(RequestItems={STREAMED: {"Keys": [{"pk": {"S": "every-type"}}]}})[
            "Responses"
        ][STREAMED][0],
        dynamodb.query(
            TableName=STREAMED,
            KeyConditionExpression="pk = :pk",
            ExpressionAttributeValues={":pk": {"S": "every-type"}},
        )["Items"][0],
        next(
            r["dynamodb"]["NewImage"]
            for r in records
            if r["dynamodb"]["Keys"]["pk"]["S"] == "every-type"
        ),
    ]

    # Then every read is the item exactly as written
    assert read == [item] * 4


def test_one_client_making_many_calls_keeps_one_connection(aws: LocalAws) -> None:
    # Given one client, whose first call has opened its connection
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "kept-0"}})
    opened: list[object] = []
    original = socket.socket.connect

    def counting(sock: socket.socket, address: Any) -> None:
        opened.append(address)
        original(sock, address)

    # When it makes 30 more calls: writes, reads, one refused by its condition, a large answer
    # (any socket this process connects is counted, whichever way the calls are sent)
    with patch.object(socket.socket, "connect", counting):
        for n in range(1, 11):
            dynamodb.put_item(
                TableName=TABLE, Item={"pk": {"S": f"kept-{n}"}, "pad": {"S": "x" * 5000}}
            )
            dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": f"kept-{n}"}})
            with pytest.raises(ClientError):
                dynamodb.put_item(
                    TableName=TABLE,
                    Item={"pk": {"S": f"kept-{n}"}},
                    ConditionExpression="attribute_not_exists(pk)",
                )
        items = dynamodb.scan(TableName=TABLE)["Items"]

    # Then every answer arrived whole over the connection it already had
    assert {f"kept-{n}" for n in range(11)} <= {i["pk"]["S"] for i in items}
    assert opened == []


def test_an_update_expression_is_judged_by_its_names_and_values_every_time(
    aws: LocalAws,
) -> None:
    # Given an item, and expressions the server has validated (and passed) before
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "judged"}, "n": {"N": "1"}})

    def update(expression: str, names: dict[str, str], value: dict[str, str]) -> str:
        try:
            dynamodb.update_item(
                TableName=TABLE,
                Key={"pk": {"S": "judged"}},
                UpdateExpression=expression,
                ExpressionAttributeNames=names,
                ExpressionAttributeValues={":v": value},
            )
        except ClientError as exc:
            return str(exc.response["Error"]["Message"])
        return "ok"

    add = "SET #a = #a + :v"
    overlapping = "SET #a = :v, #a = :v"

    # When the same texts are sent again with names and values that make them wrong
    outcomes = [
        update(add, {"#a": "n"}, {"N": "2"}),
        update(add, {"#a": "n"}, {"S": "two"}),  # a string added to a number
        update(add, {"#a": "pk"}, {"N": "2"}),  # the key attribute
        update(add, {"#a": "n"}, {"N": "2"}),
        update(overlapping, {"#a": "n"}, {"N": "1"}),
        update(overlapping, {"#a": "n"}, {"N": "1"}),
    ]

    # Then each is refused as DynamoDB refuses it, however often the text passed before
    assert outcomes[0] == outcomes[3] == "ok"
    assert "operand" in outcomes[1].lower()
    assert "key" in outcomes[2].lower()
    assert "overlap" in outcomes[4].lower() or "two document paths" in outcomes[4].lower()
    assert outcomes[5] == outcomes[4]
    item = dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "judged"}})["Item"]
    assert item["n"] == {"N": "5"}


def test_a_streamed_tables_updates_carry_their_old_image(aws: LocalAws) -> None:
    # Given a table streaming old and new images, and an item in it
    dynamodb = client("dynamodb", aws.endpoint_url)
    dynamodb.create_table(
        TableName="local-images",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    dynamodb.put_item(
        TableName="local-images", Item={"pk": {"S": "i"}, "m": {"M": {"n": {"N": "1"}}}}
    )

    # When it is updated twice
    for n in (2, 3):
        dynamodb.update_item(
            TableName="local-images",
            Key={"pk": {"S": "i"}},
            UpdateExpression="SET m.n = :n",
            ExpressionAttributeValues={":n": {"N": str(n)}},
        )

    # Then each update's record holds the item before it and after it
    streams = client("dynamodbstreams", aws.endpoint_url)
    arn = dynamodb.describe_table(TableName="local-images")["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    images = [
        (
            r["dynamodb"]["OldImage"]["m"]["M"]["n"]["N"],
            r["dynamodb"]["NewImage"]["m"]["M"]["n"]["N"],
        )
        for r in records
        if r["eventName"] == "MODIFY"
    ]
    assert images == [("1", "2"), ("2", "3")]


def test_a_split_server_serves_dynamodb_from_a_process_of_its_own() -> None:
    # Given a split server, and the local resources provisioned on it
    server = LocalAws(split_dynamodb=True).start()
    try:
        resources = provision(server.endpoint_url)
        environment = resources.environment()
        dynamodb_url = server.service_endpoints["dynamodb"]

        # When a Lambda's clients (from the environment alone) write an item and enqueue a
        # message, and the local clients read them back
        with patch.dict("os.environ", environment):
            session = boto3.Session()
            session.client("dynamodb").put_item(
                TableName=resources.tables.ledger,
                Item={"pk": {"S": "split"}, "sk": {"S": "ORDER"}},
            )
            session.client("sqs").send_message(QueueUrl=resources.queue_url, MessageBody="m")
        item = client("dynamodb", server.endpoint_url).get_item(
            TableName=resources.tables.ledger, Key={"pk": {"S": "split"}, "sk": {"S": "ORDER"}}
        )
        stats = server.stats()
    finally:
        server.stop()

    # Then DynamoDB and its streams were served by the other process, SQS by the first, and
    # the statistics count both
    assert dynamodb_url != server.endpoint_url
    assert server.service_endpoints["dynamodbstreams"] == dynamodb_url
    assert environment["AWS_ENDPOINT_URL_DYNAMODB"] == dynamodb_url
    assert environment["AWS_ENDPOINT_URL_DYNAMODB_STREAMS"] == dynamodb_url
    assert item["Item"]["pk"] == {"S": "split"}
    assert stats["calls"]["dynamodb PutItem"][0] == 1
    assert stats["calls"]["dynamodb GetItem"][0] == 1
    assert stats["calls"]["sqs SendMessage"][0] == 1
    assert client("dynamodb", server.endpoint_url).meta.endpoint_url == server.endpoint_url


PRIORITIES_OF_TWO_STACKS = """
import json, os, threading
from devstack.local_aws import LocalAws
from devstack import loopback_calls

def look():
    before = os.getpriority(os.PRIO_PROCESS, 0)
    server = LocalAws(split_dynamodb=True).start()
    try:
        seen = {n: os.getpriority(os.PRIO_PROCESS, pid) for n, pid in server.pids.items()}
        mine = lambda: seen.update(thread=os.getpriority(os.PRIO_PROCESS, 0))
        later = threading.Thread(target=mine)
        later.start()
        later.join()
        seen["lean_calls"] = loopback_calls.installed()
        return {"before": before, "caller": os.getpriority(os.PRIO_PROCESS, 0), **seen}
    finally:
        server.stop()

first = look()
after = {"after": os.getpriority(os.PRIO_PROCESS, 0), "lean_calls": loopback_calls.installed()}
print(json.dumps([first, look(), after]))
"""


@pytest.mark.skipif(not hasattr(os, "setpriority"), reason="no process priorities here")
def test_a_split_server_gives_the_dynamodb_process_the_cpu_first() -> None:
    # Given a fresh process
    # When it starts a split server, stops it, and starts another
    first, second, after = json.loads(
        subprocess.run(  # noqa: S603 - this interpreter, our own script
            [sys.executable, "-c", PRIORITIES_OF_TWO_STACKS],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
    )

    # Then the first DynamoDB process runs at the process's priority, and the other server,
    # the caller and the threads it starts from then on run ten steps lower, calling it lean;
    # stopped, the caller is as it was: its calls signed by botocore again, its priority back
    # where the platform lets it raise one (Linux: with CAP_SYS_NICE; root here), else kept
    # lowered, and then the second stack lowers nothing further
    start = first["before"]
    lowered = min(start + YIELDING_NICENESS, 19)
    assert first["dynamodb"] == start < lowered or start == 19
    assert first["main"] == first["caller"] == first["thread"] == lowered
    assert first["lean_calls"]
    assert not after["lean_calls"]
    restored = start if os.geteuid() == 0 else lowered
    assert second["before"] == second["dynamodb"] == restored
    assert second["main"] == second["caller"] == second["thread"] == lowered
    assert after["after"] == restored


def test_a_server_whose_stack_was_killed_exits_on_its_own() -> None:
    # Given a process that started a split server, and printed the servers' ports
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from devstack.local_aws import LocalAws;"
            "aws = LocalAws(split_dynamodb=True).start();"
            "print(aws.port, aws.service_endpoints['dynamodb'].rsplit(':', 1)[1], flush=True);"
            "time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    ports = [int(p) for p in owner.stdout.readline().split()]

    def answering() -> list[int]:
        alive = []
        for port in ports:
            try:
                LocalAws(port).stats()
            except OSError:
                continue
            alive.append(port)
        return alive

    assert answering() == ports

    # When that process is killed, without any cleanup
    owner.kill()
    owner.wait()

    # Then both servers are gone within a few seconds
    deadline = time.monotonic() + 10
    while answering() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert answering() == []


def test_a_delete_batch_answers_each_entry_as_moto_does(aws: LocalAws) -> None:
    # Given a queue of 20 messages, six of them received (one of those twice, so that it has an
    # old receipt handle too), and one deleted already
    sqs = client("sqs", aws.endpoint_url)
    queue = sqs.create_queue(QueueName="local-deletes")["QueueUrl"]
    for n in range(20):
        sqs.send_message(QueueUrl=queue, MessageBody=f"m{n}")
    received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=6, VisibilityTimeout=60)[
        "Messages"
    ]
    again_id = received[5]["MessageId"]
    sqs.change_message_visibility(
        QueueUrl=queue, ReceiptHandle=received[5]["ReceiptHandle"], VisibilityTimeout=0
    )
    again = next(
        m
        for _ in range(20)
        for m in sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, VisibilityTimeout=60)[
            "Messages"
        ]
        if m["MessageId"] == again_id
    )
    assert again["ReceiptHandle"] != received[5]["ReceiptHandle"]
    sqs.delete_message(QueueUrl=queue, ReceiptHandle=received[0]["ReceiptHandle"])

    # When one batch deletes: two received, the one deleted already, a handle no message had,
    # the twice-received one by its old handle
    answer = sqs.delete_message_batch(
        QueueUrl=queue,
        Entries=[
            {"Id": "a", "ReceiptHandle": received[1]["ReceiptHandle"]},
            {"Id": "b", "ReceiptHandle": received[2]["ReceiptHandle"]},
            {"Id": "gone", "ReceiptHandle": received[0]["ReceiptHandle"]},
            {"Id": "bogus", "ReceiptHandle": "not-a-handle"},
            {"Id": "old", "ReceiptHandle": received[5]["ReceiptHandle"]},
        ],
    )

    # Then every real handle succeeds (a repeated delete too), the bogus one fails alone, and
    # exactly the four messages are gone: 16 left, of which two still held
    assert sorted(e["Id"] for e in answer["Successful"]) == ["a", "b", "gone", "old"]
    assert [(e["Id"], e["Code"]) for e in answer["Failed"]] == [("bogus", "ReceiptHandleIsInvalid")]
    counts = sqs.get_queue_attributes(
        QueueUrl=queue,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    held = int(counts["ApproximateNumberOfMessagesNotVisible"])
    assert int(counts["ApproximateNumberOfMessages"]) + held == 16
    assert held >= 2


def test_a_scan_pages_through_a_table_as_moto_does(aws: LocalAws) -> None:
    # Given the same two tables on the local server and on bare moto: one keyed by a string
    # and a number (numbers sort by value, not as text), one by a string alone
    def fill(dynamodb: Any) -> None:
        create_table(dynamodb, "local-scanned", ("pk", "S"), ("n", "N"))
        create_table(dynamodb, "local-scanned-flat", ("pk", "S"))
        for i in range(61):
            item = {
                "pk": {"S": f"p{i % 5}"},
                "n": {"N": str((i * 37) % 101)},
                "odd": {"BOOL": i % 2 == 1},
            }
            dynamodb.put_item(TableName="local-scanned", Item=item)
            dynamodb.put_item(TableName="local-scanned-flat", Item={"pk": {"S": f"k{i * 7 % 61}"}})

    def pages(dynamodb: Any) -> list[Any]:
        read = []
        for table, extra in (
            ("local-scanned", {}),
            ("local-scanned", {"Limit": 7}),
            (
                "local-scanned",
                {
                    "Limit": 5,
                    "FilterExpression": "odd = :t",
                    "ExpressionAttributeValues": {":t": {"BOOL": True}},
                },
            ),
            ("local-scanned-flat", {"Limit": 6}),
        ):
            start: dict[str, Any] = {}
            while True:
                page = dynamodb.scan(TableName=table, **extra, **start)
                read.append((page["Items"], page["Count"], page.get("LastEvaluatedKey")))
                if "LastEvaluatedKey" not in page:
                    break
                start = {"ExclusiveStartKey": page["LastEvaluatedKey"]}
        return read

    local, expected = filled_alike_and_read_by_bare_moto(aws, fill, pages)

    # When both are scanned whole and in pages: by count, with a filter
    read = pages(local)

    # Then every page holds the same items and ends at the same key
    assert read == expected
    assert len(read) > 30


def test_a_condition_expression_is_judged_by_its_names_and_values_every_time(
    aws: LocalAws,
) -> None:
    # Given the same condition texts, with other names and values each time
    def writes(dynamodb: Any) -> list[str]:
        create_table(dynamodb, "local-conditioned", ("pk", "S"))
        dynamodb.put_item(
            TableName="local-conditioned",
            Item={"pk": {"S": "a"}, "n": {"N": "5"}, "s": {"S": "x"}},
        )
        outcomes = []
        attempts = [
            ("attribute_not_exists(#k) OR #v < :v", {"#k": "pk", "#v": "n"}, {":v": {"N": "9"}}),
            ("attribute_not_exists(#k) OR #v < :v", {"#k": "pk", "#v": "n"}, {":v": {"N": "1"}}),
            ("attribute_not_exists(#k) OR #v < :v", {"#k": "nope", "#v": "n"}, {":v": {"N": "1"}}),
            ("attribute_not_exists(#k) OR #v < :v", {"#k": "pk", "#v": "s"}, {":v": {"S": "a"}}),
            (
                "#v = :v AND begins_with(#k, :p)",
                {"#k": "pk", "#v": "n"},
                {":v": {"N": "5"}, ":p": {"S": "a"}},
            ),
            (
                "#v = :v AND begins_with(#k, :p)",
                {"#k": "pk", "#v": "n"},
                {":v": {"N": "5"}, ":p": {"S": "b"}},
            ),
            ("#v = :v OR #w = :v", {"#v": "n", "#w": "s"}, {":v": {"N": "4"}}),
            ("#v = :v OR #w = :v", {"#v": "n", "#w": "s"}, {":v": {"S": "x"}}),
        ]
        for expression, names, values in attempts:
            try:
                dynamodb.put_item(
                    TableName="local-conditioned",
                    Item={"pk": {"S": "a"}, "n": {"N": "5"}, "s": {"S": "x"}},
                    ConditionExpression=expression,
                    ExpressionAttributeNames=names,
                    ExpressionAttributeValues=values,
                )
                outcomes.append("written")
            except ClientError as exc:
                outcomes.append(exc.response["Error"]["Code"])
        return outcomes

    with mock_aws():
        expected = writes(boto3.client("dynamodb", region_name="us-east-1"))

    # When they are written to the local server
    outcomes = writes(client("dynamodb", aws.endpoint_url))

    # Then each is judged as bare moto judges it
    assert outcomes == expected
    assert outcomes[:6] == ["written", "ConditionalCheckFailedException"] * 3
    assert outcomes[6:] == ["ConditionalCheckFailedException", "written"]


def test_reads_with_projections_indexes_and_filters_answer_as_moto_does_and_change_nothing(
    aws: LocalAws,
) -> None:
    # Given items with nested maps and lists, a keys-only index and a full one
    def fill(dynamodb: Any) -> None:
        dynamodb.create_table(
            TableName="local-read",
            KeySchema=[
                {"AttributeName": "pk", "KeyType": "HASH"},
                {"AttributeName": "sk", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": a, "AttributeType": "S"} for a in ("pk", "sk", "bucket")
            ],
            GlobalSecondaryIndexes=[
                {
                    "IndexName": name,
                    "KeySchema": [{"AttributeName": "bucket", "KeyType": "HASH"}],
                    "Projection": {"ProjectionType": projection},
                }
                for name, projection in (("keys", "KEYS_ONLY"), ("all", "ALL"))
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        for i in range(12):
            dynamodb.put_item(
                TableName="local-read",
                Item={
                    "pk": {"S": f"p{i % 3}"},
                    "sk": {"S": f"s{i:02}"},
                    "bucket": {"S": f"b{i % 2}"},
                    "n": {"N": str(i)},
                    "m": {"M": {"deep": {"M": {"x": {"N": str(i)}}}, "t": {"S": "é" * i}}},
                    "l": {"L": [{"N": str(i)}, {"M": {"y": {"BOOL": i % 2 == 0}}}]},
                },
            )

    def reads(dynamodb: Any) -> list[Any]:
        projected = {"ProjectionExpression": "pk, m.deep, l[1]"}
        filtered = {
            "FilterExpression": "n > :n",
            "ExpressionAttributeValues": {":n": {"N": "4"}},
        }
        queries: list[dict[str, Any]] = [
            {
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": "p1"}},
                **projected,
            },
            {
                "IndexName": "keys",
                "KeyConditionExpression": "bucket = :b",
                "ExpressionAttributeValues": {":b": {"S": "b0"}},
            },
            {
                "IndexName": "all",
                "KeyConditionExpression": "bucket = :b",
                **filtered,
                "ExpressionAttributeValues": {":b": {"S": "b1"}, ":n": {"N": "4"}},
            },
        ]
        scans: list[dict[str, Any]] = [projected, {"IndexName": "keys"}, filtered]
        # (items sharing an index key, which has no sort key, come in no order DynamoDB names)
        answers = [
            sorted(dynamodb.query(TableName="local-read", **q)["Items"], key=repr)
            if "IndexName" in q
            else dynamodb.query(TableName="local-read", **q)["Items"]
            for q in queries
        ] + [
            sorted(dynamodb.scan(TableName="local-read", **q)["Items"], key=repr)
            if "IndexName" in q
            else dynamodb.scan(TableName="local-read", **q)["Items"]
            for q in scans
        ]
        # and the items as they are after all those reads
        return [*answers, dynamodb.scan(TableName="local-read")["Items"]]

    local, expected = filled_alike_and_read_by_bare_moto(aws, fill, reads)

    # When they are read through projections, indexes and filters (twice: a read that had
    # changed a stored item would show the second time)
    first, second = reads(local), reads(local)

    # Then every answer is bare moto's, and the stored items are whole
    assert first == second == expected
    assert {"pk", "sk", "bucket", "n", "m", "l"} == set(first[-1][0])


def test_update_expressions_of_every_clause_apply_and_fail_as_moto_does(aws: LocalAws) -> None:
    # Given one item, and updates of every clause: nested paths, functions, arithmetic, sets,
    # and updates moto refuses
    updates: list[tuple[str, dict[str, str], dict[str, Any]]] = [
        (
            "SET a.b.c = :v, #l = list_append(#l, :l)",
            {"#l": "l"},
            {":v": {"N": "1"}, ":l": {"L": [{"S": "z"}]}},
        ),
        (
            "SET n = if_not_exists(n, :z) + :one, m2 = :m",
            {},
            {":z": {"N": "0"}, ":one": {"N": "1"}, ":m": {"M": {"k": {"S": "v"}}}},
        ),
        (
            "ADD tags :t, #total :one",
            {"#total": "total"},
            {":t": {"SS": ["x", "y"]}, ":one": {"N": "5"}},
        ),
        (
            "DELETE tags :t SET l[0] = :s REMOVE a.b.c",
            {},
            {":t": {"SS": ["x"]}, ":s": {"S": "first"}},
        ),
        ("SET n = n - :one, a.b = :v", {}, {":one": {"N": "2"}, ":v": {"S": "flat"}}),
        ("SET a = :v, a.b = :v", {}, {":v": {"S": "overlap"}}),
        ("SET pk = :v", {}, {":v": {"S": "key"}}),
        ("SET n = n + :s", {}, {":s": {"S": "text"}}),
        ("SET nope.deeper = :v", {}, {":v": {"S": "missing parent"}}),
    ]

    def apply(dynamodb: Any) -> list[Any]:
        create_table(dynamodb, "local-updated", ("pk", "S"))
        dynamodb.put_item(
            TableName="local-updated",
            Item={"pk": {"S": "u"}, "a": {"M": {"b": {"M": {}}}}, "l": {"L": [{"S": "y"}]}},
        )
        seen: list[Any] = []
        for expression, names, values in updates:
            try:
                dynamodb.update_item(
                    TableName="local-updated",
                    Key={"pk": {"S": "u"}},
                    UpdateExpression=expression,
                    ExpressionAttributeValues=values,
                    **({"ExpressionAttributeNames": names} if names else {}),
                )
                seen.append("updated")
            except ClientError as exc:
                seen.append(exc.response["Error"]["Code"])
            seen.append(
                dynamodb.get_item(TableName="local-updated", Key={"pk": {"S": "u"}})["Item"]
            )
        return seen

    with mock_aws():
        expected = apply(boto3.client("dynamodb", region_name="us-east-1"))

    # When they are applied on the local server, in turn
    seen = apply(client("dynamodb", aws.endpoint_url))

    # Then each applies, or fails, as on bare moto, and leaves the same item
    assert seen == expected
    assert seen[0::2] == ["updated"] * 5 + ["ValidationException"] * 4


def test_queue_attributes_by_name_answer_as_moto_does(aws: LocalAws) -> None:
    # Given a queue with visible, received (invisible) and delayed messages
    asked: list[list[str]] = [
        ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        ["ApproximateNumberOfMessagesDelayed"],
        ["VisibilityTimeout", "ApproximateNumberOfMessages", "DelaySeconds"],
        ["RedrivePolicy"],
        ["NoSuchAttribute"],
    ]

    def look(sqs: Any) -> list[Any]:
        url = sqs.create_queue(QueueName="local-attributes")["QueueUrl"]
        for n in range(9):
            sqs.send_message(QueueUrl=url, MessageBody=str(n), DelaySeconds=600 if n < 2 else 0)
        sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=600)
        answers: list[Any] = []
        for names in asked:
            try:
                answers.append(
                    sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names).get("Attributes")
                )
            except ClientError as exc:
                answers.append(exc.response["Error"]["Code"])
        answers.append(
            sorted(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"])
        )
        return answers

    with mock_aws():
        expected = look(boto3.client("sqs", region_name="us-east-1"))

    # When the local server is asked the same, by name and for all
    answers = look(client("sqs", aws.endpoint_url))

    # Then it answers what bare moto answers: the counts, in the order asked
    assert answers == expected
    assert answers[0] == {
        "ApproximateNumberOfMessages": "4",
        "ApproximateNumberOfMessagesNotVisible": "3",
    }
    assert answers[1] == {"ApproximateNumberOfMessagesDelayed": "2"}


def test_receives_take_the_visible_messages_in_moto_s_order(aws: LocalAws) -> None:
    # Given a queue of twelve messages, two of them delayed, three already received
    def receive_all(sqs: Any) -> list[Any]:
        url = sqs.create_queue(QueueName="local-receives")["QueueUrl"]
        for n in range(12):
            sqs.send_message(
                QueueUrl=url, MessageBody=f"m{n}", DelaySeconds=600 if n in (4, 9) else 0
            )
        taken = [
            [
                m["Body"]
                for m in sqs.receive_message(
                    QueueUrl=url, MaxNumberOfMessages=3, VisibilityTimeout=600
                ).get("Messages", [])
            ]
        ]
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=4).get("Messages", []):
            taken.append([m["Body"] for m in batch])
        return taken

    with mock_aws():
        expected = receive_all(boto3.client("sqs", region_name="us-east-1"))

    # When the local server's queue is received from until it reads empty
    taken = receive_all(client("sqs", aws.endpoint_url))

    # Then each receive takes the messages bare moto takes: the visible ones, oldest first,
    # never the delayed ones or those in flight
    assert taken == expected
    assert [body for batch in taken for body in batch] == [
        f"m{n}" for n in range(12) if n not in (4, 9)
    ]


def test_each_receipt_handle_is_its_own_and_deletes_its_own_message(aws: LocalAws) -> None:
    # Given ten messages in a queue, all received
    sqs = client("sqs", aws.endpoint_url)
    url = sqs.create_queue(QueueName="local-handles")["QueueUrl"]
    for n in range(10):
        sqs.send_message(QueueUrl=url, MessageBody=str(n))
    received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]

    # When half of them are deleted by their handles
    for message in received[:5]:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    # Then no two handles were the same, and exactly the other five are left (in flight)
    assert len({m["ReceiptHandle"] for m in received}) == 10
    assert queue_depth(sqs, url) == (0, 5)


def test_a_receive_moves_a_message_past_its_receives_to_a_fifo_dead_letter_queue(
    aws: LocalAws,
) -> None:
    # Given a FIFO queue whose messages go to a FIFO dead-letter queue after one receive, and
    # a message received once and visible again
    def redrive(sqs: Any) -> list[Any]:
        dead = sqs.create_queue(QueueName="local-dead.fifo", Attributes={"FifoQueue": "true"})[
            "QueueUrl"
        ]
        arn = sqs.get_queue_attributes(QueueUrl=dead, AttributeNames=["QueueArn"])
        url = sqs.create_queue(
            QueueName="local-live.fifo",
            Attributes={
                "FifoQueue": "true",
                "RedrivePolicy": json.dumps(
                    {"deadLetterTargetArn": arn["Attributes"]["QueueArn"], "maxReceiveCount": 1}
                ),
            },
        )["QueueUrl"]
        sqs.send_message(
            QueueUrl=url, MessageBody="m", MessageGroupId="g", MessageDeduplicationId="d"
        )
        first = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0).get("Messages", [])
        time.sleep(0.01)  # moto's own clock: the message is visible again a millisecond later
        second = sqs.receive_message(QueueUrl=url).get("Messages", [])
        moved = sqs.receive_message(QueueUrl=dead).get("Messages", [])
        return [[m["Body"] for m in batch] for batch in (first, second, moved)]

    with mock_aws():
        expected = redrive(boto3.client("sqs", region_name="us-east-1"))

    # When it is received again on the local server
    seen = redrive(client("sqs", aws.endpoint_url))

    # Then, as on bare moto, the receive moves it to the dead-letter queue (which counts its
    # messages as it takes one) instead of failing
    assert seen == expected == [["m"], [], ["m"]]
