"""The contract of the in-memory DynamoDB (devstack/memory/): the same requests, run on moto
and on it, get the same verdicts — the same answers, the same errors, the same refusals by
position with the items found — for every kind of request the product makes.

The histories and the money fuzz run on the in-memory store; these cases are what lets them
stand in for moto (and moto for DynamoDB: NOTES.md).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import ClientError
from moto import mock_aws

from devstack.memory.hook import memory_dynamodb
from functions.shared import tables
from functions.shared.tables import TableNames, create_table_requests

NAMES = TableNames("contract-ledger", "contract-outbox")
LEDGER, OUTBOX = NAMES.ledger, NAMES.outbox
PK = {"#pk": tables.PARTITION_KEY}

Request = tuple[str, dict[str, Any]]


def s(text: str) -> dict[str, str]:
    return {"S": text}


def n(number: int) -> dict[str, str]:
    return {"N": str(number)}


def key(pk: str, sk: str) -> dict[str, Any]:
    return {tables.PARTITION_KEY: s(pk), tables.SORT_KEY: s(sk)}


def item(pk: str, sk: str, **fields: Any) -> dict[str, Any]:
    return {**key(pk, sk), **fields}


def verdicts(client: Any, requests: list[Request], unordered: bool = False) -> list[Any]:
    """Each request's answer (without its metadata), or its error's code and modeled fields."""
    found: list[Any] = []
    for operation, params in requests:
        try:
            answer = getattr(client, operation)(**params)
        except ClientError as error:
            response: dict[str, Any] = dict(error.response)
            # The reasons' messages are prose; their codes and items are the verdict.
            reasons = [
                {k: v for k, v in reason.items() if k != "Message"}
                for reason in response.get("CancellationReasons", [])
            ]
            found.append((response["Error"]["Code"], reasons, response.get("Item")))
            continue
        answer.pop("ResponseMetadata", None)
        # moto answers these unasked, DynamoDB does not
        answer.pop("ConsumedCapacity", None)
        if answer.get("ItemCollectionMetrics") == {}:
            del answer["ItemCollectionMetrics"]
        if unordered and "Items" in answer:
            answer["Items"] = sorted(answer["Items"], key=repr)
        found.append(answer)
    return found


def both(
    requests: Callable[[], list[Request]],
    unordered: bool = False,
    then: Callable[[Any], Any] | None = None,
) -> tuple[Any, Any]:
    """The verdicts on moto, then on memory, for the same requests; with `then`, each
    backend's verdicts beside what `then` reads from it afterwards."""
    answers = []
    for backend in (mock_aws(), memory_dynamodb()):
        with backend:
            client = boto3.client("dynamodb")
            for create in create_table_requests(NAMES):
                client.create_table(**create)
            found = verdicts(client, requests(), unordered)
            answers.append(found if then is None else (found, then(client)))
    return answers[0], answers[1]


