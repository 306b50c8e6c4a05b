"""A table held in memory: its keys, its global secondary indexes, its items in the wire's
typed form, read in DynamoDB's orders (a partition by its sort key; an index by its keys), and
its stream when it has one (`streams.py`: every put and delete of an item records itself)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Protocol

from devstack.memory.expressions import Item, plain

# DynamoDB refuses an item over 400 KB (names and values, in their UTF-8 or number sizes).
ITEM_SIZE_LIMIT = 400 * 1024


class DynamoError(Exception):
    """What DynamoDB answers with an error: its code, its message and any modeled fields."""

    def __init__(self, code: str, message: str, **fields: Any) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.fields = fields


def validation(message: str) -> DynamoError:
    return DynamoError("ValidationException", message)


class StreamLog(Protocol):
    """Where a table's writes are recorded (`streams.Stream`)."""

    def add(self, keys: Item, old: Item | None, new: Item | None) -> None: ...

    def clear(self) -> None: ...


@dataclass(frozen=True)
class Index:
    name: str
    hash_key: str
    range_key: str | None
    projection: str
    included: tuple[str, ...] = ()


def _keys(schema: list[Mapping[str, str]]) -> tuple[str, str | None]:
    hash_key = next(k["AttributeName"] for k in schema if k["KeyType"] == "HASH")
    range_key = next((k["AttributeName"] for k in schema if k["KeyType"] == "RANGE"), None)
    return hash_key, range_key


def _order(value: Any) -> Any:
    """A key value as DynamoDB orders it (numbers by value, strings by code point)."""
    return plain(value) if value is not None else Decimal(0)


