"""The guarantees of docs/design.md, judged from the tables once the drill has delivered."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devstack.drain import Drained
from devstack.resources import client
from devstack.sink import sink_counts
from devstack.stack import EmbeddedStack
from firedrill.delivery import DeliveryLog
from firedrill.story import Story
from functions.outbox.templates import emails_customer
from functions.reconcile.service import Reconciler
from functions.shared import books
from functions.shared.domain import TOP_UP_MARK, Outcome, Total
from functions.shared.items import Entry, Order
from functions.shared.outbox import OutboxItem
from functions.shared.redaction import EMAIL
from ops.state import LedgerState, OrderView

# Reads of outbox items (up to 100 keys each) the drill's full audit makes at a time: it waits
# on the server, not on the CPU.
AUDIT_WORKERS = 8


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def check_state(stories: Sequence[Story], state: Any, log: DeliveryLog) -> list[Check]:
    """Every guarantee of docs/design.md, judged from the tables."""
    recorded = _recorded_event_ids(state)
    return [
        *_story_checks(_story_problems(stories, state)),
        _pending_refunds_check(stories, state),
        _forged_check(log, recorded),
        _other_mode_check(log, recorded),
    ]


@dataclass
class _StoryProblems:
    """What the stories' orders show wrong, per guarantee: a line each."""

    twice: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    wrong_status: list[str] = field(default_factory=list)
    wrong_totals: list[str] = field(default_factory=list)
    unbalanced: list[str] = field(default_factory=list)
    stale_off: list[str] = field(default_factory=list)
    outbox_off: list[str] = field(default_factory=list)
    credited_twice: list[str] = field(default_factory=list)


def _story_problems(stories: Sequence[Story], state: LedgerState) -> _StoryProblems:
    problems = _StoryProblems()
    conflicts = {d.get("order_id") for d in state.deliveries if d.get("outcome") == "conflict"}
    for story in stories:
        order_id, credited_twice = _bound_order(story, conflicts, state.orders)
        if credited_twice:
            problems.credited_twice.append(f"{story.order_id} / {story.conflicting_order}")
        view = state.orders.get(order_id)
        _effect_problems(story, view, problems)
        _order_problems(story, view, problems)
    return problems


def _bound_order(
    story: Story, conflicts: set[Any], orders: dict[str, OrderView]
) -> tuple[str, bool]:
    """The order the story's payment was bound to, and whether the order its conflicting event
    names was credited too (the conflict not recorded, or effects counted on it)."""
    order_id, other = story.order_id, story.conflicting_order
    if not other:
        return order_id, False
    # Processing is asynchronous: whichever order's event was processed first is bound.
    if order_id in conflicts and other not in conflicts:
        order_id, other = other, order_id
    won = orders.get(other)
    return order_id, other not in conflicts or bool(won and won.effects)


def _effect_problems(story: Story, view: OrderView | None, problems: _StoryProblems) -> None:
    """Its entries: each counted once, none lost, none invented, stale ones as expected, each
    counted one announced."""
    effects = view.effects if view else []
    counted = [e for e in effects if e.counted]
    exact = Counter((str(e.transition), str(e.external_ref)) for e in counted)
    problems.twice += [f"{story.order_id} {k}" for k, n in exact.items() if n > 1]
    # A payment captured in parts is one movement of the truth: its top-ups are its parts.
    seen = {(t, ref.split(TOP_UP_MARK)[0]) for t, ref in exact}
    problems.lost += [f"{story.order_id} {k}" for k in story.expected.effects - seen]
    possible = story.expected.effects | story.expected.either_way
    problems.extra += [f"{story.order_id} {k}" for k in seen - possible]
    stale = sum(e.outcome == Outcome.STALE.value for e in effects)
    low, high = story.expected.stale
    if not low <= stale <= high:
        problems.stale_off.append(f"{story.order_id} ({story.kind}): {stale} stale")
    problems.outbox_off += _announcements_off(story.order_id, counted, view.outbox if view else [])


