"""Twenty-two changes to moto, for processes that run nothing else against moto: the local
stack's server, and `make histories`' workers (which run the history property alone).
`install()` checks moto's version and that every attribute it replaces exists, and refuses
to start otherwise.

1. SQS: moto checks each received message's retention by computing *all* the queue's
   attributes, approximate counts included, each a pass over every message: a receive costs
   O(depth²). Reading the retention period directly gives the same answer in O(1).

2. Atomic TransactWriteItems without copying whole tables.

moto deep-copies every table a transaction touches so that it can roll back (NOTES.md): a
transaction then costs time proportional to the table, hundreds of ms after a few thousand
items. DynamoDB itself evaluates every condition before writing anything; this does the same:
  1. check every item's condition against the current state, writing nothing; if any fails,
     cancel with the reasons by position (and ALL_OLD items) — nothing written, no stream record;
  2. apply the writes, keeping an undo log of only the touched items and each stream's length,
     restored should a write fail midway (a validation error).
It is atomic only while no other DynamoDB request runs at the same time: the local stack's
server serializes them (`server.py`).

3. A Query of one partition reads that partition. moto's `Table.query` without an index
sorts *every* item of the table and then keeps those of the partition: O(N log N) per Query,
seconds at 10^5 items, where DynamoDB reads only the partition. While such a Query runs, the
table's `all_items` returns that partition's items, in the same (range key) order.

4. SQS again: `SendMessage` reads `queue.attributes` for one flag (content-based
   deduplication), and so computes the approximate counts, passes over every message: a send
   cost O(depth), 80 ms at 600 messages. While a send runs, the queue's attributes leave out
   the three approximate counts (nothing in a send reads them).

5. Per-request costs that depend on no request: to route each request moto lists its own
   package directory (a `stat` per service), and to dispatch it lists every method of the
   responses class; both answers are cached. SQS reads the clock through datetime arithmetic
   for every message it looks at (visible? delayed?): two million reads per thousand
   deliveries, a quarter of the server's time; it reads `time.time()` instead, the same
   number. Measured on a 1,000-delivery drill, these and 4 took 35% of the server's time.

6. An update expression is parsed two or three times per UpdateItem (and per Update in a
   transaction), the same few expressions every time. Parsed ones are kept, by their text:
   the parse is pure, and moto's validator works on a deep copy of the tree it is given.

7. A Query of a global secondary index by a string hash key (the outbox's due shards, the
   ledger's change buckets) sorts *every* item of the table by its keys, then tests each
   through DynamoType comparisons: at 10,000 deliveries an index Query cost ~190 ms, and the
   sweeper and the drain make eight every few seconds. While such a Query runs, the table's
   `all_items` hands moto only the items whose attribute equals the key (same type "S", same
   string: exactly moto's own test for strings), in moto's order; moto's loop, sort and paging
   then run on those.

8. moto's response serializer walks a result through the service's model, and for each member
   of each structure asks five alias providers where the value might be: a DynamoDB
   `AttributeValue` (ten members, one present) costs dozens of lookups, so an order with its
   ledger cost milliseconds to serialize, and serializing was half of the server's time. An
   `AttributeValue` that is already in the wire's shape (moto's items are: `to_json()`), made
   of S, N, BOOL, NULL, SS, NS, M and L only, is what the walk would produce: it is written as
   it is. Anything else (binary, an unexpected shape) takes moto's walk.

9. EventBridge's input transformer builds a JSONPath parser (a yacc table) for every input
   path of every event it delivers. Parsed paths are kept, by their text: parsing is pure.

10. Validating an update expression (ten traversals of its tree, the order's update inside
    every transaction) was a third of a write:
    - the validator deep-copies the parsed tree first (its processors replace nodes): a kept
      parse (6) is pickled once, and each validation unpickles a fresh copy, six times faster;
    - its first three processors check the expression alone (at most one clause of each kind,
      no overlapping paths, no key attribute set; two of them quadratic in the clauses): for
      the same parse, names and table keys they answer the same, so a combination that passed
      them is not checked again. The other seven read the values and the item: every time.

11. `UpdateItem` deep-copies the whole item before updating it, for the stream record's old
    image. On a table without a stream (the ledger, whose orders carry their entries) nothing
    reads that copy: it is not made.

12. SQS's `DeleteMessageBatch` deletes entry by entry, and each deletion walks the queue twice
    (is the handle valid? then the list rebuilt without it): ten walks or twenty per batch, 12
    ms a batch with thousands queued. The batch's handles are deleted in one walk, with moto's
    answers: a handle of a message deleted already succeeds again, one no message ever had
    fails as `ReceiptHandleIsInvalid`, in the entries' order.

13. A Scan of a table sorts every item by its keys through DynamoType comparisons (each a
    Decimal or a string built again), and a page after the first then walks every item before
    its `ExclusiveStartKey`, comparing keys the same way: a full scan cost O(N² / page), 1.3 s a
    page at 10,000 deliveries, and the fire drill and the audit scan both tables. While a Scan
    without an index runs, the table's `all_items` sorts by the keys' plain values (the order
    DynamoType's comparisons give) and hands moto only the items after the start key, found by
    bisection; moto's loop, limits and filters then run on those.

14. The traversals that validate an update expression (10) ask each node of the tree which
    node classes their processor handles, and moto answers by building a dict of bound
    methods and a tuple of its keys, for every node of every traversal: most of a traversal's
    time. The processor's answer never changes; it is built once per processor.

15. A condition expression (every Put, Update and ConditionCheck of a transaction, every
    conditional write) is lexed by a dozen regular expressions at each request, the same few
    expressions every time. The lexing depends on the text alone: it is kept, by the text,
    and each parse gets fresh nodes; names and values are resolved after it, every time.

16. The request side of 8: moto parses each request's JSON through the service model, member
    by member, and an `AttributeValue` parses to exactly what the wire carries when it is made
    of S, N, BOOL, NULL, SS, NS, M and L (no blob to decode): such a value is taken as it is.

17. A Query deep-copies every item it found, and a Scan every item it keeps, before projecting,
    filtering and answering: a twentieth of the server's time at 3,000 deliveries. Projections
    build new items, filters and the answer only read: while a Query or a Scan runs, the
    table module's `deepcopy` hands back its argument.

18. An update expression's validation traverses its tree seven times, and moto's traversal
    asks, for every node, whether it is a `Node` and whether its processor handles it, both
    `isinstance` checks through `ABCMeta` (eight million of them at 3,000 deliveries), and calls
    the no-op hook before each child. The traversal (same order, same replacements in the
    parent's children) remembers each answer by node class, and skips the hook where the
    processor does not override it; `process` finds the handler by the node's class.

19. Sizes (every Query, Scan and BatchGetItem adds up the size of each item it returns): moto
    asks each value, in turn, whether it is a number, a set, a list, a map, a boolean. The
    size of an S, N, M, L, BOOL or NULL value is computed by its type directly, with moto's
    arithmetic; any other value by moto.

20. SQS's `GetQueueAttributes` by name computes all of the queue's attributes (the three
    approximate counts are each a pass over every message) three times for each name asked:
    the drain's look at a queue thousands deep cost 50 ms. The named attributes are read from
    one computation, in the order asked; `All`, and a name moto refuses, go to moto.

21. An SQS receive walks the list of the queue's visible messages, built whole first (two
    clock reads per message, thousands queued behind a backlog), to take the first ten: ten
    milliseconds a receive. In a receive that does not wait, the visible messages are handed
    to moto's loop one at a time, in the same order, as it takes them; a receive that waits
    (its loop asks whether any message is visible) gets moto's list.

22. moto draws its identifiers a character at a time: 52 `random.choice` calls for the request
    id of every answer, 185 for the receipt handle of every message received (a twentieth of
    the SQS server's time). Each is drawn in one `choices` call, from the same characters, by
    the same (seedable) generator.

Long on purpose: each change sits beside the reason it exists and what it preserves, so that
a moto upgrade is reviewed change by change in one place.
"""

