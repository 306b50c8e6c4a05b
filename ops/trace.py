"""`umavez trace ID`: the journey of one provider event (or of every event of one order), from
the functions' structured logs and the tables, on the local stack or a deployed one.

- **The timeline**, from the logs: each time ingest took the event (when, from which provider,
  its signature verified, the queue message), each time process handled a message of it (the
  outcome, the effect key, the order, which receive), and each try of its notifications.
- **Now**, from the tables: the entries the event counted (or found counted already), the
  order's state, the delivery's audit record, a waiting or unmatched record, and each outbox
  item with the channels it reached.

The logs are the local stack's log file, or the deployed functions' log groups through
CloudWatch Logs Insights. What neither says is said: a refused request has no trace by id
(its id is unverified), and logs older than the window (or their retention) are gone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Protocol

from functions.asaas.models import PROVIDER as ASAAS
from functions.mercadopago.models import PROVIDER as MERCADOPAGO
from functions.shared import tables
from functions.shared.bindings import ledger_items
from functions.shared.dynamo import from_attributes
from functions.shared.items import Entry, Order
from functions.shared.money import render
from functions.shared.outbox import outbox_id_for
from functions.shared.redaction import redacted
from functions.stripe.models import PROVIDER as STRIPE
from ops.state import order_view

PROVIDERS: Final = (STRIPE, MERCADOPAGO, ASAAS)
# The fields a log line is found by: the ids every function's lines carry.
ID_FIELDS: Final = ("event_id", "order_id", "outbox_id")
# Logs Insights answers at most 10,000 rows a query; an order's journey is far below.
INSIGHTS_LIMIT: Final = 10_000
DEFAULT_WINDOW_SECONDS: Final = 7 * 86_400


class LogsQueryError(RuntimeError):
    """Logs Insights did not answer in time, or ended the query otherwise: try again."""


class LogSource(Protocol):
    def lines(self, ids: set[str]) -> list[dict[str, Any]]:
        """The structured log lines naming one of `ids` (as event_id, order_id or outbox_id),
        oldest first."""
        ...


@dataclass(frozen=True)
class Step:
    """One line of the timeline: a function's log line about the event."""

    at: str
    stage: str
    outcome: str
    event_id: str
    detail: str


@dataclass
class Journey:
    asked: str
    kind: str  # "event", "order" or "unknown"
    timeline: list[Step] = field(default_factory=list)
    now: list[dict[str, Any]] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.timeline or self.now)

    def to_json(self) -> dict[str, Any]:
        return {
            "asked": self.asked,
            "kind": self.kind,
            "timeline": [asdict(s) for s in self.timeline],
            "now": self.now,
            "not_found": self.not_found,
        }

    def render(self) -> str:
        lines = [f"{self.kind} {self.asked}"]
        lines.append("  timeline (logs):" if self.timeline else "  timeline (logs): nothing")
        for s in self.timeline:
            lines.append(
                f"    {s.at[:23]:<23}  {s.stage:<8} {s.outcome:<10} {s.event_id}  {s.detail}"
            )
        lines.append("  now (tables):" if self.now else "  now (tables): nothing")
        for fact in self.now:
            shown = (_short(str(v)) for v in fact.values() if v not in (None, ""))
            lines.append("    " + "  ".join(shown))
        for missing in self.not_found:
            lines.append(f"  not found: {missing}")
        return "\n".join(lines)


def _short(text: str) -> str:
    """A key or an outbox id (64 hex digits) cut for the screen; --json has them whole."""
    return text[:20] + "..." if len(text) > 40 and " " not in text else text


# -- where the logs are ---------------------------------------------------------------------


class LocalLogs:
    """The embedded stack's log file: every function's JSON lines, in one file."""

    def __init__(self, path: Path) -> None:
        self._path = path

    def lines(self, ids: set[str]) -> list[dict[str, Any]]:
        if not self._path.exists():
            return []
        with self._path.open() as log:
            # A substring first: most lines name none of the ids, and are never parsed.
            mentioning = (text for text in log if any(i in text for i in ids))
            found = [line for line in _parsed(mentioning) if _names(line, ids)]
        return sorted(found, key=_moment)


