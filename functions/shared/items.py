"""The ledger's items, typed: one frozen model per kind, read from the plain item DynamoDB
returned (`functions.shared.dynamo.from_attributes`). The store renders them as it writes
them (functions/store: ledger.py, waiting.py, fees.py, checkpoints.py); the process core, the
books, the reconciliation, the sender, the operator's tools, the drill and the tests' world
read them through these models. The outbox's item is `functions.shared.outbox.OutboxItem`.

    ORDER#{order_id}     / ORDER                 Order
    ORDER#{order_id}     / EFFECT#{key}          Entry (one reserved effect key)
    ORDER#{order_id}     / CAPTURED#{p}#{id}     CaptureMark
    ORDER#{order_id}     / FEE#{p}#{line}        FeeLine
    REF#{provider}#{id}  / REF                   Binding
    DELIVERY#{p}#{event} / DELIVERY              DeliveryRecord
    WAITING | DORMANT | UNMATCHED / {p}#{event} Parked
    RECHECK              / {provider}#{object}   Recheck
    RECONCILIATION       / CHECKPOINT            RunCheckpoint
    STATEMENT_CHECKPOINT / {provider}            StatementCheckpoint

A model keeps the attributes the code reads and ignores the others: a reader of an older or
newer item sees the fields it knows. A required attribute that is missing, or one of another
type than its field's, is a `MalformedItemError` at the read, never a KeyError or a wrong sum
deep in a decision.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self, TypeVar

from functions.shared import tables
from functions.shared.domain import (
    COUNTED_OUTCOMES,
    FinancialStatus,
    Outcome,
    Total,
    financial_status,
)
from functions.shared.errors import UmavezError

Item = Mapping[str, Any]
Model = TypeVar("Model")


class MalformedItemError(UmavezError, ValueError):
    """An item read from the ledger lacks an attribute its kind always has, or holds one of
    another type (a total written by hand as text)."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# What each annotation of the models accepts (None too, where the annotation says `| None`).
_ACCEPTS: dict[str, Callable[[object], bool]] = {
    "int": _is_int,
    "str": lambda value: isinstance(value, str),
    "bool": lambda value: isinstance(value, bool),
    "list[str]": lambda value: isinstance(value, list) and all(isinstance(v, str) for v in value),
    "Item": lambda value: isinstance(value, Mapping),
}
_FIELDS: dict[type, dict[str, tuple[Callable[[object], bool], bool]]] = {}


def _checks(model: type) -> dict[str, tuple[Callable[[object], bool], bool]]:
    if model not in _FIELDS:
        checks = {}
        for f in fields(model):
            annotation = str(f.type)
            optional = annotation.endswith(" | None")
            checks[f.name] = (_ACCEPTS[annotation.removesuffix(" | None")], optional)
        _FIELDS[model] = checks
    return _FIELDS[model]


def _read(model: type[Model], item: Item) -> Model:
    where = f"{model.__name__} item {item.get(tables.PARTITION_KEY)}/{item.get(tables.SORT_KEY)}"
    values = {}
    for name, (accepts, optional) in _checks(model).items():
        if name in item:
            value = item[name]
            if not (accepts(value) or (optional and value is None)):
                raise MalformedItemError(f"{where}: {name} is {value!r}")
            values[name] = value
    try:
        return model(**values)
    except TypeError as exc:
        raise MalformedItemError(f"{where} lacks an attribute: {exc}") from exc


class _Read:
    """A model read from its item (`Model.of(item)`)."""

    __slots__ = ()

    @classmethod
    def of(cls, item: Item) -> Self:
        return _read(cls, item)


class _OfAnOrder(_Read):
    """An item of an order's partition: it names its order by its key, whether or not it
    repeats the id."""

    __slots__ = ()

    @classmethod
    def of(cls, item: Item) -> Self:
        pk = str(item.get(tables.PARTITION_KEY, ""))
        if "order_id" not in item and pk.startswith("ORDER#"):
            item = {**item, "order_id": pk.removeprefix("ORDER#")}
        return _read(cls, item)


def _counted(outcome: str | None) -> bool:
    return outcome in COUNTED_OUTCOMES


@dataclass(frozen=True, slots=True)
class Order(_OfAnOrder):
    """An order: its lifecycle, the last event that moved it, its running totals."""

    order_id: str
    lifecycle_status: str | None = None
    last_event_at: int | None = None
    last_event_second: int | None = None
    last_event_id: str | None = None
    last_transition: str | None = None
    last_payment: str | None = None
    currency: str | None = None
    recipient: str | None = None
    updated_at: str | None = None
    effect_count: int = 0
    paid_total: int = 0
    refunded_total: int = 0
    disputed_total: int = 0
    dispute_won_total: int = 0
    dispute_lost_total: int = 0
    inquiry_total: int = 0
    fee_total: int | None = None
    net_total: int | None = None
    settlement_currency: str | None = None

    def total(self, total: Total) -> int:
        value: int = getattr(self, total.value)
        return value

    @property
    def totals(self) -> dict[Total, int]:
        return {total: self.total(total) for total in Total}

    @property
    def financial_status(self) -> FinancialStatus:
        """What its totals say (`functions.shared.domain.financial_status`)."""
        return financial_status(self.totals)