from __future__ import annotations

import bisect
import copy
import functools
import importlib.metadata
import pickle
import string
import time
from collections import deque
from typing import Any

import jsonpath_ng.ext
import moto.backends
import moto.core.responses
import moto.dynamodb.models
import moto.dynamodb.models.table
import moto.sqs.models
from moto.core.parse import BaseJSONParser
from moto.core.serialize import BaseJSONSerializer
from moto.core.utils import method_names_from_class as _original_method_names
from moto.core.utils import unix_time
from moto.core.utils import unix_time_millis as _original_millis
from moto.dynamodb.comparisons import ConditionExpressionParser, get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.dynamodb.models.table import Table
from moto.dynamodb.models.utilities import bytesize
from moto.dynamodb.parsing import expressions, validators
from moto.dynamodb.parsing.ast_nodes import (  # type: ignore[attr-defined]
    DepthFirstTraverser,
    Node,
)
from moto.moto_api._internal import mock_random
from moto.moto_api._internal.moto_random import MotoRandom
from moto.sqs.models import Message, Queue, SQSBackend

_ORIGINAL_SEND = SQSBackend.send_message
_ORIGINAL_QUEUE_ATTRIBUTES = SQSBackend.get_queue_attributes
_ORIGINAL_RECEIVE = SQSBackend.receive_message
RECEIPT_HANDLE_LENGTH = 185
_WITHOUT_COUNTS = [a for a in Queue.BASE_ATTRIBUTES if not a.startswith("ApproximateNumberOf")]
_ORIGINAL_QUERY = Table.query
_ORIGINAL_ALL_ITEMS = Table.all_items
_ORIGINAL_SCAN = Table.scan
_SCAN_AFTER = "_umavez_scan_after"
_FROM_THE_START: dict[str, Any] = {}
_ONE_PARTITION = "_umavez_query_partition"
_ONE_INDEX_KEY = "_umavez_query_index_key"
_ORIGINAL_MODULES = moto.backends.list_of_moto_modules
_ORIGINAL_JSON_SERIALIZE = BaseJSONSerializer._serialize
_ORIGINAL_PARSE_STRUCTURE: Any = BaseJSONParser._parse_structure
_JSONPATH: Any = jsonpath_ng.ext  # untyped; moto imports `parse` from it at each event
_ORIGINAL_JSONPATH_PARSE = _JSONPATH.parse


