"""`umavez firedrill`: the drill against the embedded stack (default) or a deployed one."""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

import boto3

from functions.ingest.adapters import SqsQueue
from functions.operations import replay
from functions.operations.outcomes import LedgerOutcomes, Tracked
from functions.outbox.templates import emails_customer
from functions.process.service import EffectProcessor
from functions.process.stripe_api import StripeApi
from functions.process.waiting import Waiting
from functions.reconcile.service import CHECKPOINT_PK, Reconciler
from functions.shared import books
from functions.shared.domain import Outcome
from functions.shared.outbox import OutboxItem
from functions.shared.providers import Interpreters
from functions.shared.tables import TableNames
from infra.config import DEFAULT_API_TYPE, ApiType
from local_stack.drill import (
    Check,
    DeliveryLog,
    ProgressBar,
    Providers,
    check_state,
    render,
    run_stories,
)
from local_stack.metrics_report import by_function
from local_stack.resources import DEVELOPMENT_SECRETS, STRIPE_DEVELOPMENT_API_KEY, client
from local_stack.sink import sink_counts
from local_stack.stack import EmbeddedStack, Faults
from local_stack.state import LedgerState, order_view
from local_stack.stories import Post, Story, stories

DEFAULT_ORDERS = 300
RESEND_SHARE = 0.1
DEPLOYED_PROVIDERS = {"stripe", "asaas"}  # Mercado Pago's would need their live payments API


@dataclass
class DrillOptions:
    orders: int = DEFAULT_ORDERS
    faults: bool = True
    seed: int = 42
    process_variant: type[EffectProcessor] | None = None
    # The event shape the embedded front hands ingest (the deployed stack's `apiType`).
    api_type: ApiType = DEFAULT_API_TYPE


def run_embedded(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    started = time.monotonic()
    faults = Faults.drill() if options.faults else Faults()
    faults.seed = options.seed
    with EmbeddedStack(
        faults=faults, process_variant=options.process_variant, api_type=options.api_type
    ) as stack:
        drill = stories(options.orders, int(time.time()))
        log = DeliveryLog()
        providers = providers_for(stack, drill, log)
        err.write(
            f"  embedded stack up: {stack.front.url} as a {options.api_type.value} API"
            f" (AWS on {stack.aws.endpoint_url})\n"
        )
        run_stories(drill, providers, ProgressBar(err))
        drained = stack.drain()
        dynamodb = client("dynamodb", stack.aws.endpoint_url)
        names = stack.resources.tables
        unmatched = _attach_unmatched(stack, drill)
        drained = stack.drain() and drained

        before_resend = _snapshot(dynamodb, names)
        resent = _resend(drill, providers, options.seed)
        drained = stack.drain() and drained
        replayed = _replay_stripe(stack, drill, log)
        drained = stack.drain() and drained
        after_resend = _snapshot(dynamodb, names)
        replay_outcomes = Counter(r.outcome for r in replayed.ledger.results(replayed.enqueued))

        state = LedgerState.load(dynamodb, names)
        checks = check_state(drill, state, log)
        checks += _embedded_checks(stack, state, log, drained)
        checks.append(unmatched)
        checks.append(
            Check(
                "resends and a replay from the events API change nothing",
                before_resend == after_resend and Outcome.APPLIED.value not in replay_outcomes,
                f"{resent} old events resent; {len(replayed.enqueued)} replayed: "
                + ", ".join(f"{n} {outcome}" for outcome, n in sorted(replay_outcomes.items()))
                if before_resend == after_resend
                else "state changed: " + _changed(before_resend, after_resend),
            )
        )
        facts = _facts(options, drill, log, stack, state, time.monotonic() - started)
    render(checks, facts, out)
    return 0 if all(c.ok for c in checks) else 1


def providers_for(stack: EmbeddedStack, drill: Sequence[Story], log: DeliveryLog) -> Providers:
    """The simulated providers for `drill`: what their APIs answer is registered with the
    stack's fakes, and the front answers late where a story plays the incident."""
    for story in drill:
        stack.provider_apis.refunds.update(story.stripe_refunds)
        if story.mercadopago_payment:
            stack.provider_apis.payments[str(story.mercadopago_payment["id"])] = (
                story.mercadopago_payment
            )
    providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, log)
    stack.front.slow_seconds = providers.ingest_delay
    return providers


@dataclass
class DeployedTarget:
    url: str
    secrets: dict[str, str]
    tables: TableNames
    region: str | None = None
    timeout_seconds: float = 600


