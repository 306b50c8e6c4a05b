"""DynamoDB's operations over tables held in memory, request and answer in the wire's JSON shape
(the very parameters boto3 sends and the answers it parses): the single-item writes and their
conditions, TransactWriteItems (every condition checked before anything is written, refusals
by position with the items found), Query and Scan with their pages, filters and indexes,
BatchGetItem and BatchWriteItem; and the tables' streams (`streams.py`, `handle_streams`).

One lock around each request: the store is serializable by construction, as DynamoDB is per
item and per transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from devstack.memory import expressions, streams, updates
from devstack.memory.dispatch import handler_for
from devstack.memory.tables import DynamoError, Table, validation

Request = Mapping[str, Any]
Answer = dict[str, Any]
UNKNOWN_OPERATION = "UnknownOperationException"  # DynamoDB's code for an action it lacks
ACCOUNT = "123456789012"
CONDITION_FAILED = "The conditional request failed"


class MemoryDynamoDB:
    """Every table of one account and region, in memory."""

    def __init__(self, region: str = "us-east-1") -> None:
        self._region = region
        self._tables: dict[str, Table] = {}
        self._lock = threading.Lock()
        self._operations: dict[str, Callable[[Request], Answer]] = {
            "CreateTable": self._create_table,
            "DeleteTable": self._delete_table,
            "DescribeTable": lambda r: {"Table": self.table(r["TableName"]).description},
            "ListTables": lambda r: {"TableNames": sorted(self._tables)},
            "GetItem": self._get_item,
            "PutItem": self._put_item,
            "UpdateItem": self._update_item,
            "DeleteItem": self._delete_item,
            "TransactWriteItems": self._transact_write_items,
            "BatchGetItem": self._batch_get_item,
            "BatchWriteItem": self._batch_write_item,
            "Query": self._query,
            "Scan": self._scan,
        }

    def handle(self, operation: str, request: Request) -> Answer:
        """One request: its answer, or the DynamoError DynamoDB would answer with."""
        handler = handler_for(self._operations, operation, DynamoError, UNKNOWN_OPERATION)
        with self._lock:
            try:
                return handler(request)
            except expressions.ExpressionError as error:
                raise validation(str(error)) from None

    def handle_streams(self, operation: str, request: Request) -> Answer:
        """One DynamoDB Streams request, under the same lock as the tables' writes."""
        handler = handler_for(streams.OPERATIONS, operation, DynamoError, UNKNOWN_OPERATION)
        with self._lock:
            return handler(self._streams(), request)

    def _streams(self) -> dict[str, streams.Stream]:
        return {
            name: t.stream
            for name, t in self._tables.items()
            if isinstance(t.stream, streams.Stream)
        }

    def table(self, name: str) -> Table:
        try:
            return self._tables[name]
        except KeyError:
            raise DynamoError("ResourceNotFoundException", "Requested resource not found") from None

    def clear(self) -> None:
        """Every table emptied, as new."""
        with self._lock:
            for table in self._tables.values():
                table.clear()

    # -- tables -----------------------------------------------------------------------------

    def _create_table(self, request: Request) -> Answer:
        name = request["TableName"]
        if name in self._tables:
            raise DynamoError("ResourceInUseException", f"Table already exists: {name}")
        arn = f"arn:aws:dynamodb:{self._region}:{ACCOUNT}:table/{name}"
        table = self._tables[name] = Table.created(request, arn)
        if "LatestStreamArn" in table.description:
            table.stream = streams.Stream(
                table.description["LatestStreamArn"],
                table.description["LatestStreamLabel"],
                request["StreamSpecification"]["StreamViewType"],
                name,
                list(request["KeySchema"]),
                region=self._region,
            )
        return {"TableDescription": self._tables[name].description}

    def _delete_table(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        del self._tables[table.name]
        return {"TableDescription": table.description}

    # -- single items -----------------------------------------------------------------------

    def _get_item(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        item = table.get(table.checked_key(request["Key"]))
        if item is None:
            return {}
        return {
            "Item": expressions.projected(
                item, request.get("ProjectionExpression"), request.get("ExpressionAttributeNames")
            )
        }

    def _put_item(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        item = dict(request["Item"])
        position = table.position(item)
        before = table.get(position)
        _require(request, before)
        table.put(item)
        return _returned(request, before, item)

    def _update_item(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        key = dict(request["Key"])
        position = table.checked_key(key)
        before = table.get(position)
        _require(request, before)
        after = _updated(table, before or key, request)
        table.put(after)
        return _returned(request, before, after)

    def _delete_item(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        position = table.checked_key(request["Key"])
        before = table.get(position)
        _require(request, before)
        table.delete(position)
        return _returned(request, before, None)

    # -- transactions -----------------------------------------------------------------------

    def _transact_write_items(self, request: Request) -> Answer:
        writes = list(request["TransactItems"])
        if not 1 <= len(writes) <= 100:
            raise validation("Member must have length less than or equal to 100")
        planned = [self._planned(write) for write in writes]
        positions = [(table.name, position) for _, table, position, _ in planned]
        if len(set(positions)) != len(positions):
            raise validation("Transaction request cannot include multiple operations on one item")
        reasons = [
            self._reason(kind, table, position, body) for kind, table, position, body in planned
        ]
        if any(reason["Code"] != "None" for reason in reasons):
            raise DynamoError(
                "TransactionCanceledException",
                "Transaction cancelled, please refer cancellation reasons for specific reasons "
                f"[{', '.join(reason['Code'] for reason in reasons)}]",
                CancellationReasons=reasons,
            )
        # Every new image made and checked before the first is written: all or nothing.
        images = [_image(kind, table, position, body) for kind, table, position, body in planned]
        for (kind, table, position, _), image in zip(planned, images, strict=True):
            if kind == "Delete":
                table.delete(position)
            elif image is not None:
                table.put(image)
        return {}

    def _planned(self, write: Mapping[str, Any]) -> tuple[str, Table, tuple[Any, Any], Request]:
        (kind, body), *more = write.items()
        if more or kind not in ("Put", "Update", "Delete", "ConditionCheck"):
            raise validation(
                "A transact item names exactly one of Put, Update, Delete, ConditionCheck"
            )
        table = self.table(body["TableName"])
        position = table.position(body["Item"]) if kind == "Put" else table.checked_key(body["Key"])
        return kind, table, position, body

    @staticmethod
    def _reason(kind: str, table: Table, position: tuple[Any, Any], body: Request) -> Answer:
        before = table.get(position)
        if _holds(body, before):
            return {"Code": "None"}
        reason: Answer = {"Code": "ConditionalCheckFailed", "Message": CONDITION_FAILED}
        if before is not None and body.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
            reason["Item"] = before
        return reason

    # -- batches ----------------------------------------------------------------------------

    def _batch_get_item(self, request: Request) -> Answer:
        responses: dict[str, list[Any]] = {}
        for name, wanted in request["RequestItems"].items():
            table = self.table(name)
            found = [table.get(table.checked_key(key)) for key in wanted["Keys"]]
            responses[name] = [
                expressions.projected(
                    item, wanted.get("ProjectionExpression"), wanted.get("ExpressionAttributeNames")
                )
                for item in found
                if item is not None
            ]
        return {"Responses": responses, "UnprocessedKeys": {}}

    def _batch_write_item(self, request: Request) -> Answer:
        for name, writes in request["RequestItems"].items():
            table = self.table(name)
            for write in writes:
                if "PutRequest" in write:
                    table.put(dict(write["PutRequest"]["Item"]))
                else:
                    table.delete(table.checked_key(write["DeleteRequest"]["Key"]))
        return {"UnprocessedItems": {}}

    # -- reads of many items ----------------------------------------------------------------

    def _query(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        names = request.get("ExpressionAttributeNames")
        values = request.get("ExpressionAttributeValues", {})
        index = table.indexes.get(request["IndexName"]) if "IndexName" in request else None
        if "IndexName" in request and index is None:
            raise validation("The table does not have the specified index: " + request["IndexName"])
        hash_name = index.hash_key if index else table.hash_key
        hash_value = _hash_value(request["KeyConditionExpression"], names, values, hash_name)
        matches = expressions.condition(request["KeyConditionExpression"], names)
        if index is None:
            candidates = table.partition(hash_value)
        else:
            candidates = [
                table.projected_by(index, item) for item in table.indexed(index, hash_value)
            ]
        found = [item for item in candidates if matches(item, values)]
        order = table.in_index(index) if index else table.in_partition
        forward = request.get("ScanIndexForward", True)
        if not forward:
            found.reverse()
        key_names = [*table.key_names(), *([index.hash_key, index.range_key] if index else [])]
        return _page(found, request, [n for n in dict.fromkeys(key_names) if n], order, forward)

    def _scan(self, request: Request) -> Answer:
        table = self.table(request["TableName"])
        if "IndexName" not in request:
            found = list(table.all_items())
            return _page(found, request, list(table.key_names()), table.in_table, True)
        index = table.indexes.get(request["IndexName"])
        if index is None:
            raise validation("The table does not have the specified index: " + request["IndexName"])
        keys = [*table.key_names(), *[k for k in (index.hash_key, index.range_key) if k]]
        found = [
            table.projected_by(index, item)
            for item in table.all_items()
            if all(name in item for name in keys)
        ]
        return _page(found, request, list(dict.fromkeys(keys)), table.in_table, True)


def _hash_value(
    text: str, names: Mapping[str, str] | None, values: Mapping[str, Any], hash_name: str
) -> Any:
    """The partition a key condition names (`#hash = :value` is its first clause)."""
    parsed = expressions.tokens(text)
    for n, (kind, word) in enumerate(parsed[:-2]):
        name = (names or {}).get(word) if kind == "name" else word
        if name == hash_name and parsed[n + 1][1] == "=" and parsed[n + 2][0] == "value":
            return expressions.plain(values[parsed[n + 2][1]])
    raise validation("Query condition missed key schema element: " + hash_name)


def _page(
    found: list[Any],
    request: Request,
    key_names: list[str],
    order: Callable[[Mapping[str, Any]], Any],
    forward: bool,
) -> Answer:
    """One page: after ExclusiveStartKey (where it sorts: its item may be gone), at most
    Limit items read, then filtered."""
    start = request.get("ExclusiveStartKey")
    if start is not None:
        mark = order(start)
        found = [item for item in found if (order(item) > mark if forward else order(item) < mark)]
    limit = request.get("Limit")
    page = found[:limit] if limit else found
    # DynamoDB names the last key of a page the Limit filled, whether or not more follow.
    more = bool(limit) and len(page) == limit
    names = request.get("ExpressionAttributeNames")
    if "FilterExpression" in request:
        keep = expressions.condition(request["FilterExpression"], names)
        values = request.get("ExpressionAttributeValues", {})
        kept = [item for item in page if keep(item, values)]
    else:
        kept = page
    answer: Answer = {"Count": len(kept), "ScannedCount": len(page)}
    if request.get("Select") != "COUNT":
        answer["Items"] = [
            expressions.projected(item, request.get("ProjectionExpression"), names) for item in kept
        ]
    if more:
        last = page[-1]
        answer["LastEvaluatedKey"] = {name: last[name] for name in key_names if name in last}
    return answer


def _image(kind: str, table: Table, position: tuple[Any, Any], body: Request) -> Any:
    """What a transaction's item writes (None: nothing, or a deletion), checked."""
    if kind == "Put":
        image = dict(body["Item"])
    elif kind == "Update":
        image = _updated(table, table.get(position) or dict(body["Key"]), body)
    else:
        return None
    table.check(image)
    return image


def _holds(request: Request, before: Any) -> bool:
    if "ConditionExpression" not in request:
        return True
    condition = expressions.condition(
        request["ConditionExpression"], request.get("ExpressionAttributeNames")
    )
    return condition(before or {}, request.get("ExpressionAttributeValues", {}))


def _require(request: Request, before: Any) -> None:
    """A single write's condition, or ConditionalCheckFailedException (with the item found,
    when asked)."""
    if _holds(request, before):
        return
    fields: dict[str, Any] = {}
    if before is not None and request.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD":
        fields["Item"] = before
    raise DynamoError("ConditionalCheckFailedException", CONDITION_FAILED, **fields)


def _updated(table: Table, item: Mapping[str, Any], request: Request) -> Any:
    text, names = request.get("UpdateExpression", ""), request.get("ExpressionAttributeNames")
    for name in sorted(updates.targets(text, names) & set(table.key_names())):
        raise validation(
            "One or more parameter values were invalid: Cannot update attribute "
            f"{name}. This attribute is part of the key"
        )
    after = updates.updated(
        dict(item),
        request.get("UpdateExpression", ""),
        request.get("ExpressionAttributeNames"),
        request.get("ExpressionAttributeValues", {}),
    )
    if table.key_of(after) != table.key_of(item):
        raise validation(
            "One or more parameter values were invalid: Cannot update attribute "
            "that is part of the key"
        )
    return after


def _returned(request: Request, before: Any, after: Any) -> Answer:
    wanted = request.get("ReturnValues", "NONE")
    if wanted == "ALL_OLD" and before is not None:
        return {"Attributes": before}
    if wanted == "ALL_NEW" and after is not None:
        return {"Attributes": after}
    if wanted in ("UPDATED_NEW", "UPDATED_OLD"):
        source = after if wanted == "UPDATED_NEW" else before
        if source is None:
            return {}
        changed = {
            name: value
            for name, value in source.items()
            if (before or {}).get(name) != (after or {}).get(name)
        }
        return {"Attributes": changed} if changed else {}
    return {}