UpdateExpressionParser: Any = getattr(expressions, "UpdateExpressionParser")  # noqa: B009 - untyped
_ORIGINAL_PARSE = UpdateExpressionParser.make


# A kept parse, by id, with its pickle (kept alive here too, so that no other object takes its id).
_PICKLED: dict[int, tuple[Any, bytes]] = {}
# (kept parse's id, names, table keys) that passed the checks of the expression alone.
_EXPRESSION_CHECKED: set[tuple[int, tuple[tuple[str, str], ...], tuple[str, ...]]] = set()
_EXPRESSION_ONLY_CHECKS = (
    validators.ActionCountValidator,
    validators.OverlappingPathsValidator,
    validators.UpdateHashRangeKeyValidator,
)
_ORIGINAL_VALIDATOR_DEEPCOPY = copy.deepcopy  # what `validators` imported
_ORIGINAL_VALIDATOR_INIT = validators.UpdateExpressionValidator.__init__
_ORIGINAL_UPDATE_ITEM = DynamoDBBackend.update_item
_ORIGINAL_NODE_TYPES = DepthFirstTraverser.nodes_to_be_processed
_NODE_TYPES = "_umavez_node_types"
_HANDLERS = "_umavez_handlers"
_ORIGINAL_LEX = ConditionExpressionParser._lex_condition_expression
_ORIGINAL_SIZE = DynamoType.size
_NO_HOOK = DepthFirstTraverser.pre_processing_of_child
_UNKNOWN: Any = object()
# (class or tuple of classes, node class) -> is the node class one of them
_SUBCLASS: dict[tuple[Any, type], bool] = {}


@functools.lru_cache(maxsize=1024)
def nodes_to_be_processed(self: Any) -> Any:
    kept = self.__dict__.get(_NODE_TYPES)
    if kept is None:
        kept = self.__dict__[_NODE_TYPES] = _ORIGINAL_NODE_TYPES(self)
    return kept


def process_node(self: Any, node: Any) -> Any:
    """moto's `process`: the first handler whose node class the node is, kept by the node's
    class."""
    by_class = self.__dict__.get(_HANDLERS)
    if by_class is None:
        by_class = self.__dict__[_HANDLERS] = {}
    handler = by_class.get(type(node), _UNKNOWN)
    if handler is _UNKNOWN:
        handler = by_class[type(node)] = next(
            (h for c, h in self._processing_map().items() if _is_a(type(node), c)), None
        )
    return None if handler is None else handler(node)