def _order_problems(story: Story, view: OrderView | None, problems: _StoryProblems) -> None:
    """Its order row: the status and totals the history implies, equal to its entries' sum."""
    # An order nothing ever counted on (a payment whose reversal voided it) has no row: it
    # reads as unpaid, in no currency yet.
    order = view.order if view else None
    books_read = order or Order(story.order_id)
    status = books_read.financial_status
    if status != story.expected.status:
        problems.wrong_status.append(
            f"{story.order_id} ({story.kind}): {status} != {story.expected.status}"
        )
    totals = {name: books_read.total(Total(name)) for name in story.expected.totals}
    currency_off = order is not None and order.currency != story.expected.currency
    if totals != story.expected.totals or currency_off:
        problems.wrong_totals.append(
            f"{story.order_id} ({story.kind}): {_nonzero(totals)} {books_read.currency} "
            f"!= {_nonzero(story.expected.totals)} {story.expected.currency}"
        )
    if order is not None and view is not None:
        problems.unbalanced += [
            f"{m.order_id} {m.detail}" for m in books.unbalanced_totals(order, view.effects)
        ]


def _story_checks(problems: _StoryProblems) -> list[Check]:
    return [
        Check("no effect applied twice", not problems.twice, _summary(problems.twice)),
        Check("no legitimate effect lost", not problems.lost, _summary(problems.lost)),
        Check("nothing counted that did not happen", not problems.extra, _summary(problems.extra)),
        Check(
            "financial status is what the history implies",
            not problems.wrong_status,
            _summary(problems.wrong_status),
        ),
        Check(
            "totals follow the history, in minor units",
            not problems.wrong_totals,
            _summary(problems.wrong_totals),
        ),
        Check(
            "totals equal the signed sum of the entries",
            not problems.unbalanced,
            _summary(problems.unbalanced),
        ),
        Check(
            "stale events recorded, status kept",
            not problems.stale_off,
            _summary(problems.stale_off),
        ),
        Check(
            "every money movement announced once (late ones flagged)",
            not problems.outbox_off,
            _summary(problems.outbox_off),
        ),
        Check(
            "one payment, one order: a second claim is a recorded conflict",
            not problems.credited_twice,
            _summary(problems.credited_twice),
        ),
    ]


def _pending_refunds_check(stories: Sequence[Story], state: LedgerState) -> Check:
    watched = {str(w["object"]) for w in state.watched}
    to_watch = {s.watched_charge for s in stories if s.watched_charge}
    return Check(
        "a refund still pending is read again until it settles (whatever is subscribed)",
        watched == to_watch,
        f"{len(watched)} charge(s) watched"
        if watched == to_watch
        else f"watched, not pending: {sorted(watched - to_watch)[:3]}; "
        f"pending, not watched: {sorted(to_watch - watched)[:3]}",
    )


def _recorded_event_ids(state: LedgerState) -> set[str]:
    """The events the tables hold: as a delivery, or as an entry's."""
    return {d["event_id"] for d in state.deliveries} | {
        str(e.event_id) for v in state.orders.values() for e in v.effects
    }


def _forged_check(log: DeliveryLog, recorded: set[str]) -> Check:
    forged_accepted = [eid for eid, statuses in log.forged if statuses[-1] != 401]
    forged_recorded = [eid for eid, _ in log.forged if eid in recorded]
    return Check(
        "forged and stale signatures refused, nothing enqueued",
        not forged_accepted and not forged_recorded,
        f"{len(log.forged)} refused"
        if not (forged_accepted or forged_recorded)
        else _summary(forged_accepted + forged_recorded),
    )


def _other_mode_check(log: DeliveryLog, recorded: set[str]) -> Check:
    other_mode_applied = sorted(log.other_mode_event_ids & recorded)
    not_acknowledged = sorted(log.other_mode_event_ids - log.ignored_event_ids)
    return Check(
        "events of the other payment mode acknowledged (200), never applied",
        not other_mode_applied and not not_acknowledged,
        f"{len(log.other_mode_event_ids)} live-mode events ignored"
        if not (other_mode_applied or not_acknowledged)
        else f"applied {other_mode_applied[:3]}, not acknowledged {not_acknowledged[:3]}",
    )