class InsightsLogs:
    """The deployed functions' log groups, read with CloudWatch Logs Insights over a window
    (a query is billed by the bytes scanned: the window bounds it)."""

    def __init__(
        self,
        logs: Any,
        log_groups: Sequence[str],
        window_seconds: float,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        give_up_after_seconds: float = 60.0,
    ) -> None:
        self._logs = logs
        self._groups = list(log_groups)
        self._window = window_seconds
        self._clock = clock
        self._sleep = sleep
        self._give_up = give_up_after_seconds

    def lines(self, ids: set[str]) -> list[dict[str, Any]]:
        if not self._groups or not ids:
            return []
        now = self._clock()
        quoted = ", ".join(json.dumps(i) for i in sorted(ids))
        query = (
            "fields @timestamp, @message | filter "
            + " or ".join(f"{name} in [{quoted}]" for name in ID_FIELDS)
            + f" | sort @timestamp asc | limit {INSIGHTS_LIMIT}"
        )
        query_id = self._logs.start_query(
            logGroupNames=self._groups,
            startTime=int(now - self._window),
            endTime=int(now) + 60,
            queryString=query,
        )["queryId"]
        deadline = now + self._give_up
        while True:
            answer = self._logs.get_query_results(queryId=query_id)
            if answer["status"] not in ("Scheduled", "Running"):
                break
            if self._clock() > deadline:
                # A query left running keeps scanning, and is billed for it.
                self._logs.stop_query(queryId=query_id)
                raise LogsQueryError(
                    f"Logs Insights query {query_id} still {answer['status']} after "
                    f"{self._give_up:.0f} s; try again, or a shorter --since"
                )
            self._sleep(1.0)
        if answer["status"] != "Complete":
            raise LogsQueryError(
                f"Logs Insights query {query_id} ended {answer['status']}; try again"
            )
        messages = (
            {f["field"]: f["value"] for f in row}.get("@message", "") for row in answer["results"]
        )
        # The filter again here: a line whose JSON does not name the id exactly is not its.
        found = [line for line in _parsed(messages) if _names(line, ids)]
        return sorted(found, key=_moment)


# -- the journey ----------------------------------------------------------------------------


def trace(asked: str, dynamodb: Any, names: tables.TableNames, logs: LogSource) -> Journey:
    """An order id: every event of that order; anything else: that provider event."""
    view = order_view(dynamodb, names, asked)
    if view.order or view.effects:
        events = {e.event_id for e in view.effects if e.event_id}
        journey = Journey(asked, "order")
        journey.now.append(_order_fact(asked, view.order))
        effects, outbox = view.effects, view.outbox
        # Its items known already: one read of the logs for the order, its events and items.
        lines = logs.lines({asked, *events, *(str(i["outbox_id"]) for i in outbox)})
    else:
        lines = logs.lines({asked})
        journey = Journey(asked, "event")
        effects = _effects_named_by(dynamodb, names, asked, lines)
        events = {asked}
        outbox = _outbox_items(dynamodb, names.outbox, {e.effect_key for e in effects})
        lines += logs.lines({str(i["outbox_id"]) for i in outbox})
    outbox = sorted(outbox, key=lambda i: str(i.get("created_at", "")))
    # The sender's lines name the item only: each is put under the event that made it.
    event_of = {str(i["outbox_id"]): str(i.get("event_id", "")) for i in outbox}
    journey.timeline = [_step(line, event_of) for line in sorted(_unique(lines), key=_moment)]
    asked_event = asked if journey.kind == "event" else None
    for effect in sorted(effects, key=lambda e: e.recorded_at or ""):
        journey.now.append(_effect_fact(effect, asked_event))
    journey.now += [_outbox_fact(item) for item in outbox]
    journey.now += _delivery_facts(dynamodb, names.ledger, events, lines)
    if journey.kind == "event" and not journey.found:
        journey.kind = "unknown"
    if not any(s.stage == "ingest" for s in journey.timeline):
        journey.not_found.append(
            "no line of ingest taking it in the window: the logs are older (or gone), or the "
            "request was refused (a refused request's id is unverified, so it is not logged)"
        )
    if journey.kind != "order" and not effects:
        journey.not_found.append(
            "no entry of it in the ledger: see its process outcome above (an entry is found "
            "through process's log line; `umavez trace ORDER_ID` reads the order's entries)"
        )
    return journey


