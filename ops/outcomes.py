"""What a delivery sent through the queue became, read from the ledger (local or deployed).

Process leaves a trace of every delivery except one kind: an entry whose key is reserved
already (a duplicate) writes nothing. So before a delivery is enqueued, its entries are read
the way process reads them (the provider's map, the entry key, the bindings) and the keys the
ledger already holds are noted; afterwards the ledger says, per delivery:

- its entries' items (`EFFECT#`): written by this delivery -> their outcome (applied, stale,
  voided); there before it, or written by another event -> duplicate;
- a waiting or unmatched record under its event id -> waiting / unmatched;
- its audit record (`DELIVERY#provider#event_id`) -> ignored, bound, conflict, unroutable;
- none of these yet -> pending (not processed yet, retried, or failing towards the DLQ).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from functions.process.interpreters import Interpreters
from functions.process.messages import Message
from functions.shared import tables
from functions.shared.bindings import Key, binding_key, ledger_items
from functions.shared.domain import Effect, Outcome, effect_key
from functions.shared.errors import RetryableError, UmavezError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

PENDING: Final = "pending"
POLL_EVERY_SECONDS: Final = 2.0


@dataclass
class Tracked:
    """A delivery about to be enqueued: its entries, and which of their keys were there before."""

    message: Message
    entries: tuple[Effect, ...]
    known_before: frozenset[str]
    unreadable: str | None = None  # why the map could not read it (process will fail it too)
    queue_message_id: str = ""


@dataclass(frozen=True)
class Result:
    tracked: Tracked
    outcome: str
    order_id: str | None = None
    detail: str = ""


Route = tuple[str | None, str | None]  # (order, effect key) of an entry; None until bound


class LedgerUnreadError(RetryableError):
    """DynamoDB left keys unread (throttled) after retries: nothing can be concluded now."""


class LedgerOutcomes:
    """Reads, before and after, what deliveries did to the ledger (see the module's doc)."""

    def __init__(
        self, dynamodb: DynamoDBClient, ledger_table: str, interpreters: Interpreters
    ) -> None:
        self._db = dynamodb
        self._ledger = ledger_table
        self._interpret = interpreters

    def track(self, messages: Sequence[Message]) -> list[Tracked]:
        """Read each message's entries, and note the keys the ledger holds already."""
        tracked = [self._read(message) for message in messages]
        routes = self._routes(tracked)
        held = self._get({key for route in routes for key in _entry_keys(route)})
        for t, route in zip(tracked, routes, strict=True):
            t.known_before = frozenset(
                key for order, key in route if key and _entry_key(order, key) in held
            )
        return tracked

    def results(self, tracked: Sequence[Tracked]) -> list[Result]:
        routes = self._routes(tracked)
        keys = {key for t in tracked for key in _delivery_keys(t.message)}
        keys |= {key for route in routes for key in _entry_keys(route)}
        items = self._get(keys)
        return [self._result(t, route, items) for t, route in zip(tracked, routes, strict=True)]

    def settle(
        self,
        tracked: Sequence[Tracked],
        wait_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        every_seconds: float = POLL_EVERY_SECONDS,
    ) -> list[Result]:
        """Results, read again every `every_seconds` while some are pending, for at most
        `wait_seconds`; what is still pending then is reported pending."""
        deadline = clock() + wait_seconds
        results = self.results(tracked)
        while any(r.outcome == PENDING for r in results) and clock() < deadline:
            sleep(every_seconds)
            settled = {id(r.tracked): r for r in results if r.outcome != PENDING}
            again = iter(self.results([r.tracked for r in results if r.outcome == PENDING]))
            results = [settled.get(id(r.tracked)) or next(again) for r in results]
        return results

    # -- reading ------------------------------------------------------------------------------

    def _read(self, message: Message) -> Tracked:
        try:
            readings = self._interpret(message.provider, message.body)
        except UmavezError as exc:
            return Tracked(message, (), frozenset(), unreadable=f"{type(exc).__name__}: {exc}")
        entries = tuple(r for r in readings if isinstance(r, Effect))
        return Tracked(message, entries, frozenset())

    def _routes(self, tracked: Sequence[Tracked]) -> list[list[Route]]:
        """(order, key) of each delivery's entries, as process routes them: by the order the
        entry names, else by the first of its objects bound to one. Every delivery's bindings
        are read together, 100 a request (a page of refunds is one read, not one each)."""
        bindings = self._get(
            _binding_key(entry, ref)
            for t in tracked
            for entry in t.entries
            if not entry.order_id
            for ref in entry.order_lookup
        )

        def order_of(entry: Effect) -> str | None:
            if entry.order_id:
                return entry.order_id
            bound = (bindings.get(_binding_key(entry, ref)) for ref in entry.order_lookup)
            return next((str(item["order_id"]) for item in bound if item is not None), None)

        return [
            [
                (order_id, effect_key(entry, order_id) if order_id else None)
                for entry in t.entries
                for order_id in [order_of(entry)]
            ]
            for t in tracked
        ]

    def _get(self, keys: Iterable[Key]) -> dict[Key, dict[str, Any]]:
        """Consistent reads of the items that exist, 100 keys a request; keys DynamoDB leaves
        unprocessed are asked again, a few times."""
        found, unread = ledger_items(self._db, self._ledger, keys)
        if unread:
            raise LedgerUnreadError("DynamoDB left ledger keys unread; try again later")
        return found

    # -- judging ------------------------------------------------------------------------------

    def _result(
        self,
        tracked: Tracked,
        routes: list[Route],
        items: dict[Key, dict[str, Any]],
    ) -> Result:
        message = tracked.message
        outcomes: list[str] = []
        orders: list[str] = []
        details: list[str] = []
        unresolved = False
        for entry, (order_id, key) in zip(tracked.entries, routes, strict=True):
            item = items.get(_entry_key(order_id, key)) if key else None
            if item is None or order_id is None:
                # A settlement of nothing open writes nothing: the delivery's other entries
                # say what it did.
                unresolved = unresolved or not entry.only_if_open
                continue
            orders.append(order_id)
            if key in tracked.known_before or item.get("event_id") != message.event_id:
                outcomes.append(Outcome.DUPLICATE.value)
                counted_by = item.get("event_id")
                by = "this event" if counted_by == message.event_id else counted_by
                details.append(f"{entry.external_ref} counted already, by {by}")
            else:
                outcomes.append(str(item["outcome"]))
        order_id = orders[0] if orders else None
        if tracked.entries and not outcomes and not unresolved:
            return Result(tracked, Outcome.IGNORED.value, None, "nothing open to settle")
        if outcomes and not unresolved:
            return Result(tracked, "+".join(dict.fromkeys(outcomes)), order_id, "; ".join(details))
        waiting, unmatched, audit = (items.get(k) for k in _delivery_keys(message))
        if waiting is not None:
            return Result(tracked, Outcome.WAITING.value, order_id, _waits_for(waiting))
        if unmatched is not None:
            return Result(tracked, "unmatched", order_id, _waits_for(unmatched))
        if audit is not None:
            return Result(
                tracked,
                str(audit["outcome"]),
                audit.get("order_id") or order_id,
                str(audit.get("reason", "")),
            )
        return Result(tracked, PENDING, order_id, tracked.unreadable or "")


def _binding_key(entry: Effect, ref: str) -> Key:
    return binding_key(entry.delivery.provider, ref)


def _entry_key(order_id: str | None, key: str) -> Key:
    return (tables.order_pk(str(order_id)), tables.effect_sk(key))


def _entry_keys(routes: list[Route]) -> list[Key]:
    return [_entry_key(order, key) for order, key in routes if key]


def _delivery_keys(message: Message) -> tuple[Key, Key, Key]:
    """Where process records a delivery by its event id: waiting, unmatched, its audit."""
    parked = tables.parked_sk(message.provider, message.event_id)
    return (
        (tables.WAITING_PK, parked),
        (tables.UNMATCHED_PK, parked),
        (tables.delivery_pk(message.provider, message.event_id), tables.DELIVERY_SORT),
    )


def _waits_for(item: dict[str, Any]) -> str:
    return "waits for " + ", ".join(item.get("objects", []))