def _announcements_off(
    order_id: str, counted: list[Entry], outbox: list[dict[str, Any]]
) -> list[str]:
    """One outbox item per counted entry, flagged late exactly when the entry was stale."""
    late = {e.effect_key: e.outcome == Outcome.STALE.value for e in counted}
    items = Counter(i["effect_key"] for i in outbox)
    problems = [f"{order_id} {k[:12]}: {items[k]} items" for k in late if items[k] != 1]
    problems += [f"{order_id} {k[:12]}: not counted" for k in items if k not in late]
    problems += [
        f"{order_id} {i['effect_key'][:12]}: late={i.get('late')}"
        for i in outbox
        if i["effect_key"] in late and bool(i.get("late")) != late[i["effect_key"]]
    ]
    return problems


def _nonzero(totals: dict[str, int]) -> dict[str, int]:
    return {name.removesuffix("_total"): n for name, n in totals.items() if n}


def _summary(problems: list[str]) -> str:
    if not problems:
        return "ok"
    return f"{len(problems)}: " + "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")


def books_checks(views: dict[str, OrderView]) -> list[Check]:
    mismatches = [
        m
        for v in views.values()
        for m in books.unbalanced_totals(v.books, v.effects)
        + books.unmatched_outbox(v.effects, v.outbox)
    ]
    unsent = [
        i["outbox_id"][:16] for v in views.values() for i in v.outbox if i["status"] != "sent"
    ]
    return [
        Check(
            "books balance for the drill's orders", not mismatches, f"{len(mismatches)} mismatches"
        ),
        Check("every notification sent", not unsent, f"{len(unsent)} not sent yet"),
    ]


class EmbeddedReads:
    """What the embedded checks read besides the tables, started together once the drill is
    drained: the full audit (every order, not only those changed since the last scheduled
    run), the last look at the scheduled runs, the sinks' counts. They only read: they run side
    by side, and beside the drill's own read of the tables, each waiting on the servers while
    the others work."""

    def __init__(self, stack: EmbeddedStack) -> None:
        auditor = Reconciler(
            client("dynamodb", stack.aws.endpoint_url),
            stack.resources.tables,
            time.time,
            sleep=time.sleep,
        )
        self._reads = ThreadPoolExecutor(3, thread_name_prefix="check")
        self.audit = self._reads.submit(auditor.audit, AUDIT_WORKERS)
        self.scheduled = self._reads.submit(_scheduled_reconciliation, stack)
        self.sinks = self._reads.submit(sink_counts, stack.aws.endpoint_url)

    def __enter__(self) -> EmbeddedReads:
        return self

    def __exit__(self, *exc: object) -> None:
        self._reads.shutdown(wait=True)


def embedded_checks(
    stack: EmbeddedStack,
    state: LedgerState,
    log: DeliveryLog,
    drains: Sequence[Drained],
    reads: EmbeddedReads,
) -> list[Check]:
    report, scheduled, sinks = reads.audit.result(), reads.scheduled.result(), reads.sinks.result()
    unsent = [i["outbox_id"][:16] for i in state.outbox if i["status"] != "sent"]
    missing_sink = [
        i["outbox_id"][:16]
        for i in state.outbox
        if sinks.get(i["outbox_id"], {}).get("eventbridge", 0) < 1
        or sinks.get(i["outbox_id"], {}).get("http", 0) < 1
        or (_emailed(i) and sinks.get(i["outbox_id"], {}).get("email", 0) < 1)
    ]
    most = max((max(c.values(), default=0) for c in sinks.values()), default=0)
    return [
        Check(
            "every notification sent and received by its sinks",
            not unsent and not missing_sink,
            f"{len(state.outbox)} keys, at most {most} deliveries of one key"
            if not (unsent or missing_sink)
            else f"unsent {unsent[:3]}, missing at a sink {missing_sink[:3]}",
        ),
        Check(
            "books balance (reconciliation)",
            not report.mismatches,
            f"{report.orders_checked} orders, 0 mismatches"
            if not report.mismatches
            else "; ".join(f"{m.kind} {m.order_id}" for m in report.mismatches[:3]),
        ),
        scheduled,
        nothing_lost(stack, log, drains),
        every_http_notification_verified(stack),
        no_address_in_the_logs(stack.log_path),
    ]