def first_record(sk: str, **fields: Any) -> Request:
    return (
        "put_item",
        {
            "TableName": LEDGER,
            "Item": item("ORDER#1", sk, **fields),
            "ConditionExpression": "attribute_not_exists(#pk)",
            "ExpressionAttributeNames": PK,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    )


def test_a_key_reserved_once_is_refused_the_second_time_with_what_holds_it() -> None:
    # Given a conditional put, made twice, When run on moto and in memory
    moto, memory = both(
        lambda: [first_record("EFFECT#k", amount=n(5000)), first_record("EFFECT#k")]
    )

    # Then both write the first and refuse the second, returning the first's item
    assert memory == moto
    assert moto[1][0] == "ConditionalCheckFailedException"


ORDER_GUARD = (
    "(attribute_not_exists(#last) OR #last <= :token OR (#second = :second AND #payment <> :pay))"
    " AND (attribute_not_exists(#currency) OR #currency = :currency)"
)


def order_update(
    token: int, second: int, payment: str, currency: str, order: str = "ORDER#1"
) -> Request:
    return (
        "update_item",
        {
            "TableName": LEDGER,
            "Key": key(order, "ORDER"),
            "UpdateExpression": (
                "SET #last = :token, #second = :second, #payment = :pay, "
                "#currency = if_not_exists(#currency, :currency) ADD paid_total :amount, "
                "effect_count :one"
            ),
            "ConditionExpression": ORDER_GUARD,
            "ExpressionAttributeNames": {
                "#last": "last_event_at",
                "#second": "last_event_second",
                "#payment": "last_payment",
                "#currency": "currency",
            },
            "ExpressionAttributeValues": {
                ":token": n(token),
                ":second": n(second),
                ":pay": s(payment),
                ":currency": s(currency),
                ":amount": n(100),
                ":one": n(1),
            },
            "ReturnValues": "ALL_NEW",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        },
    )


def test_the_order_guard_moves_an_order_only_forward_and_in_its_currency() -> None:
    # Given the order's update under the ordering and currency guard: a first event, a later
    # one, an older one, another payment in the same second, another currency
    def requests() -> list[Request]:
        return [
            order_update(100, 10, "pi_1", "brl"),
            order_update(200, 20, "pi_1", "brl"),
            order_update(150, 15, "pi_1", "brl"),
            order_update(190, 20, "pi_2", "brl"),
            order_update(300, 30, "pi_1", "usd"),
            # An order whose last event named no payment: `<>` against an absent attribute
            (
                "put_item",
                {
                    "TableName": LEDGER,
                    "Item": item("ORDER#2", "ORDER", last_event_at=n(500), last_event_second=n(50)),
                },
            ),
            order_update(400, 50, "pi_9", "brl", order="ORDER#2"),
        ]

    # When run on both
    moto, memory = both(requests)

    # Then the same ones move it, and the same ones are refused with the order they found
    assert memory == moto
    assert [v[0] if isinstance(v, tuple) else "ok" for v in moto] == [
        "ok",
        "ok",
        "ConditionalCheckFailedException",
        "ok",
        "ConditionalCheckFailedException",
        "ok",
        "ok",
    ]


def test_updates_set_add_remove_and_return_what_was_asked() -> None:
    # Given updates of every clause kind, each asking for a different return
    def update(expression: str, returns: str, **values: Any) -> Request:
        return (
            "update_item",
            {
                "TableName": OUTBOX,
                "Key": {tables.OUTBOX_KEY: s("obx_1")},
                "UpdateExpression": expression,
                **({"ExpressionAttributeValues": values} if values else {}),
                "ReturnValues": returns,
            },
        )

    def requests() -> list[Request]:
        return [
            update(
                "SET #s = :p, attempts = :zero", "ALL_OLD", **{":p": s("pending"), ":zero": n(0)}
            ),
            update(
                "ADD attempts :one, channels_sent :email",
                "ALL_NEW",
                **{":one": n(1), ":email": {"SS": ["email"]}},
            ),
            update(
                "ADD channels_sent :more",
                "UPDATED_NEW",
                **{":more": {"SS": ["eventbridge", "email"]}},
            ),
            update(
                "REMOVE attempts SET note = if_not_exists(note, :x)", "ALL_NEW", **{":x": s("kept")}
            ),
            update("SET note = if_not_exists(note, :y)", "UPDATED_OLD", **{":y": s("not this")}),
        ]

    moto, memory = both(lambda: [(op, _named(p)) for op, p in requests()])

    # Then both leave the same item and answer the same
    assert memory == moto


def _named(params: dict[str, Any]) -> dict[str, Any]:
    if "#s" in params["UpdateExpression"]:
        return {**params, "ExpressionAttributeNames": {"#s": "status"}}
    return params


def test_a_refused_transaction_says_which_item_refused_it_and_writes_nothing() -> None:
    # Given a transaction whose second item's condition fails, and one on one item twice
    def requests() -> list[Request]:
        put = {"Put": {"TableName": LEDGER, "Item": item("ORDER#1", "A")}}
        guarded = {
            "Put": {
                "TableName": LEDGER,
                "Item": item("ORDER#1", "B", v=n(2)),
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": PK,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        }
        check = {
            "ConditionCheck": {
                "TableName": LEDGER,
                "Key": key("ORDER#1", "C"),
                "ConditionExpression": "attribute_exists(#pk)",
                "ExpressionAttributeNames": PK,
            }
        }
        return [
            ("put_item", {"TableName": LEDGER, "Item": item("ORDER#1", "B", v=n(1))}),
            ("transact_write_items", {"TransactItems": [put, guarded, check]}),
            ("get_item", {"TableName": LEDGER, "Key": key("ORDER#1", "A"), "ConsistentRead": True}),
            ("transact_write_items", {"TransactItems": [put, put]}),
            (
                "transact_write_items",
                {
                    "TransactItems": [
                        put,
                        {"Delete": {"TableName": LEDGER, "Key": key("ORDER#1", "B")}},
                    ]
                },
            ),
            ("scan", {"TableName": LEDGER}),
        ]

    moto, memory = both(requests, unordered=True)

    # Then both cancel it by position with the item found, write nothing, and refuse the
    # transaction naming one item twice
    assert memory == moto
    assert moto[1][0] == "TransactionCanceledException"
    assert moto[2] == {}
    assert moto[3][0] == "ValidationException"


def test_queries_of_a_partition_page_filter_project_and_count_alike() -> None:
    # Given an order with its entries, read in pages of two, filtered, projected and counted
    def requests() -> list[Request]:
        writes: list[Request] = [
            (
                "put_item",
                {
                    "TableName": LEDGER,
                    "Item": item("ORDER#1", sk, payment=s(p), token=n(t), outcome=s(o)),
                },
            )
            for sk, p, t, o in [
                ("EFFECT#a", "pi_1", 10, "applied"),
                ("EFFECT#b", "pi_1", 20, "stale"),
                ("EFFECT#c", "pi_2", 30, "applied"),
                ("EFFECT#d", "pi_1", 40, "voided"),
                ("ORDER", "-", 0, "-"),
            ]
        ]
        names = {**PK, "#sk": tables.SORT_KEY}
        values = {":pk": s("ORDER#1"), ":entry": s("EFFECT#")}
        query: dict[str, Any] = {
            "TableName": LEDGER,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :entry)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        filtered = {
            **query,
            "FilterExpression": "#payment = :payment AND #token > :token AND #outcome IN (:a, :s)",
            "ExpressionAttributeNames": {
                **names,
                "#payment": "payment",
                "#token": "token",
                "#outcome": "outcome",
            },
            "ExpressionAttributeValues": {
                **values,
                ":payment": s("pi_1"),
                ":token": n(5),
                ":a": s("applied"),
                ":s": s("stale"),
            },
            "ProjectionExpression": "#pk, #sk",
        }
        first = {**query, "Limit": 2}
        return [
            *writes,
            ("query", query),
            ("query", filtered),
            ("query", {**query, "Select": "COUNT"}),
            ("query", first),
            ("query", {**first, "ExclusiveStartKey": key("ORDER#1", "EFFECT#b")}),
            ("query", {**first, "ExclusiveStartKey": key("ORDER#1", "EFFECT#bb")}),
            ("query", {**query, "ScanIndexForward": False, "Limit": 3}),
        ]

    moto, memory = both(requests)

    # Then every page, filter, projection and count is the same
    assert memory == moto


def test_the_indexes_answer_alike() -> None:
    # Given outbox items in the due index's shards and orders in the changed index
    def requests() -> list[Request]:
        outbox: list[Request] = [
            (
                "put_item",
                {
                    "TableName": OUTBOX,
                    "Item": {
                        tables.OUTBOX_KEY: s(f"obx_{i}"),
                        tables.OUTBOX_DUE_BUCKET: s(f"due#{i % 2}"),
                        tables.OUTBOX_DUE_AT: n(100 + i),
                        "status": s("pending"),
                    },
                },
            )
            for i in range(6)
        ]
        outbox.append(
            (
                "put_item",
                {
                    "TableName": OUTBOX,
                    "Item": {tables.OUTBOX_KEY: s("obx_new"), "status": s("pending")},
                },
            )
        )
        ledger: list[Request] = [
            (
                "put_item",
                {
                    "TableName": LEDGER,
                    "Item": item(
                        f"ORDER#{i}",
                        "ORDER",
                        **{tables.CHANGES_BUCKET: s("2026-12-04T05#1"), "paid": n(i)},
                    ),
                },
            )
            for i in range(3)
        ]
        due = {
            "TableName": OUTBOX,
            "IndexName": tables.OUTBOX_DUE_INDEX,
            "KeyConditionExpression": "#bucket = :bucket AND #at <= :due_by",
            "ExpressionAttributeNames": {
                "#bucket": tables.OUTBOX_DUE_BUCKET,
                "#at": tables.OUTBOX_DUE_AT,
            },
            "ExpressionAttributeValues": {":bucket": s("due#0"), ":due_by": n(103)},
        }
        changed = {
            "TableName": LEDGER,
            "IndexName": tables.LEDGER_CHANGES_INDEX,
            "KeyConditionExpression": "#bucket = :bucket",
            "ExpressionAttributeNames": {"#bucket": tables.CHANGES_BUCKET},
            "ExpressionAttributeValues": {":bucket": s("2026-12-04T05#1")},
        }
        return [
            *outbox,
            *ledger,
            ("query", due),
            ("query", {**due, "Limit": 1}),
            ("query", changed),
            ("query", {**changed, "Select": "COUNT"}),
        ]

    moto, memory = both(requests, unordered=True)

    # Then the same items, keys only, in each index
    assert memory == moto


def test_batch_reads_and_set_membership_answer_alike() -> None:
    # Given bindings read in a batch (one missing) and a sent item re-opened only once
    reopen = {
        "TableName": OUTBOX,
        "Key": {tables.OUTBOX_KEY: s("obx_1")},
        "UpdateExpression": "SET #status = :pending REMOVE email_owed",
        "ConditionExpression": (
            "#status = :sent AND email_owed = :owed AND NOT contains(channels_sent, :email)"
        ),
        "ExpressionAttributeNames": {"#status": "status"},
        "ExpressionAttributeValues": {
            ":pending": s("pending"),
            ":sent": s("sent"),
            ":owed": {"BOOL": True},
            ":email": s("email"),
        },
    }

    def requests() -> list[Request]:
        return [
            (
                "put_item",
                {"TableName": LEDGER, "Item": item("REF#stripe#pi_1", "REF", order_id=s("1"))},
            ),
            (
                "batch_get_item",
                {
                    "RequestItems": {
                        LEDGER: {
                            "Keys": [key("REF#stripe#pi_1", "REF"), key("REF#stripe#pi_2", "REF")],
                            "ConsistentRead": True,
                        }
                    }
                },
            ),
            (
                "put_item",
                {
                    "TableName": OUTBOX,
                    "Item": {
                        tables.OUTBOX_KEY: s("obx_1"),
                        "status": s("sent"),
                        "email_owed": {"BOOL": True},
                        "channels_sent": {"SS": ["eventbridge"]},
                    },
                },
            ),
            ("update_item", reopen),
            ("update_item", reopen),
            (
                "delete_item",
                {
                    "TableName": LEDGER,
                    "Key": key("REF#stripe#pi_1", "REF"),
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": PK,
                    "ReturnValues": "ALL_OLD",
                },
            ),
            (
                "delete_item",
                {
                    "TableName": LEDGER,
                    "Key": key("REF#stripe#pi_1", "REF"),
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": PK,
                },
            ),
        ]

    moto, memory = both(requests)

    # Then the same answers: the batch names what it found, the second re-opening is refused
    assert memory == moto
    assert moto[4][0] == "ConditionalCheckFailedException"


def test_requests_both_refuse_are_refused_alike() -> None:
    # Given a key of the wrong shape, a table that does not exist, a key attribute updated
    def requests() -> list[Request]:
        return [
            ("get_item", {"TableName": LEDGER, "Key": {tables.PARTITION_KEY: s("ORDER#1")}}),
            ("get_item", {"TableName": "no-such-table", "Key": key("a", "b")}),
            (
                "update_item",
                {
                    "TableName": LEDGER,
                    "Key": key("ORDER#1", "ORDER"),
                    "UpdateExpression": "SET #sk = :x",
                    "ExpressionAttributeNames": {"#sk": tables.SORT_KEY},
                    "ExpressionAttributeValues": {":x": s("other")},
                },
            ),
        ]

    moto, memory = both(requests)

    # Then both refuse each the same way
    assert [v[0] for v in memory] == [v[0] for v in moto]


def stream_of_outbox(client: Any) -> list[Any]:
    """The outbox's stream as its records' verdicts: what changed, with which keys and image
    (their ids, numbers and times are the stream's own)."""
    streams = boto3.client("dynamodbstreams")
    arn = client.describe_table(TableName=OUTBOX)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    records = streams.get_records(ShardIterator=iterator)["Records"]
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence == sorted(sequence)
    return [
        (
            r["eventName"],
            r["dynamodb"]["Keys"],
            r["dynamodb"].get("NewImage"),
            r["dynamodb"].get("OldImage"),
            r["dynamodb"]["StreamViewType"],
        )
        for r in records
    ]


def test_the_outbox_stream_records_the_same_writes_in_the_same_order() -> None:
    # Given writes to the outbox: two new items, an update, a conditional put that fails, a
    # cancelled transaction, a transaction that holds, a delete
    def outbox(outbox_id: str, **fields: Any) -> dict[str, Any]:
        return {tables.OUTBOX_KEY: s(outbox_id), **fields}

    guarded = {"ConditionExpression": "attribute_not_exists(outbox_id)"}
    writes: list[Request] = [
        ("put_item", {"TableName": OUTBOX, "Item": outbox("o1", state=s("new"))}),
        ("put_item", {"TableName": OUTBOX, "Item": outbox("o2", state=s("new"))}),
        (
            "update_item",
            {
                "TableName": OUTBOX,
                "Key": outbox("o1"),
                "UpdateExpression": "SET #s = :sent",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":sent": s("sent")},
            },
        ),
        ("put_item", {"TableName": OUTBOX, "Item": outbox("o2"), **guarded}),
        (
            "transact_write_items",
            {
                "TransactItems": [
                    {"Put": {"TableName": OUTBOX, "Item": outbox("o3")}},
                    {"Put": {"TableName": OUTBOX, "Item": outbox("o1"), **guarded}},
                ]
            },
        ),
        (
            "transact_write_items",
            {"TransactItems": [{"Put": {"TableName": OUTBOX, "Item": outbox("o4"), **guarded}}]},
        ),
        ("delete_item", {"TableName": OUTBOX, "Key": outbox("o2")}),
    ]

    # When run on moto and in memory, and the stream read from its start
    (moto, moto_stream), (memory, memory_stream) = both(lambda: writes, then=stream_of_outbox)

    # Then both refused the same writes, and recorded the others alike: INSERT, INSERT,
    # MODIFY, INSERT, REMOVE, new images only
    assert memory == moto
    assert memory_stream == moto_stream
    assert [r[0] for r in moto_stream] == ["INSERT", "INSERT", "MODIFY", "INSERT", "REMOVE"]