def _is_a(node_class: type, of: Any) -> bool:
    """`issubclass`, remembered: moto's node classes are ABCs, and never registered with."""
    key = (of, node_class)
    known = _SUBCLASS.get(key)
    if known is None:
        known = _SUBCLASS[key] = issubclass(node_class, of)
    return known


def traverse_node_recursively(self: Any, node: Any, child_id: int = -1) -> Any:
    """moto's depth-first traversal: children left to right, then the node; a processed node
    takes the place of the old one in its parent's children."""
    hook = self.pre_processing_of_child
    if getattr(hook, "__func__", None) is _NO_HOOK:
        hook = None
    return _traverse(self, node, child_id, nodes_to_be_processed(self), hook)


def _traverse(self: Any, node: Any, child_id: int, handled: Any, hook: Any) -> Any:
    if not _is_a(type(node), Node):
        return node
    parent_node = node.parent
    children = node.children
    if children is not None:
        for i, child_node in enumerate(children):
            if hook is not None:
                hook(node, i)
            _traverse(self, child_node, i, handled, hook)
    if _is_a(type(node), handled):
        node = self.process(node)
        node.parent = parent_node
        if parent_node:
            parent_node.children[child_id] = node
    return node


def dynamo_type_size(self: DynamoType) -> int:
    """moto's size of a value, by its type."""
    kind, value = self.type, self.value
    if kind == "S" and isinstance(value, str):
        return len(value.encode("utf-8"))
    if kind == "N":
        return len(str(value))
    if kind == "M":
        return sum(
            bytesize(k) + (v if type(v) is DynamoType else DynamoType(v)).size()
            for k, v in value.items()
        )
    if kind == "L":
        return sum(v.size() for v in value)
    if kind in ("BOOL", "NULL") and isinstance(value, bool):
        return 1
    return int(_ORIGINAL_SIZE(self))


@functools.lru_cache(maxsize=1024)
def _lexed(expression: str) -> tuple[Any, ...]:
    return tuple(_ORIGINAL_LEX(ConditionExpressionParser(expression, {}, {})))


def lex_condition_expression(self: Any) -> deque[Any]:
    """The kept lexing of the expression's text, in fresh nodes (a lexing error is raised
    again each time: it is not kept)."""
    if not self.condition_expression:
        return _ORIGINAL_LEX(self)
    return deque(node._replace(children=[]) for node in _lexed(self.condition_expression))


@functools.lru_cache(maxsize=1024)
def _parsed_update_expression(expression: str) -> Any:
    parsed = _ORIGINAL_PARSE(expression)
    _PICKLED[id(parsed)] = (parsed, pickle.dumps(parsed))
    return parsed


def fresh_copy(value: Any, memo: Any = None) -> Any:
    """The validators' deepcopy: a kept parse from its pickle; anything else as before."""
    kept = _PICKLED.get(id(value))
    if kept is not None and kept[0] is value:
        return pickle.loads(kept[1])  # noqa: S301 - our own pickle of moto's parse tree
    return _ORIGINAL_VALIDATOR_DEEPCOPY(value, memo)


def validator_init(self: Any, expression: Any, *args: Any, **kwargs: Any) -> None:
    _ORIGINAL_VALIDATOR_INIT(self, expression, *args, **kwargs)
    self.umavez_source = expression


def validate_update(self: Any) -> Any:
    source = getattr(self, "umavez_source", None)
    kept = _PICKLED.get(id(source))
    key = None
    if kept is not None and kept[0] is source:
        names = tuple(sorted((self.expression_attribute_names or {}).items()))
        key = (id(source), names, tuple(self.table.table_key_attrs))
    checked = key in _EXPRESSION_CHECKED
    node = self.node_to_validate
    for processor in self.processors:
        if not (checked and isinstance(processor, _EXPRESSION_ONLY_CHECKS)):
            node = processor.traverse(node)
    if key is not None:
        _EXPRESSION_CHECKED.add(key)
    return node


class _CopyUnlessUnread:
    """`copy` as moto's DynamoDB models module sees it: while an update of a table without a
    stream runs, `deepcopy` hands back its argument (the old image no one reads)."""

    unread = False

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    def deepcopy(self, value: Any, memo: Any = None) -> Any:
        return value if self.unread else copy.deepcopy(value, memo)