def every_http_notification_verified(stack: EmbeddedStack) -> Check:
    """The local receiver verified each POST with the reference implementation; one it could
    not verify means a notification went out unsigned or signed wrong."""
    verified, unverified = stack.http_sink.verified, stack.http_sink.unverified
    return Check(
        "every HTTP notification verified by its receiver",
        verified > 0 and unverified == 0,
        f"{verified} verified, {unverified} unverified",
    )


def no_address_in_the_logs(log_path: Path) -> Check:
    """No e-mail address in any function's log line: errors (SES's sandbox names the
    recipient) are logged redacted. The report names lines, never the address."""
    found: list[int] = []
    lines = 0
    if log_path.exists():
        with log_path.open() as log:
            for number, line in enumerate(log, 1):
                lines = number
                if "@" in line and EMAIL.search(line):
                    found.append(number)
    return Check(
        "no customer address in any log",
        not found,
        f"{lines} log lines, none with an address"
        if not found
        else f"{len(found)} lines with an address in {log_path}: lines {found[:5]}",
    )


def nothing_lost(stack: EmbeddedStack, log: DeliveryLog, drains: Sequence[Drained]) -> Check:
    """Every accepted delivery was received by process, nothing is left in flight, the DLQ is
    empty. When that fails, what is merely *not yet processed* (still in the queue, parked, its
    notification unsent: the drain gave up first) is told apart from what is *lost* (accepted,
    never received, and in no queue): the first says the run was too short, the second that a
    guarantee broke. Either way the check fails."""
    seen = set().union(*(p.event_ids for p in stack.process_pollers))
    unseen = log.accepted_event_ids - seen
    dead_letters = stack.dead_letters()
    drained = all(drains)
    if drained and not unseen and dead_letters == 0:
        return Check(
            "nothing lost: every accepted delivery processed, DLQ empty",
            True,
            f"{len(log.accepted_event_ids)} accepted, all processed; DLQ empty",
        )
    # Look into the queue: stop processing (the drill is over), then read what is left.
    queued = stack.stop_processing_and_read_queue() if unseen else set()
    never_received = unseen & queued
    lost = sorted(unseen - queued)
    gave_up = next((d for d in drains if not d), None)
    parts = []
    if gave_up is not None:
        parts.append(
            f"not yet processed when the drain gave up after {gave_up.seconds:.0f} s "
            f"(allowed {gave_up.bound_seconds:.0f} s): {gave_up.left}"
        )
    if never_received:
        parts.append(f"{len(never_received)} accepted deliveries still queued, never received")
    parts.append(f"lost: {len(lost)}" + (f" {lost[:3]}" if lost else ""))
    parts.append(f"dead letters: {dead_letters}")
    return Check(
        "nothing lost: every accepted delivery processed, DLQ empty", False, "; ".join(parts)
    )


BOOKS_MISMATCHES = ("unbalanced_total", "missing_outbox_item", "unexpected_outbox_item")


def _scheduled_reconciliation(stack: EmbeddedStack) -> Check:
    """The hourly (incremental) reconciliation ran on its local schedule while the drill
    wrote. Under traffic it must never call the books wrong: a false alarm pages someone.
    (Unmatched money and unsent items are real while the drill runs.) The schedule is stopped
    first, its run in progress let finish; a drill too short for the schedule has it run once
    now, so that there is always a run to judge (a run after a run only re-reads the hour's
    orders beside the full audit)."""
    stack.reconciliation.stop()
    stack.reconciliation.join()
    if not stack.reconciliation.results:
        stack.reconciliation.run_now()
    runs = stack.reconciliation.results
    false = [
        f"{kind}={count}"
        for run in runs
        for kind, count in run["mismatches"].items()
        if kind in BOOKS_MISMATCHES
    ]
    checked = sum(run["orders_checked"] for run in runs)
    return Check(
        "scheduled reconciliation under traffic: no false mismatch",
        not false,
        f"{len(runs)} incremental runs, {checked} orders read"
        if not false
        else ", ".join(false[:5]),
    )


def _emailed(item: dict[str, Any]) -> bool:
    """Due an e-mail under the policy: to its own recipient, or to the one its order had
    learned when it was sent (the sender records the channels it used)."""
    if "email" in item.get("channels_sent", set()):
        return True
    return bool(item.get("recipient")) and emails_customer(OutboxItem.model_validate(item))