@dataclass
class Table:
    name: str
    hash_key: str
    range_key: str | None
    attribute_types: dict[str, str]
    indexes: dict[str, Index]
    description: dict[str, Any]
    # hash key's plain value -> range key's plain value (None without one) -> item
    partitions: dict[Any, dict[Any, Item]] = field(default_factory=dict)
    # Set by the store for a table created with a stream.
    stream: StreamLog | None = None
    # index name -> the index's hash key's plain value -> table position -> item: what a
    # Query of an index reads, however large the table.
    in_indexes: dict[str, dict[Any, dict[tuple[Any, Any], Item]]] = field(default_factory=dict)

    @classmethod
    def created(cls, request: Mapping[str, Any], arn: str) -> Table:
        hash_key, range_key = _keys(request["KeySchema"])
        indexes = {}
        for gsi in request.get("GlobalSecondaryIndexes", []):
            index_hash, index_range = _keys(gsi["KeySchema"])
            projection = gsi.get("Projection", {})
            indexes[gsi["IndexName"]] = Index(
                gsi["IndexName"],
                index_hash,
                index_range,
                projection.get("ProjectionType", "ALL"),
                tuple(projection.get("NonKeyAttributes", ())),
            )
        types = {a["AttributeName"]: a["AttributeType"] for a in request["AttributeDefinitions"]}
        description = {
            "TableName": request["TableName"],
            "TableArn": arn,
            "TableStatus": "ACTIVE",
            "KeySchema": request["KeySchema"],
            "AttributeDefinitions": request["AttributeDefinitions"],
            "BillingModeSummary": {"BillingMode": request.get("BillingMode", "PROVISIONED")},
            "GlobalSecondaryIndexes": [
                {**gsi, "IndexStatus": "ACTIVE", "IndexArn": f"{arn}/index/{gsi['IndexName']}"}
                for gsi in request.get("GlobalSecondaryIndexes", [])
            ],
        }
        if not description["GlobalSecondaryIndexes"]:
            del description["GlobalSecondaryIndexes"]
        if request.get("StreamSpecification", {}).get("StreamEnabled"):
            description["StreamSpecification"] = request["StreamSpecification"]
            label = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
            description["LatestStreamLabel"] = label
            description["LatestStreamArn"] = f"{arn}/stream/{label}"
        return cls(request["TableName"], hash_key, range_key, types, indexes, description)

    # -- keys -------------------------------------------------------------------------------

    def key_names(self) -> tuple[str, ...]:
        return (self.hash_key,) if self.range_key is None else (self.hash_key, self.range_key)

    def checked_key(self, key: Mapping[str, Any]) -> tuple[Any, Any]:
        """A Key's (hash, range) as plain values; a key that is not the table's is refused."""
        if set(key) != set(self.key_names()):
            raise validation("The provided key element does not match the schema")
        return self.position(key)

    def position(self, item: Mapping[str, Any]) -> tuple[Any, Any]:
        for name in self.key_names():
            value = item.get(name)
            if value is None or next(iter(value)) != self.attribute_types[name]:
                raise validation(
                    "One or more parameter values were invalid: Type mismatch for key " + name
                )
            if next(iter(value.values())) == "":
                raise validation(
                    "One or more parameter values are not valid. The AttributeValue for a key "
                    "attribute cannot contain an empty string value. Key: " + name
                )
        hash_value = plain(item[self.hash_key])
        return hash_value, (plain(item[self.range_key]) if self.range_key else None)

    def key_of(self, item: Mapping[str, Any]) -> Item:
        return {name: item[name] for name in self.key_names()}

    # -- items ------------------------------------------------------------------------------

    def get(self, position: tuple[Any, Any]) -> Item | None:
        return self.partitions.get(position[0], {}).get(position[1])

    def put(self, item: Item) -> None:
        self.check(item)
        hash_value, range_value = self.position(item)
        partition = self.partitions.setdefault(hash_value, {})
        before = partition.get(range_value)
        stored = partition[range_value] = copy.deepcopy(item)
        self._reindexed((hash_value, range_value), before, stored)
        if self.stream is not None:
            self.stream.add(self.key_of(stored), before, stored)

    def _reindexed(
        self, position: tuple[Any, Any], before: Item | None, after: Item | None
    ) -> None:
        for index in self.indexes.values():
            entries = self.in_indexes.setdefault(index.name, {})
            if before is not None and (old := _index_hash(index, before)) is not None:
                bucket = entries.get(old, {})
                bucket.pop(position, None)
                if not bucket:
                    entries.pop(old, None)
            if after is not None and (new := _index_hash(index, after)) is not None:
                entries.setdefault(new, {})[position] = after

    def check(self, item: Item) -> None:
        """Refused as DynamoDB refuses it: too large, or an index key of the wrong type."""
        size = item_size(item)
        if size > ITEM_SIZE_LIMIT:
            raise validation("Item size has exceeded the maximum allowed size")
        for index in self.indexes.values():
            for name in filter(None, (index.hash_key, index.range_key)):
                value = item.get(name)
                if value is not None and next(iter(value)) != self.attribute_types[name]:
                    raise validation(
                        "One or more parameter values were invalid: Type mismatch for Index Key "
                        f"{name} Expected: {self.attribute_types[name]} "
                        f"Actual: {next(iter(value))} IndexName: {index.name}"
                    )
        self.position(item)

    def delete(self, position: tuple[Any, Any]) -> None:
        partition = self.partitions.get(position[0])
        if partition is not None:
            before = partition.pop(position[1], None)
            if not partition:
                del self.partitions[position[0]]
            self._reindexed(position, before, None)
            if before is not None and self.stream is not None:
                self.stream.add(self.key_of(before), before, None)

    def in_partition(self, item: Mapping[str, Any]) -> Any:
        """Where an item (or a start key) sorts within its partition."""
        return _order(item.get(self.range_key)) if self.range_key else Decimal(0)

    def in_table(self, item: Mapping[str, Any]) -> Any:
        """Where an item sorts in a scan: by partition, then within it."""
        return (_order(item.get(self.hash_key)), self.in_partition(item))

    def in_index(self, index: Index) -> Callable[[Mapping[str, Any]], Any]:
        """Where an item sorts within a partition of `index`: its sort key, then the table's."""

        def order(item: Mapping[str, Any]) -> Any:
            own = _order(item.get(index.range_key)) if index.range_key else Decimal(0)
            return (own, self.in_table(item))

        return order

    def partition(self, hash_value: Any) -> list[Item]:
        """A partition's items by their sort key."""
        items = self.partitions.get(hash_value, {})
        return [items[k] for k in sorted(items, key=lambda k: (k is not None, k))]

    def all_items(self) -> Iterator[Item]:
        for hash_value in sorted(self.partitions):
            yield from self.partition(hash_value)

    def indexed(self, index: Index, hash_value: Any) -> list[Item]:
        """The items in one partition of `index`, ordered by its sort key, then the table's."""
        found = self.in_indexes.get(index.name, {}).get(hash_value, {}).values()
        return sorted(found, key=self.in_index(index))

    def projected_by(self, index: Index, item: Item) -> Item:
        if index.projection == "ALL":
            return item
        keep = {*self.key_names(), index.hash_key, *([index.range_key] if index.range_key else [])}
        if index.projection == "INCLUDE":
            keep |= set(index.included)
        return {name: value for name, value in item.items() if name in keep}

    def clear(self) -> None:
        self.partitions.clear()
        self.in_indexes.clear()
        if self.stream is not None:
            self.stream.clear()


def _index_hash(index: Index, item: Mapping[str, Any]) -> Any:
    """The plain value of the item's key in `index`, None when the item is not in it."""
    if index.hash_key not in item or (index.range_key and index.range_key not in item):
        return None
    return plain(item[index.hash_key])


def item_size(item: Mapping[str, Any]) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def value_size(value: Any) -> int:
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return len(str(inner).encode())
    if kind == "N":
        return len(str(inner)) // 2 + 2
    if kind == "B":
        return len(inner)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind in ("SS", "BS"):
        return sum(len(str(v).encode()) for v in inner)
    if kind == "NS":
        return sum(len(str(v)) // 2 + 2 for v in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    return 3 + sum(len(k.encode()) + 1 + value_size(v) for k, v in inner.items())
