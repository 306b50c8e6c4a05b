"""DynamoDB capacity as on-demand billing counts it, computed from the requests a server serves.

The rules, from the DynamoDB developer guide (sources in `devstack/prices.toml`):

- **Item size** (CapacityUnitCalculations): the sum, per attribute, of the name's UTF-8 bytes
  and the value's size. String: UTF-8 bytes. Number: 1 byte per two significant digits, plus
  1 (leading and trailing zeros trimmed; the docs call it approximate). Binary: raw bytes.
  Boolean, null: 1. List, map: 3 bytes plus 1 byte per element plus the elements (a map's
  element includes its key's bytes). Set: the sum of its elements.
- **Standard writes** (PutItem, UpdateItem, DeleteItem, BatchWriteItem): 1 WRU per KB of the
  item, rounded up per item, of the larger of the item before and after the write. A write whose
  condition fails still consumes the larger of the existing item and the one it tried to write
  (at least 1 WRU).
- **Transactions** (TransactWriteItems): two underlying writes per item (prepare, commit):
  2 WRU per KB per item, rounded up per item, *also when the transaction is cancelled*. A
  `ConditionCheck` reads: counted as a transactional read, 2 RRU per 4 KB of the item checked.
  (The docs say transactions consume reads for condition checks; the 2x is our reading.)
  A cancelled action is sized like a failed conditional write: the larger of the existing item
  and the item a Put tried to write (an Update's result is not computed: its existing item).
- **Reads**: 1 RRU per 4 KB strongly consistent, 0.5 eventually consistent, 2 transactional.
  GetItem and BatchGetItem round each item up separately, a missing item costs the minimum;
  Query and Scan round the total of the items they evaluated (one page per request).
- **Global secondary indexes** (GSI developer guide): a table write costs index writes, 1 WRU
  per KB of the index entry (standard writes, also under a transaction): one when an item
  enters the index (its index key attributes written), one when it leaves it (a key attribute
  removed, or the item deleted), two when an index key attribute changes (delete + put), one
  when only a projected non-key attribute changes, none otherwise. An entry is its projected
  attributes (keys only: the table's and the index's keys) plus 100 bytes of overhead.

Approximation: an UpdateItem's size after the write is read back from the store, not computed
from the expression; a Query/Scan with a filter, a projection or `Select=COUNT` is billed on
what it evaluated, estimated as the average returned item size times `ScannedCount`.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Protocol

Item = Mapping[str, Any]  # an item in DynamoDB's typed JSON: {"name": {"S": "..."}}


class Units(dict[str, float]):
    """Amounts by name (request units, requests, bytes): missing names are 0; `minus` never
    goes below 0 and drops what is left at 0, like `collections.Counter` but in floats."""

    def __missing__(self, key: str) -> float:
        return 0.0

    def add(self, other: Mapping[str, float]) -> Units:
        for name, amount in other.items():
            self[name] = self[name] + amount
        return self

    def minus(self, other: Mapping[str, float]) -> Units:
        left = Units({k: v - other.get(k, 0.0) for k, v in self.items()})
        return Units({k: v for k, v in left.items() if v > 1e-12})

    def scaled(self, factor: float) -> Units:
        return Units({k: v * factor for k, v in self.items()})


WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
INDEX_ENTRY_OVERHEAD_BYTES = 100
TRANSACTION_FACTOR = 2


# -- item size ---------------------------------------------------------------------------------


def number_size(text: str) -> int:
    """1 byte per two significant digits, plus 1."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        return len(text)
    digits = "".join(str(d) for d in value.as_tuple().digits).strip("0")
    return math.ceil(len(digits) / 2) + 1


def value_size(value: Mapping[str, Any]) -> int:
    ((kind, content),) = value.items()
    if kind == "S":
        return len(str(content).encode())
    if kind == "N":
        return number_size(str(content))
    if kind == "B":
        return len(_raw(content))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(str(s).encode()) for s in content)
    if kind == "NS":
        return sum(number_size(str(n)) for n in content)
    if kind == "BS":
        return sum(len(_raw(b)) for b in content)
    if kind == "L":
        return 3 + sum(1 + value_size(element) for element in content)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in content.items())
    raise ValueError(f"unknown DynamoDB type {kind!r}")


def item_size(item: Item | None) -> int:
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(value) for name, value in item.items())


def _raw(content: Any) -> bytes:
    if isinstance(content, bytes):
        return content
    return base64.b64decode(str(content))


# -- units -------------------------------------------------------------------------------------