def _effects_named_by(
    dynamodb: Any, names: tables.TableNames, event_id: str, lines: Iterable[dict[str, Any]]
) -> list[Entry]:
    """The entries of the orders process's lines name: those this event counted (a reversal
    voids two keys and names one), and those its lines found counted by another event (it
    was their duplicate). The ledger is keyed by order, so the lines say where to read."""
    named: dict[str, set[str]] = {}
    for line in lines:
        if line.get("service") == "process" and line.get("order_id"):
            keys = named.setdefault(str(line["order_id"]), set())
            if line.get("effect_key"):
                keys.add(str(line["effect_key"]))
    found = []
    for order_id, keys in sorted(named.items()):
        for effect in order_view(dynamodb, names, order_id, with_outbox=False).effects:
            if effect.event_id == event_id or effect.effect_key in keys:
                found.append(effect)
    return found


def _outbox_items(dynamodb: Any, outbox: str, effect_keys: set[str]) -> list[dict[str, Any]]:
    keys = [{tables.OUTBOX_KEY: {"S": outbox_id_for(k)}} for k in sorted(effect_keys)]
    items: list[dict[str, Any]] = []
    for start in range(0, len(keys), 100):
        response = dynamodb.batch_get_item(
            RequestItems={outbox: {"Keys": keys[start : start + 100], "ConsistentRead": True}}
        )
        items += [from_attributes(i) for i in response["Responses"].get(outbox, [])]
    return items