_COPY_UNLESS_UNREAD = _CopyUnlessUnread()
_COPY_UNLESS_READING = _CopyUnlessUnread()  # the table module's: `unread` while reading


def _reading(read: Any) -> Any:
    _COPY_UNLESS_READING.unread = True
    try:
        return read()
    finally:
        _COPY_UNLESS_READING.unread = False


def update_item(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Any:
    _COPY_UNLESS_UNREAD.unread = self.get_table(table_name).stream_shard is None
    try:
        return _ORIGINAL_UPDATE_ITEM(self, table_name, *args, **kwargs)
    finally:
        _COPY_UNLESS_UNREAD.unread = False


def parse_update_expression(cls: type, expression_str: str) -> Any:
    return _parsed_update_expression(expression_str)


@functools.cache
def list_of_moto_modules() -> tuple[str, ...]:
    return tuple(_ORIGINAL_MODULES())


method_names_from_class = functools.cache(_original_method_names)


def unix_time_millis(dt: Any = None) -> float:
    """moto's `unix_time_millis`: now, in ms since the epoch, without datetime arithmetic."""
    return time.time() * 1000.0 if dt is None else float(_original_millis(dt))


def query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """A Query reads a narrowed candidate set (3, 7) and copies nothing it found (17)."""
    return _reading(lambda: _narrowed_query(self, hash_key, *args, **kwargs))


def _narrowed_query(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
    """Without an index (positional argument 7 or `index_name`), only `hash_key`'s partition
    is a candidate; with one, by a single string hash key, only the items holding that string:
    say so to `all_items` for the duration of the call."""
    index_name = kwargs.get("index_name", args[6] if len(args) > 6 else None)
    if index_name is not None:
        conditions = kwargs.get("hash_key_conditions") or []
        if len(conditions) != 1 or conditions[0][1].type != "S":
            return _ORIGINAL_QUERY(self, hash_key, *args, **kwargs)
        setattr(self, _ONE_INDEX_KEY, (conditions[0][0], conditions[0][1].value))
        try:
            return _ORIGINAL_QUERY(self, hash_key, *args, **kwargs)
        finally:
            setattr(self, _ONE_INDEX_KEY, None)
    if hash_key is None:
        return _ORIGINAL_QUERY(self, hash_key, *args, **kwargs)
    setattr(self, _ONE_PARTITION, hash_key)
    try:
        return _ORIGINAL_QUERY(self, hash_key, *args, **kwargs)
    finally:
        setattr(self, _ONE_PARTITION, None)


def scan(self: Table, *args: Any, **kwargs: Any) -> Any:
    """A Scan starts at its page (13) and copies nothing it keeps (17)."""
    return _reading(lambda: _paged_scan(self, *args, **kwargs))


def _paged_scan(
    self: Table,
    filters: dict[str, Any],
    limit: int,
    exclusive_start_key: Any,
    filter_expression: Any = None,
    index_name: str | None = None,
    *args: Any,
    **kwargs: Any,
) -> Any:
    """Without an index, tell `all_items` where the page starts; moto then starts at the top."""
    if index_name is not None:
        start = exclusive_start_key
        return _ORIGINAL_SCAN(
            self, filters, limit, start, filter_expression, index_name, *args, **kwargs
        )
    setattr(self, _SCAN_AFTER, exclusive_start_key or _FROM_THE_START)
    try:
        from_the_top: Any = None
        return _ORIGINAL_SCAN(
            self, filters, limit, from_the_top, filter_expression, None, *args, **kwargs
        )
    finally:
        setattr(self, _SCAN_AFTER, None)


def _items_after(self: Table, start: dict[str, Any]) -> list[Any]:
    """The table's items in key order, after `start` (every item when it is empty)."""
    range_key = self.range_key_attr

    def key(item: Any) -> tuple[Any, ...]:
        return (item.hash_key.cast_value, item.range_key.cast_value if range_key else None)

    partitions: Any = self.items.values()
    items = sorted(
        (item for p in partitions for item in (p.values() if range_key else (p,))), key=key
    )
    if not start:
        return items
    after = (
        DynamoType(start[self.hash_key_attr]).cast_value,
        DynamoType(start[range_key]).cast_value if range_key else None,
    )
    return items[bisect.bisect_right(items, after, key=key) :]


def all_items(self: Table) -> Any:
    scan_after = getattr(self, _SCAN_AFTER, None)
    if scan_after is not None:
        return _items_after(self, scan_after)
    index_key = getattr(self, _ONE_INDEX_KEY, None)
    if index_key is not None:
        name, value = index_key
        partitions: Any = self.items.values()
        matching = [
            item
            for partition in partitions
            for item in (partition.values() if self.range_key_attr else (partition,))
            if (held := item.attrs.get(name)) is not None
            and held.type == "S"
            and held.value == value
        ]
        # moto's own order (it sorts the whole table first), of the matching items only
        return sorted(
            matching, key=lambda i: (i.hash_key, i.range_key) if i.range_key else i.hash_key
        )
    hash_key = getattr(self, _ONE_PARTITION, None)
    if hash_key is None:
        return _ORIGINAL_ALL_ITEMS(self)
    partition = self.items.get(hash_key)
    if partition is None:
        return []
    if not self.range_key_attr:
        return [partition]
    return sorted(partition.values(), key=lambda item: item.range_key)


def is_message_valid_based_on_retention_period(
    self: SQSBackend, queue_name: str, message: Message
) -> bool:
    queue = self.get_queue(queue_name)
    retain_until = int(queue.message_retention_period) + message.sent_timestamp / 1000  # type: ignore[attr-defined, operator]
    return bool(retain_until > unix_time())


def send_message(self: SQSBackend, queue_name: str, *args: Any, **kwargs: Any) -> Any:
    """moto's send, the queue's attributes computed without their approximate counts."""
    queue = self.get_queue(queue_name)
    queue.BASE_ATTRIBUTES = _WITHOUT_COUNTS  # the instance's list hides the class's
    try:
        return _ORIGINAL_SEND(self, queue_name, *args, **kwargs)
    finally:
        del queue.BASE_ATTRIBUTES


def _key_of(backend: DynamoDBBackend, op_type: str, op: dict[str, Any]) -> dict[str, Any]:
    if op_type != "Put":
        return dict(op["Key"])
    table = backend.get_table(op["TableName"])
    key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
    if table.range_key_attr is not None:
        key[table.range_key_attr] = op["Item"][table.range_key_attr]
    return key


def transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    operations = []
    seen: set[tuple[str, str]] = set()
    reasons: list[tuple[str | None, str | None, dict[str, Any] | None]] = []
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(entry.items()))
        key = _key_of(self, op_type, op)
        identity = (op["TableName"], str(dict(sorted(key.items()))))
        if identity in seen:
            raise MultipleTransactionsException()
        seen.add(identity)
        current = self.get_item(op["TableName"], key)
        operations.append((op_type, op, key, current))
        condition = op.get("ConditionExpression")
        holds = condition is None or get_filter_expression(
            condition, op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
        ).expr(current)
        if holds:
            reasons.append((None, None, None))
        else:
            old = None
            if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                old = current.to_json()["Attributes"]
            reasons.append(("ConditionalCheckFailed", "The conditional request failed", old))
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)

    undo = [
        (op["TableName"], key, copy.deepcopy(current.to_json()["Attributes"]) if current else None)
        for _, op, key, current in operations
    ]
    shards = {
        name: len(shard.items)
        for name in {op["TableName"] for _, op, _, _ in operations}
        if (shard := self.get_table(name).stream_shard) is not None
    }
    try:
        for op_type, op, key, _ in operations:
            names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            if op_type == "Put":
                self.put_item(op["TableName"], op["Item"])
            elif op_type == "Delete":
                self.delete_item(op["TableName"], key)
            elif op_type == "Update":
                self.update_item(
                    op["TableName"],
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
    except Exception:
        for table_name, key, old_item in reversed(undo):
            if old_item is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, old_item)
        for table_name, length in shards.items():
            shard = self.get_table(table_name).stream_shard
            if shard is not None:
                del shard.items[length:]
        raise