@dataclass(frozen=True, slots=True)
class Entry(_OfAnOrder):
    """One reserved effect key: what it counted (applied or stale), or why not (voided)."""

    effect_key: str
    order_id: str
    outcome: str
    transition: str | None = None
    external_ref: str | None = None
    payment: str | None = None
    amount: int | None = None
    currency: str | None = None
    ordering_token: int | None = None
    # Whether the counted event named the customer (a duplicate that does teaches the order).
    named_recipient: bool = False
    # Whether counting it taught its order whom to e-mail (its redelivery re-opens the order's
    # owed e-mails again).
    taught_recipient: bool = False
    note: str | None = None
    provider: str | None = None
    event_id: str | None = None
    event_type: str | None = None
    event_created: int | None = None
    recorded_at: str | None = None
    via: str | None = None

    @property
    def counted(self) -> bool:
        """Applied or stale: its amount is in the order's totals."""
        return _counted(self.outcome)


def counted(entry: Entry | None) -> bool:
    return entry is not None and entry.counted


@dataclass(frozen=True, slots=True)
class FeeLine(_Read):
    """A statement line's fee and net, recorded once onto its order."""

    provider: str
    line: str
    fee: int
    net: int
    currency: str
    category: str | None = None
    moves: list[str] = field(default_factory=list)
    line_created: int | None = None


@dataclass(frozen=True, slots=True)
class Binding(_Read):
    """Which order a provider object belongs to (first writer wins)."""

    ref: str
    order_id: str
    attached_at: int | None = None


@dataclass(frozen=True, slots=True)
class CaptureMark(_Read):
    """How much of a payment captured several times its entries counted in all."""

    payment: str
    captured: int
    currency: str
    effect_key: str


@dataclass(frozen=True, slots=True)
class DeliveryRecord(_Read):
    """The audit of a delivery: what became of it, and for a conflict, both orders."""

    provider: str
    event_id: str
    outcome: str
    reason: str = ""
    event_type: str | None = None
    event_created: int | None = None
    order_id: str | None = None
    effect_key: str | None = None
    recorded_at: str | None = None
    via: str | None = None
    bound_order_id: str | None = None
    object: str | None = None
    expires_at: int | None = None

    @property
    def conflict(self) -> bool:
        return self.outcome == Outcome.CONFLICT.value


@dataclass(frozen=True, slots=True)
class Parked(_Read):
    """A delivery waiting for its order's binding (WAITING), kept dormant (DORMANT), or
    listed for a person to attach (UNMATCHED, once it waited longer than its provider
    retries): its body, what it waits for, and what the entry would be."""

    pk: str
    sk: str
    provider: str
    event_id: str
    body: str
    waiting_since: int
    event_type: str | None = None
    objects: list[str] = field(default_factory=list)
    reason: str | None = None
    # The entry it would post (what `umavez unmatched` shows), when it names money.
    transition: str | None = None
    external_ref: str | None = None
    amount: int | None = None
    currency: str | None = None
    unmatched_at: str | None = None
    dormant_since: str | None = None
    # The item as read: a parked delivery is moved whole (to unmatched, or dormant).
    stored: Item = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, item: Item) -> Self:
        return _read(cls, {**item, "stored": item})

    @property
    def unmatched(self) -> bool:
        return self.pk == tables.UNMATCHED_PK


@dataclass(frozen=True, slots=True)
class Recheck(_Read):
    """A provider object read again on a schedule, one generation at a time."""

    sk: str
    provider: str
    event_id: str
    body: str
    object: str
    generation: str
    next_check_at: int
    checks: int = 0
    event_type: str | None = None
    watching_since: int | None = None


@dataclass(frozen=True, slots=True)
class RunCheckpoint(_Read):
    """Where the last reconciliation run's two passes stopped (ISO times; empty: never)."""

    checked_until: str = ""
    lagged_until: str = ""


@dataclass(frozen=True, slots=True)
class StatementCheckpoint(_Read):
    """Where a provider's statement was read up to (epoch seconds); its sort key names it."""

    sk: str
    checked_until: int


@dataclass(frozen=True, slots=True)
class OrderPartition:
    """An order's partition as one Query returns it: the order (None if only its entries
    exist, or nothing) and its entries."""

    order_id: str
    order: Order | None
    entries: tuple[Entry, ...]

    @classmethod
    def of(cls, order_id: str, items: Iterable[Item]) -> OrderPartition:
        order, entries = None, []
        for item in items:
            sort = str(item.get(tables.SORT_KEY, ""))
            if sort == tables.ORDER_SORT:
                order = Order.of({"order_id": order_id, **item})
            elif sort.startswith(tables.EFFECT_SORT_PREFIX):
                entries.append(Entry.of(item))
        return cls(order_id, order, tuple(entries))

    @property
    def books(self) -> Order:
        """The order as its totals read: one never written holds nothing."""
        return self.order if self.order is not None else Order(self.order_id)