def run_deployed(
    options: DrillOptions,
    target: DeployedTarget,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """The drill against a deployed stack: Stripe and Asaas stories, no injected faults.

    Processing there is asynchronous and a refund that precedes its payment waits a visibility
    timeout, so the checks are repeated until they pass or `timeout_seconds` runs out. Only the
    drill's own orders are read; sinks and queues are the deployment's to watch.
    """
    started = time.monotonic()
    providers_given = DEPLOYED_PROVIDERS & set(target.secrets)
    drill = [
        s
        for s in stories(options.orders, int(time.time()))
        if {p.provider for p in s.posts} <= providers_given
        # Stories that need the embedded fakes of the providers' APIs, or its waiting seconds.
        and not s.stripe_refunds
        and not s.unmatched_object
    ]
    log = DeliveryLog()
    err.write(f"  delivering {len(drill)} stories to {target.url}\n")
    run_stories(drill, Providers(target.url, target.secrets, log), ProgressBar(err))
    dynamodb = boto3.client("dynamodb", region_name=target.region)
    deadline = time.monotonic() + target.timeout_seconds
    while True:
        views = {s.order_id: order_view(dynamodb, target.tables, s.order_id) for s in drill}
        state = LedgerState(views, [], [i for v in views.values() for i in v.outbox])
        checks = check_state(drill, state, log) + _books_checks(views)
        if all(c.ok for c in checks) or time.monotonic() > deadline:
            break
        time.sleep(10)
    facts = {
        "target": target.url,
        "orders (stories)": f"{len(drill)} ({', '.join(sorted(providers_given))})",
        "deliveries (HTTP attempts)": _deliveries(log),
        "elapsed": f"{time.monotonic() - started:.1f} s",
    }
    render(checks, facts, out)
    return 0 if all(c.ok for c in checks) else 1


def _deliveries(log: DeliveryLog) -> str:
    answers = ", ".join(f"{k or 'timeout'}x{v}" for k, v in sorted(log.by_status.items()))
    return f"{log.attempts}: {answers}"


def _books_checks(views: dict[str, Any]) -> list[Check]:
    mismatches = [
        m
        for v in views.values()
        for m in books.unbalanced_totals(v.order, v.effects)
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


def _embedded_checks(
    stack: EmbeddedStack, state: LedgerState, log: DeliveryLog, drained: bool
) -> list[Check]:
    sinks = sink_counts(stack.aws.endpoint_url)
    unsent = [i["outbox_id"][:16] for i in state.outbox if i["status"] != "sent"]
    missing_sink = [
        i["outbox_id"][:16]
        for i in state.outbox
        if sinks.get(i["outbox_id"], {}).get("eventbridge", 0) < 1
        or (_emailed(i) and sinks.get(i["outbox_id"], {}).get("email", 0) < 1)
    ]
    # The full audit: the drill checks every order, not only those changed since the last
    # scheduled (incremental) run.
    report = Reconciler(
        client("dynamodb", stack.aws.endpoint_url),
        stack.resources.tables,
        time.time,
        sleep=time.sleep,
    ).audit()
    sqs = client("sqs", stack.aws.endpoint_url)
    dead_letters = int(
        sqs.get_queue_attributes(
            QueueUrl=stack.resources.dead_letter_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]["ApproximateNumberOfMessages"]
    )
    scheduled = _scheduled_reconciliation(stack)
    seen = set().union(*(p.event_ids for p in stack.process_pollers))
    unprocessed = sorted(log.accepted_event_ids - seen)
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
        Check(
            "nothing lost: every accepted delivery processed, DLQ empty",
            drained and not unprocessed and dead_letters == 0,
            f"drained={drained}, unprocessed={len(unprocessed)}, dead letters={dead_letters}",
        ),
    ]


BOOKS_MISMATCHES = ("unbalanced_total", "missing_outbox_item", "unexpected_outbox_item")


def _scheduled_reconciliation(stack: EmbeddedStack) -> Check:
    """The hourly (incremental) reconciliation ran on its local schedule while the drill
    wrote; once more now. Under traffic it must never call the books wrong: a false alarm
    pages someone. (Unmatched money and unsent items are real while the drill runs.)"""
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


def _attach_unmatched(stack: EmbeddedStack, drill: Sequence[Story]) -> Check:
    """Every payment nobody could route is listed as unmatched; an operator attaches it to its
    order (twice: the second changes nothing), as `umavez attach` does."""
    room = Waiting(
        client("dynamodb", stack.aws.endpoint_url),
        client("sqs", stack.aws.endpoint_url),
        stack.resources.tables,
        stack.resources.queue_url,
        time.time,
    )
    listed = {item.get("external_ref") for item in room.unmatched()}
    expected = [s for s in drill if s.unmatched_object]
    missing = [s.unmatched_object for s in expected if s.unmatched_object not in listed]
    for story in expected:
        assert story.unmatched_object is not None
        for _ in range(2):
            room.attach("stripe", story.unmatched_object, story.order_id)
    return Check(
        "every unmatched payment listed, then attached once",
        not missing,
        f"{len(expected)} unmatched, attached" if not missing else f"not listed: {missing[:3]}",
    )


def _emailed(item: dict[str, Any]) -> bool:
    """Due an e-mail under the policy: to its own recipient, or to the one its order had
    learned when it was sent (the sender records the channels it used)."""
    if "email" in item.get("channels_sent", set()):
        return True
    return bool(item.get("recipient")) and emails_customer(OutboxItem.model_validate(item))


@dataclass
class Replayed:
    ledger: LedgerOutcomes
    enqueued: list[Tracked]


def _replay_stripe(stack: EmbeddedStack, drill: Sequence[Story], log: DeliveryLog) -> Replayed:
    """`umavez replay stripe` over the drill's window: Stripe's events API (the local fake)
    lists every event the endpoint accepted; all were processed, so none applies again."""
    posted = [json.loads(p.body) for s in drill for p in s.posts if p.provider == "stripe"]
    events = [event for event in posted if event["id"] in log.accepted_event_ids]
    stack.provider_apis.events.extend(events)
    created = [int(event["created"]) for event in events]
    window = replay.Window.parse(
        datetime.fromtimestamp(min(created), tz=UTC).isoformat(),
        datetime.fromtimestamp(max(created), tz=UTC).isoformat(),
        time.time(),
    )
    api_key = STRIPE_DEVELOPMENT_API_KEY  # the local stack's, for its fake Stripe API
    pages = replay.StripeEvents(lambda: api_key, time.time, stack.provider_apis.url).pages(window)
    refunds = StripeApi(lambda: api_key, stack.provider_apis.url).refunds_of_charge
    ledger = LedgerOutcomes(
        client("dynamodb", stack.aws.endpoint_url),
        stack.resources.tables.ledger,
        Interpreters.build(stripe_refunds=refunds),
    )
    queue = SqsQueue(client("sqs", stack.aws.endpoint_url), stack.resources.queue_url)
    enqueued = replay.Replayer(queue, ledger, replay.STRIPE_EVENTS_API).replay(pages)
    return Replayed(ledger, enqueued)


def _resend(drill: Sequence[Story], providers: Providers, seed: int) -> int:
    """A provider's dashboard "resend", weeks later: an old event, freshly signed."""
    rng = random.Random(seed)  # noqa: S311 - sampling
    sample = [
        s.posts[0] for s in drill if s.posts[0].forgery is None and rng.random() < RESEND_SHARE
    ]
    for post in sample:
        providers.deliver(Post(post.provider, post.body, post.query))
    return len(sample)


def _changed(before: list[Any], after: list[Any]) -> str:
    """The first items that differ, by key, and which of their attributes changed."""

    def by_key(items: list[Any]) -> dict[str, Any]:
        return {
            "/".join(str(item[k]) for k in ("pk", "sk", "outbox_id") if k in item): item
            for item in items
        }

    old, new = by_key(before), by_key(after)
    notes = [f"new {key}" for key in new.keys() - old.keys()]
    notes += [f"gone {key}" for key in old.keys() - new.keys()]
    for key in old.keys() & new.keys():
        if old[key] != new[key]:
            names = old[key].keys() | new[key].keys()
            notes.append(f"{key}: {sorted(n for n in names if old[key].get(n) != new[key].get(n))}")
    return "; ".join(notes[:4])


def _snapshot(dynamodb: Any, names: TableNames) -> list[Any]:
    """Every item of the business state. The reconciliation's checkpoint is left out: the
    scheduled run moves it whenever it runs, resends or not."""
    items = []
    for table in (names.ledger, names.outbox):
        for page in dynamodb.get_paginator("scan").paginate(TableName=table):
            items += [i for i in page["Items"] if i.get("pk", {}).get("S") != CHECKPOINT_PK]
    return sorted(items, key=repr)


def _facts(
    options: DrillOptions,
    drill: Sequence[Story],
    log: DeliveryLog,
    stack: EmbeddedStack,
    state: LedgerState,
    elapsed: float,
) -> dict[str, Any]:
    effects = [e for v in state.orders.values() for e in v.effects]
    process: Counter[str] = sum((p.stats for p in stack.process_pollers), start=Counter())
    return {
        "orders (stories)": f"{len(drill)} across {len({s.kind for s in drill})} kinds",
        "deliveries (HTTP attempts)": _deliveries(log),
        "provider retries": log.retries,
        "effects": ", ".join(
            f"{n} {outcome}" for outcome, n in Counter(e["outcome"] for e in effects).items()
        ),
        "faults injected": (
            f"{stack.aws.stats()['conflicts_injected']} transaction conflicts, "
            f"{process['crashed_before_delete']} crashes before SQS delete, "
            f"{stack.faults.channel_failures:.0%} of sends failing, "
            f"{stack.faults.crash_after_send:.0%} crashing after the send"
            if options.faults
            else "none"
        ),
        "process records (with redeliveries)": process["records"],
        # Sums of each function's metrics, as written to .local/metrics (`umavez show metrics`).
        **{f"metrics: {f}": line for f, line in by_function(stack.metrics.totals()).items()},
        "elapsed": f"{elapsed:.1f} s",
    }