_SCALAR_ATTRIBUTES = {"S": str, "N": str, "BOOL": bool, "NULL": bool}


def is_wire_attribute_value(value: Any) -> bool:
    """True if `value` is a DynamoDB AttributeValue exactly as the wire carries it, built only
    of types the serializer would copy unchanged (no binary: that one is base64-encoded)."""
    if type(value) is not dict or len(value) != 1:
        return False
    ((kind, held),) = value.items()
    scalar = _SCALAR_ATTRIBUTES.get(kind)
    if scalar is not None:
        return type(held) is scalar
    if kind in ("SS", "NS"):
        return type(held) is list and all(type(member) is str for member in held)
    if kind == "M":
        return type(held) is dict and all(
            type(name) is str and is_wire_attribute_value(member) for name, member in held.items()
        )
    if kind == "L":
        return type(held) is list and all(is_wire_attribute_value(member) for member in held)
    return False


def parse_json_structure(self: Any, shape: Any, value: Any) -> Any:
    if shape.name == "AttributeValue" and is_wire_attribute_value(value):
        return value
    return _ORIGINAL_PARSE_STRUCTURE(self, shape, value)


def serialize_json(
    self: BaseJSONSerializer, serialized: Any, value: Any, shape: Any, key: str
) -> None:
    if key and shape.name == "AttributeValue" and is_wire_attribute_value(value):
        serialized[self.get_serialized_name(shape, key)] = value
        return
    _ORIGINAL_JSON_SERIALIZE(self, serialized, value, shape, key)


