"""What an operator sees of the drill, checked against what the drill knows: `umavez status`
(its readings equal the stack's own counts) and `umavez trace` (a spread of the drill's events
and orders, each journey equal to the ledger's)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from devstack.resources import client
from devstack.stack import RECONCILE_EVERY_SECONDS, EmbeddedStack
from firedrill.checks import Check
from firedrill.delivery import DeliveryLog
from firedrill.story import Story
from functions.shared.items import Entry
from functions.shared.outbox import outbox_id_for
from ops.state import LedgerState
from ops.status import Pipeline, read_status
from ops.trace import Journey, LocalLogs, trace

# How many events and orders the drill traces: a spread over the whole run, not all of it.
TRACED_EVENTS = 24
TRACED_ORDERS = 6
SENDERS = frozenset({"outbox", "sweeper"})


def status_check(
    stack: EmbeddedStack, state: LedgerState, statement_windows: Mapping[str, str | None]
) -> Check:
    """Each reading of `umavez status` on the drilled stack equals the count the drill reads
    its own way: the DLQ, the waiting room, the dead notifications, the last reconciliation,
    and the end of each provider's last statement window."""
    resources = stack.resources
    pipeline = Pipeline(
        resources.tables.ledger,
        resources.tables.outbox,
        resources.queue_url,
        resources.dead_letter_url,
        RECONCILE_EVERY_SECONDS,
    )
    stack.aws.publish_queue_metrics()  # the queue as it is now, as AWS tells within a minute
    status = read_status(
        pipeline, lambda service: client(service, stack.aws.endpoint_url), time.time()
    )
    facts = {r.name: r.facts for r in status.readings}
    room = stack.waiting_room()
    runs = stack.reconciliation.results
    expected = {
        "dead letters": stack.dead_letters(),
        "waiting": sum(1 for _ in room.waiting()),
        "unmatched": sum(1 for _ in room.unmatched()),
        "re-checks": len(state.watched),
        "dead notifications": sum(i["status"] == "dead" for i in state.outbox),
        "last reconciliation's orders": runs[-1]["orders_checked"] if runs else None,
        **{f"{p}'s last statement window": end for p, end in statement_windows.items()},
    }
    told = {
        "dead letters": facts["dead letters"]["count"],
        "waiting": facts["waiting"]["count"],
        "unmatched": facts["unmatched"]["count"],
        "re-checks": facts["re-checks"]["count"],
        "dead notifications": facts["notifications"]["dead"],
        "last reconciliation's orders": facts["reconciliation"].get("orders_checked"),
        **{
            f"{p}'s last statement window": facts["statement"].get(p, {}).get("until")
            for p in statement_windows
        },
    }
    off = [
        f"{name}: status {told[name]}, drill {n}" for name, n in expected.items() if told[name] != n
    ]
    if facts["webhook queue"]["oldest_seconds"] is None:
        off.append("no queue age in CloudWatch")
    verdict = "a person is needed" if status.needs_person else "healthy"
    return Check(
        "umavez status tells what the stack holds",
        not off,
        f"{verdict}; " + ", ".join(f"{k} {v}" for k, v in told.items())
        if not off
        else "; ".join(off),
    )


BY_STATEMENT = "the provider's statement"


def trace_check(
    stack: EmbeddedStack, state: LedgerState, log: DeliveryLog, stories: Sequence[Story]
) -> Check:
    """For a spread of the accepted events: the trace shows ingest taking it and process
    handling it, no other event's line, exactly the entries the ledger says it counted, each
    with its notification's status; for a spread of orders, every entry of the order."""
    dynamodb = client("dynamodb", stack.aws.endpoint_url)
    names = stack.resources.tables
    logs = LocalLogs(stack.log_path)
    counted_by: dict[str, list[Entry]] = {}
    for view in state.orders.values():
        for effect in view.effects:
            counted_by.setdefault(str(effect.event_id), []).append(effect)
    status_of = {str(i["outbox_id"]): i["status"] for i in state.outbox}
    problems: list[str] = []
    events = _spread(sorted(log.accepted_event_ids), TRACED_EVENTS)
    for event_id in events:
        journey = trace(event_id, dynamodb, names, logs)
        by_bus = event_id in log.bus_event_ids
        problems += _event_problems(journey, counted_by.get(event_id, []), status_of, by_bus)
    orders = _spread(sorted({s.order_id for s in stories} & set(state.orders)), TRACED_ORDERS)
    for order_id in orders:
        journey = trace(order_id, dynamodb, names, logs)
        entries = sum(f["kind"] == "entry" for f in journey.now)
        if journey.kind != "order" or entries != len(state.orders[order_id].effects):
            problems.append(
                f"{order_id}: {entries} entries traced of {len(state.orders[order_id].effects)}"
            )
    # Orders the statement healed: trace tells their entries as the statement's.
    healed = sorted(
        order_id
        for order_id, view in state.orders.items()
        if any(e.via == "statement" for e in view.effects)
    )[:TRACED_ORDERS]
    for order_id in healed:
        told = trace(order_id, dynamodb, names, logs).now
        by_statement = [f for f in told if str(f.get("counted_by", "")).startswith(BY_STATEMENT)]
        expected = sum(e.via == "statement" for e in state.orders[order_id].effects)
        if len(by_statement) != expected:
            problems.append(f"{order_id}: {len(by_statement)} entries told as the statement's")
    return Check(
        "umavez trace tells each journey as the ledger holds it",
        not problems,
        f"{len(events)} events and {len(orders)} orders traced, {len(healed)} healed by the "
        "statement"
        if not problems
        else f"{len(problems)}: " + "; ".join(problems[:3]),
    )


def _event_problems(
    journey: Journey,
    counted: list[Entry],
    status_of: dict[str, str],
    by_bus: bool = False,
) -> list[str]:
    asked = journey.asked
    stages = {(s.stage, s.outcome) for s in journey.timeline}
    problems = []
    if ("ingest", "enqueued") not in stages and not by_bus:  # EventBridge enqueued it
        problems.append(f"{asked}: ingest not traced")
    if not any(stage == "process" for stage, _ in stages):
        problems.append(f"{asked}: process not traced")
    # The senders' lines (first try, sweeper) are the entry's: under the event that counted it
    # (for a duplicate, another); ingest's and process's are this event's alone.
    own = {s.event_id for s in journey.timeline if s.stage not in SENDERS}
    if foreign := own - {asked}:
        problems.append(f"{asked}: lines of {sorted(foreign)[:2]}")
    traced = sorted(
        (f["id"], f["outcome"])
        for f in journey.now
        if f["kind"] == "entry" and f["counted_by"] == asked
    )
    held = sorted((e.effect_key, e.outcome) for e in counted)
    if traced != held:
        problems.append(f"{asked}: entries {traced} traced, {held} held")
    notified = {f["id"]: f["status"] for f in journey.now if f["kind"] == "notification"}
    for effect in counted:
        outbox_id = outbox_id_for(effect.effect_key)
        if outbox_id in status_of and notified.get(outbox_id) != status_of[outbox_id]:
            problems.append(f"{asked}: notification {outbox_id[:16]} not {status_of[outbox_id]}")
    return problems


def _spread(items: list[str], count: int) -> list[str]:
    """`count` items evenly spread over the list (its first and its last included)."""
    if len(items) <= count:
        return items
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]