def write_units(size: int) -> int:
    """Standard write of one item: 1 WRU per KB, rounded up, at least 1."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def read_units(size: int, consistent: bool) -> float:
    """One read (an item, or a Query page): per 4 KB, rounded up, at least one unit."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    return float(units) if consistent else units / 2


# -- tables and indexes ------------------------------------------------------------------------


@dataclass(frozen=True)
class Index:
    name: str
    keys: tuple[str, ...]
    projection: str = "KEYS_ONLY"  # KEYS_ONLY, INCLUDE or ALL
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class TableSchema:
    name: str
    keys: tuple[str, ...]
    indexes: tuple[Index, ...] = ()

    def key_of(self, item: Item) -> dict[str, Any]:
        return {k: item[k] for k in self.keys if k in item}

    @classmethod
    def from_create_request(cls, request: Mapping[str, Any]) -> TableSchema:
        """From CreateTable arguments (`functions.shared.tables.create_table_requests`)."""

        def keys(schema: Iterable[Mapping[str, str]]) -> tuple[str, ...]:
            return tuple(k["AttributeName"] for k in schema)

        indexes = tuple(
            Index(
                index["IndexName"],
                keys(index["KeySchema"]),
                index["Projection"]["ProjectionType"],
                tuple(index["Projection"].get("NonKeyAttributes", ())),
            )
            for index in request.get("GlobalSecondaryIndexes", ())
        )
        return cls(request["TableName"], keys(request["KeySchema"]), indexes)


def index_entry(item: Item | None, index: Index, table: TableSchema) -> dict[str, Any] | None:
    """The item as the index holds it, or None when it is not in the index (sparse)."""
    if item is None or any(k not in item for k in index.keys):
        return None
    if index.projection == "ALL":
        return dict(item)
    names = {*table.keys, *index.keys, *index.include}
    return {k: v for k, v in item.items() if k in names}


def index_write_units(
    before: Item | None, after: Item | None, index: Index, table: TableSchema
) -> int:
    old, new = index_entry(before, index, table), index_entry(after, index, table)
    if old is None and new is None:
        return 0
    if old is None:
        return write_units(item_size(new) + INDEX_ENTRY_OVERHEAD_BYTES)
    if new is None:
        return write_units(item_size(old) + INDEX_ENTRY_OVERHEAD_BYTES)
    if any(old.get(k) != new.get(k) for k in index.keys):
        return write_units(item_size(old) + INDEX_ENTRY_OVERHEAD_BYTES) + write_units(
            item_size(new) + INDEX_ENTRY_OVERHEAD_BYTES
        )
    if old != new:
        return write_units(item_size(new) + INDEX_ENTRY_OVERHEAD_BYTES)
    return 0


# -- requests ----------------------------------------------------------------------------------


class Store(Protocol):
    """What the accounting reads from the database: schemas, and items by key."""

    def schema(self, table: str) -> TableSchema: ...

    def item(self, table: str, key: Item) -> dict[str, Any] | None: ...


@dataclass
class WriteAction:
    kind: str  # Put, Update, Delete, ConditionCheck
    table: str
    key: dict[str, Any]
    attempted: Item | None  # the item a Put tries to write
    before: dict[str, Any] | None = None


@dataclass
class Pending:
    """A DynamoDB request about to be served: what it writes, with those items as they were."""

    operation: str
    request: Mapping[str, Any]
    writes: list[WriteAction] = field(default_factory=list)


WRITE_OPERATIONS = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