parse_jsonpath = functools.lru_cache(maxsize=256)(_ORIGINAL_JSONPATH_PARSE)


def delete_message_batch(
    self: SQSBackend, queue_name: str, receipts: list[dict[str, Any]]
) -> tuple[list[str], list[dict[str, Any]]]:
    queue = self.get_queue(queue_name)
    handles = {str(r["ReceiptHandle"]) for r in receipts}
    wanted = handles - queue.deleted_messages
    if wanted:
        kept = []
        for message in queue._messages:
            if wanted.isdisjoint(message.all_receipt_handles):
                kept.append(message)
                continue
            queue.pending_messages.discard(message)
            queue.deleted_messages.update(message.all_receipt_handles)  # type: ignore[arg-type]
        queue._messages = kept
    success: list[str] = []
    errors: list[dict[str, Any]] = []
    for receipt in receipts:
        if receipt["ReceiptHandle"] in queue.deleted_messages:
            success.append(receipt["Id"])
        else:
            errors.append(
                {
                    "Id": receipt["Id"],
                    "SenderFault": True,
                    "Code": "ReceiptHandleIsInvalid",
                    "Message": f'The input receipt handle "{receipt["ReceiptHandle"]}" is not a '
                    "valid receipt handle.",
                }
            )
    return success, errors


def random_string(
    self: MotoRandom, length: int = 20, include_digits: bool = True, lower_case: bool = False
) -> str:
    """moto's identifiers (a request id on every answer), drawn in one call."""
    pool = string.ascii_letters + (string.digits if include_digits else "")
    drawn = "".join(self.choices(pool, k=length))
    return drawn.lower() if lower_case else drawn


def receipt_handle() -> str:
    """A receipt handle as moto makes one (185 lowercase letters), drawn in one call."""
    return "".join(mock_random.choices(string.ascii_lowercase, k=RECEIPT_HANDLE_LENGTH))


class _LazyMessages:
    """Whether a receive is running that never waits: `Queue.messages` is then read once,
    front to back, and only until the receive has its messages."""

    on = False


def queue_messages(self: Queue) -> Any:
    """moto's visible, undelayed messages, in the queue's order: a list, or, to the first read
    of a receive that never waits (its loop), the same messages one by one as the receive
    takes them. Any later read in that receive (a FIFO dead-letter queue counting its
    messages) gets the list."""
    visible = (m for m in self._messages if m.visible and not m.delayed)
    if _LazyMessages.on:
        _LazyMessages.on = False
        return visible
    return list(visible)


def receive_message(
    self: SQSBackend,
    queue_name: str,
    count: int,
    wait_seconds_timeout: int,
    *args: Any,
    **kwargs: Any,
) -> Any:
    _LazyMessages.on = not wait_seconds_timeout
    try:
        return _ORIGINAL_RECEIVE(self, queue_name, count, wait_seconds_timeout, *args, **kwargs)
    finally:
        _LazyMessages.on = False


def get_queue_attributes(
    self: SQSBackend, queue_name: str, attribute_names: list[str]
) -> dict[str, Any]:
    """Named attributes (not `All`, all valid) from one computation of the queue's attributes;
    anything else as moto answers it."""
    queue = self.get_queue(queue_name)
    valid = {*queue.BASE_ATTRIBUTES, *queue.FIFO_ATTRIBUTES, *queue.KMS_ATTRIBUTES}
    if not attribute_names or not set(attribute_names) <= valid:
        return dict(_ORIGINAL_QUEUE_ATTRIBUTES(self, queue_name, attribute_names))
    now = queue.attributes
    return {name: now[name] for name in attribute_names if now.get(name) is not None}