def _delivery_facts(
    dynamodb: Any, ledger: str, events: set[str], lines: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each event's audit record, and its waiting or unmatched record, under the provider its
    ingest line names (every provider when no line does)."""
    providers_of: dict[str, set[str]] = {}
    for line in lines:
        if line.get("service") == "ingest" and line.get("event_id") and line.get("provider"):
            providers_of.setdefault(str(line["event_id"]), set()).add(str(line["provider"]))
    wanted = [
        (where, event_id, key)
        for event_id in sorted(events)
        for provider in sorted(providers_of.get(event_id) or PROVIDERS)
        for where, key in (
            ("audit", (tables.delivery_pk(provider, event_id), tables.DELIVERY_SORT)),
            ("waiting", (tables.WAITING_PK, tables.parked_sk(provider, event_id))),
            ("unmatched", (tables.UNMATCHED_PK, tables.parked_sk(provider, event_id))),
        )
    ]
    # One consistent read of them all, 100 keys a request (an order's events together).
    found, unread = ledger_items(dynamodb, ledger, [key for _, _, key in wanted])
    facts = [
        _parked_fact(where, event_id, found[key]) for where, event_id, key in wanted if key in found
    ]
    if unread:
        facts.append({"kind": "unread", "detail": f"{len(unread)} records left unread: throttled"})
    return facts


# -- facts and steps ------------------------------------------------------------------------


def _order_fact(order_id: str, order: Order | None) -> dict[str, Any]:
    return {
        "kind": "order",
        "id": order_id,
        "status": order.financial_status.value if order else "no order row",
        "last_event_id": order.last_event_id if order else None,
    }


def _effect_fact(effect: Entry, asked_event: str | None) -> dict[str, Any]:
    """An entry, and which event counted it: for an event asked about, itself or another (the
    event was a duplicate of it)."""
    by = effect.event_id or ""
    counted_by = by if asked_event is None or by == asked_event else f"another event, {by}"
    if effect.via == "statement":
        # No delivery brought it: the provider's statement did (its line, `umavez statement`).
        counted_by = f"the provider's statement, line {by}"
    return {
        "kind": "entry",
        "id": effect.effect_key,
        "outcome": effect.outcome,
        "transition": effect.transition,
        "order_id": effect.order_id,
        "amount": _money(effect),
        "counted_by": counted_by,
    }


def _money(effect: Entry) -> str:
    if not effect.currency or effect.amount is None:
        return str(effect.amount if effect.amount is not None else "")
    return render(effect.amount, effect.currency)


def _outbox_fact(item: dict[str, Any]) -> dict[str, Any]:
    channels = sorted(item.get("channels_sent") or [])
    return {
        "kind": "notification",
        "id": str(item["outbox_id"]),
        "status": item.get("status"),
        "attempts": f"{int(item.get('attempts', 0))} attempts",
        "channels": "reached " + (", ".join(channels) if channels else "none yet"),
        # Redacted again: an item stored before errors were redacted can still hold an address.
        "error": redacted(str(item["last_error"])) if item.get("last_error") else None,
        "found": "found by the statement" if item.get("found_by_statement") else None,
    }


def _parked_fact(where: str, event_id: str, item: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": where,
        "id": event_id,
        "outcome": item.get("outcome") or where,
        "order_id": item.get("order_id"),
        "detail": redacted(str(item.get("reason") or ", ".join(item.get("objects", [])))),
    }


def _step(line: dict[str, Any], event_of: dict[str, str]) -> Step:
    service = str(line.get("service", ""))
    event_id = str(line.get("event_id") or event_of.get(str(line.get("outbox_id")), ""))
    if service == "ingest":
        outcome = "ignored" if line.get("reason") else "enqueued"
        detail = f"{line.get('provider')} {line.get('event_type')}: signature verified, " + (
            f"ignored ({line.get('reason')})"
            if line.get("reason")
            else f"queued as message {line.get('message_id')}"
        )
    elif service == "process":
        outcome = str(line.get("outcome") or line.get("level", "")).lower()
        parts = [
            f"receive {line.get('receive_count')}" if line.get("receive_count") else "",
            f"order {line.get('order_id')}" if line.get("order_id") else "",
            f"key {str(line.get('effect_key'))[:12]}..." if line.get("effect_key") else "",
            str(line.get("reason") or line.get("message") or ""),
        ]
        detail = ", ".join(p for p in parts if p)
    elif service == "outbox" or service == "sweeper":
        outcome = str(line.get("result") or line.get("level", "")).lower()
        detail = (
            f"{line.get('outbox_id', '')[:20]}... {line.get('message')}"
            + (f", attempt {line.get('attempts')}" if line.get("attempts") else "")
            + (f": {line.get('error')}" if line.get("error") else "")
        )
    else:
        outcome = str(line.get("level", "")).lower()
        detail = str(line.get("message", ""))
    # Log lines written before the functions redacted theirs can still hold an address.
    return Step(_iso(line), service, outcome, event_id, redacted(detail))


# -- reading lines --------------------------------------------------------------------------


def _parsed(texts: Iterable[str]) -> Iterator[dict[str, Any]]:
    for text in texts:
        if not text.startswith("{"):
            continue  # the runtime's own lines (START, END, REPORT)
        try:
            line = json.loads(text)
        except json.JSONDecodeError:
            continue
        if isinstance(line, dict):
            yield line


def _names(line: dict[str, Any], ids: set[str]) -> bool:
    return any(str(line.get(name)) in ids for name in ID_FIELDS if line.get(name))


def _moment(line: dict[str, Any]) -> float:
    """Powertools stamps `2026-12-01 20:19:56,486+0000`; a line without a readable time sorts
    first."""
    stamp = str(line.get("timestamp", ""))
    for layout in ("%Y-%m-%d %H:%M:%S,%f%z", "%Y-%m-%dT%H:%M:%S.%f%z"):
        try:
            return datetime.strptime(stamp, layout).timestamp()
        except ValueError:
            continue
    return 0.0


def _iso(line: dict[str, Any]) -> str:
    moment = _moment(line)
    if not moment:
        return str(line.get("timestamp", ""))
    return datetime.fromtimestamp(moment, tz=UTC).isoformat(timespec="milliseconds")


def _unique(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    kept = []
    for line in lines:
        key = json.dumps(line, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            kept.append(line)
    return kept