class Accounting:
    """Capacity of each DynamoDB request: `before` it is served, `after` with its response.

    Units are keyed `metric:table` (`wru_index:table/index` for index writes): `wru_standard`,
    `wru_transaction`, `wru_index`, `rru_strong`, `rru_eventual`, `rru_transaction`, and, for
    information, `items_written`, `bytes_written`, `cancelled_transactions`.
    """

    def __init__(self, store: Store) -> None:
        self._store = store

    def before(self, operation: str, request: Mapping[str, Any]) -> Pending:
        pending = Pending(operation, request)
        if operation in WRITE_OPERATIONS:
            pending.writes = self._write_actions(operation, request)
            for action in pending.writes:
                action.before = self._store.item(action.table, action.key)
        return pending

    def after(self, pending: Pending, ok: bool, response: Mapping[str, Any]) -> Units:
        operation, request = pending.operation, pending.request
        if operation in WRITE_OPERATIONS:
            return self._writes(pending, ok, response)
        if not ok:
            return Units()
        if operation == "GetItem":
            return self._item_reads(
                request["TableName"], [request["Key"]], bool(request.get("ConsistentRead"))
            )
        if operation == "BatchGetItem":
            units: Units = Units()
            for table, keys in request.get("RequestItems", {}).items():
                units.add(
                    self._item_reads(table, keys.get("Keys", []), bool(keys.get("ConsistentRead")))
                )
            return units
        if operation == "TransactGetItems":
            units = Units()
            for entry in request.get("TransactItems", []):
                get = entry["Get"]
                size = item_size(self._store.item(get["TableName"], get["Key"]))
                units[f"rru_transaction:{get['TableName']}"] += TRANSACTION_FACTOR * read_units(
                    size, consistent=True
                )
            return units
        if operation in ("Query", "Scan"):
            return self._query(request, response)
        return Units()

    # -- writes --------------------------------------------------------------------------------

    def _write_actions(self, operation: str, request: Mapping[str, Any]) -> list[WriteAction]:
        if operation == "PutItem":
            return [self._put(request)]
        if operation in ("UpdateItem", "DeleteItem"):
            kind = operation.removesuffix("Item")
            return [WriteAction(kind, request["TableName"], dict(request["Key"]), None)]
        if operation == "BatchWriteItem":
            actions = []
            for table, requests in request.get("RequestItems", {}).items():
                for write in requests:
                    if "PutRequest" in write:
                        actions.append(self._put({"TableName": table, **write["PutRequest"]}))
                    else:
                        key = dict(write["DeleteRequest"]["Key"])
                        actions.append(WriteAction("Delete", table, key, None))
            return actions
        actions = []
        for entry in request.get("TransactItems", []):
            ((kind, action),) = entry.items()
            if kind == "Put":
                actions.append(self._put(action))
            else:
                actions.append(WriteAction(kind, action["TableName"], dict(action["Key"]), None))
        return actions

    def _put(self, request: Mapping[str, Any]) -> WriteAction:
        schema = self._store.schema(request["TableName"])
        item = request["Item"]
        return WriteAction("Put", request["TableName"], schema.key_of(item), item)

    def _writes(self, pending: Pending, ok: bool, response: Mapping[str, Any]) -> Units:
        units: Units = Units()
        transaction = pending.operation == "TransactWriteItems"
        factor = TRANSACTION_FACTOR if transaction else 1
        metric = "wru_transaction" if transaction else "wru_standard"
        error = str(response.get("__type", ""))
        cancelled = not ok and (
            error.endswith("TransactionCanceledException")
            or error.endswith("ConditionalCheckFailedException")
        )
        if not ok and not cancelled:
            return units  # a validation error: nothing served
        if transaction and cancelled:
            units[f"cancelled_transactions:{pending.writes[0].table}"] += 1
        for action in pending.writes:
            table = action.table
            if action.kind == "ConditionCheck":
                size = item_size(action.before)
                units[f"rru_transaction:{table}"] += factor * read_units(size, consistent=True)
                continue
            if cancelled:
                size = max(item_size(action.before), item_size(action.attempted))
                units[f"{metric}:{table}"] += factor * write_units(size)
                continue
            after = self._store.item(table, action.key)
            written = max(item_size(action.before), item_size(after))
            units[f"{metric}:{table}"] += factor * write_units(written)
            units[f"items_written:{table}"] += 1
            units[f"bytes_written:{table}"] += written
            schema = self._store.schema(table)
            for index in schema.indexes:
                index_units = index_write_units(action.before, after, index, schema)
                if index_units:
                    units[f"wru_index:{table}/{index.name}"] += index_units
        return units

    # -- reads ---------------------------------------------------------------------------------

    def _item_reads(self, table: str, keys: Iterable[Item], consistent: bool) -> Units:
        units: Units = Units()
        metric = "rru_strong" if consistent else "rru_eventual"
        for key in keys:
            units[f"{metric}:{table}"] += read_units(
                item_size(self._store.item(table, key)), consistent
            )
        return units

    @staticmethod
    def _query(request: Mapping[str, Any], response: Mapping[str, Any]) -> Units:
        items = response.get("Items", [])
        returned = sum(item_size(i) for i in items)
        scanned = int(response.get("ScannedCount", len(items)))
        partial = (
            request.get("Select") == "COUNT"
            or "ProjectionExpression" in request
            or "FilterExpression" in request
        )
        evaluated = returned if not partial else (returned / len(items) * scanned if items else 0)
        consistent = bool(request.get("ConsistentRead"))
        metric = "rru_strong" if consistent else "rru_eventual"
        table = request["TableName"]
        if "IndexName" in request:
            table = f"{table}/{request['IndexName']}"
        return Units({f"{metric}:{table}": read_units(int(evaluated), consistent)})