_ABSENT = object()
# What install() replaced, to put back: (owner, attribute, its own value or _ABSENT).
_REPLACED: list[tuple[Any, str, Any]] = []


def _patches() -> list[tuple[Any, str, Any]]:
    """(owner, attribute, replacement) for each change above."""
    return [
        (DynamoDBBackend, "transact_write_items", transact_write_items),
        (
            SQSBackend,
            "is_message_valid_based_on_retention_period",
            is_message_valid_based_on_retention_period,
        ),
        (Table, "query", query),
        (Table, "all_items", all_items),
        (Table, "scan", scan),
        (DepthFirstTraverser, "nodes_to_be_processed", nodes_to_be_processed),
        (DepthFirstTraverser, "process", process_node),
        (ConditionExpressionParser, "_lex_condition_expression", lex_condition_expression),
        (SQSBackend, "send_message", send_message),
        (moto.backends, "list_of_moto_modules", list_of_moto_modules),
        (moto.core.responses, "method_names_from_class", method_names_from_class),
        (moto.sqs.models, "unix_time_millis", unix_time_millis),
        (UpdateExpressionParser, "make", classmethod(parse_update_expression)),
        (BaseJSONSerializer, "_serialize", serialize_json),
        (BaseJSONParser, "_parse_structure", parse_json_structure),
        (_JSONPATH, "parse", parse_jsonpath),
        (validators, "deepcopy", fresh_copy),
        (validators.UpdateExpressionValidator, "__init__", validator_init),
        (validators.UpdateExpressionValidator, "validate", validate_update),
        (moto.dynamodb.models, "copy", _COPY_UNLESS_UNREAD),
        (moto.dynamodb.models.table, "copy", _COPY_UNLESS_READING),
        (DepthFirstTraverser, "traverse_node_recursively", traverse_node_recursively),
        (DynamoType, "size", dynamo_type_size),
        (DynamoDBBackend, "update_item", update_item),
        (SQSBackend, "delete_message_batch", delete_message_batch),
        (SQSBackend, "get_queue_attributes", get_queue_attributes),
        (Queue, "messages", property(queue_messages)),
        (SQSBackend, "receive_message", receive_message),
        (MotoRandom, "get_random_string", random_string),
        (moto.sqs.models, "generate_receipt_handle", receipt_handle),
    ]


# The moto these changes were written against and measured on (pyproject.toml pins it).
MOTO_VERSION = "5.2.5"


class MotoChangedError(RuntimeError):
    """moto is not the version these changes were written for, or an attribute they replace is
    gone: a patch would be silently inert (or wrong), so the server refuses to start."""


def check(patches: list[tuple[Any, str, Any]] | None = None) -> None:
    """Fail loudly, naming what moved, unless moto is MOTO_VERSION and every attribute to be
    replaced exists."""
    installed = importlib.metadata.version("moto")
    if installed != MOTO_VERSION:
        raise MotoChangedError(
            f"moto {installed} is installed; devstack/speedups/moto_patches.py was written for "
            f"moto {MOTO_VERSION}: review each change against the new moto, then MOTO_VERSION"
        )
    for owner, name, _ in _patches() if patches is None else patches:
        if not hasattr(owner, name):
            where = getattr(owner, "__name__", repr(owner))
            raise MotoChangedError(
                f"moto {installed} has no {where}.{name}: the change replacing it is inert"
            )


def install() -> None:
    """Patch moto in this process: the local stack's server (`devstack/server.py`), or a
    `make histories` worker. Checked first: a moto that moved fails here, naming what moved."""
    if _REPLACED:
        return
    check()
    for owner, name, replacement in _patches():
        _REPLACED.append((owner, name, vars(owner).get(name, _ABSENT)))
        setattr(owner, name, replacement)


def uninstall() -> None:
    for owner, name, original in reversed(_REPLACED):
        if original is _ABSENT:
            delattr(owner, name)  # it was inherited: the base's shows through again
        else:
            setattr(owner, name, original)
    _REPLACED.clear()
