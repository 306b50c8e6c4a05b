"""What an operator runs on the drilled stack, and the checks that it did only what it should:
`umavez attach` for each payment nobody could route, a provider dashboard's resend, and each
provider's `umavez replay` over the drill's window."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
    client,
)
from devstack.stack import EmbeddedStack
from firedrill.checks import Check
from firedrill.delivery import DeliveryLog, Providers
from firedrill.story import Post, Story
from functions.ingest.adapters import SqsQueue
from functions.process.asaas_cash import LedgerCash
from functions.process.interpreters import Interpreters
from functions.process.waiting import Waiting
from functions.reconcile.checkpoint import CHECKPOINT_PK
from functions.shared.domain import Outcome
from functions.shared.dynamo import scan_items
from functions.shared.errors import WriteContendedError
from functions.shared.failures import FAILURE_SORT
from functions.shared.tables import RECHECK_PK, TableNames
from functions.stripe.api import StripeApi
from ops import replay, replay_asaas, replay_mercadopago
from ops.outcomes import LedgerOutcomes, Tracked

RESEND_SHARE = 0.1
RESEND_WORKERS = 8
# The replay's window: at most about this many events (the default drill has ~700).
REPLAYED_EVENTS = 1000
# What a replay of deliveries already processed may come back as: nothing written again.
REPLAYED_AS_DONE = frozenset(
    o.value
    for o in (Outcome.DUPLICATE, Outcome.STALE, Outcome.BOUND, Outcome.CONFLICT, Outcome.IGNORED)
)


def attach_unmatched(stack: EmbeddedStack, drill: Sequence[Story]) -> Check:
    """Every payment nobody could route is listed as unmatched; an operator attaches it to its
    order (twice: the second changes nothing), as `umavez attach` does."""
    room = stack.waiting_room()
    listed = {item.external_ref for item in room.unmatched()}
    expected = [(s.unmatched_object, s.order_id) for s in drill if s.unmatched_object]
    missing = [unmatched for unmatched, _ in expected if unmatched not in listed]
    # Nothing else gave up waiting: a delivery whose order was bound in time (however long
    # the queue was) is applied, never moved to unmatched.
    unexpected = sorted(str(o) for o in listed - {unmatched for unmatched, _ in expected})
    for unmatched, order_id in expected:
        for _ in range(2):
            attach_as_an_operator(room, "stripe", unmatched, order_id)
    return Check(
        "every unmatched payment listed, then attached once; nothing else unmatched",
        not missing and not unexpected,
        f"{len(expected)} unmatched, attached"
        if not (missing or unexpected)
        else f"not listed: {missing[:3]}; unmatched, not expected: {unexpected[:3]}",
    )


OPERATOR_RUNS = 5


def attach_as_an_operator(
    room: Waiting, provider: str, object_id: str, order_id: str, runs: int = OPERATOR_RUNS
) -> int:
    """`umavez attach`, run again when it reports contention, as its operator would: the
    command retries a transaction conflict itself (three times) and is idempotent, but the
    local server cancels 5% of all transactions, and a drill of thousands of orders attaches
    hundreds of payments: three conflicts in a row happen."""
    for _ in range(runs - 1):
        try:
            return room.attach(provider, object_id, order_id)
        except WriteContendedError:
            continue
    return room.attach(provider, object_id, order_id)


@dataclass
class Replayed:
    ledger: LedgerOutcomes
    enqueued: list[Tracked]


def resends_and_replays(
    stack: EmbeddedStack, drill: Sequence[Story], providers: Providers, log: DeliveryLog, seed: int
) -> tuple[int, dict[str, Replayed]]:
    """The dashboard resend and every provider's replay. Both only repeat what was processed:
    side by side, one drain for the two (the replays make their clients here: boto3's default
    session is not thread-safe)."""
    with ThreadPoolExecutor(1, thread_name_prefix="resend") as resending:
        resends = resending.submit(_resend, drill, providers, seed)
        replays = {
            "stripe": _replay_stripe(stack, drill, log),
            "mercadopago": _replay_mercadopago(stack, drill),
            "asaas": _replay_asaas(stack, drill),
        }
        return resends.result(), replays


def _replay_stripe(stack: EmbeddedStack, drill: Sequence[Story], log: DeliveryLog) -> Replayed:
    """`umavez replay stripe` over an incident's window: Stripe's events API (the local fake)
    lists every event the endpoint accepted; all were processed, so none applies again. The
    window is the drill's first `REPLAYED_EVENTS` events (all of them at `make run`'s size):
    an operator replays an incident's hours, not the whole history."""
    posted = [json.loads(p.body) for s in drill for p in s.posts if p.provider == "stripe"]
    # Stripe's events API lists snapshot events; a thin one is another event of the same
    # change, listed there as its snapshot would be (the drill's duplicates cover it).
    events = [
        event
        for event in posted
        if event["id"] in log.accepted_event_ids and event.get("object") == "event"
    ]
    stack.provider_apis.events.extend(events)
    created = sorted(int(event["created"]) for event in events)
    window = replay.Window.parse(
        datetime.fromtimestamp(created[0], tz=UTC).isoformat(),
        datetime.fromtimestamp(created[:REPLAYED_EVENTS][-1], tz=UTC).isoformat(),
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


def _replay_asaas(stack: EmbeddedStack, drill: Sequence[Story]) -> Replayed:
    """`umavez replay asaas` over the drill's days (Asaas's paused queue resumed): each payment
    the stories made, listed by the local fake Asaas API, becomes the webhooks Asaas sends for
    its state; all were processed, so none applies again."""
    days = [
        asaas_day
        for story in drill
        if not story.statement_only
        for payment in story.asaas_answers.values()
        if isinstance(asaas_day := payment.get("dateCreated"), str)
    ]
    key = ASAAS_DEVELOPMENT_API_KEY
    listed = replay_asaas.AsaasPayments(lambda: key, stack.provider_apis.url)
    dynamodb = client("dynamodb", stack.aws.endpoint_url)
    ledger = LedgerOutcomes(
        dynamodb,
        stack.resources.tables.ledger,
        Interpreters.build(
            asaas_payments=listed.payment,
            asaas_cash=LedgerCash(dynamodb, stack.resources.tables.ledger),
        ),
    )
    if not days:
        return Replayed(ledger, [])
    window = replay.Window.parse(
        f"{min(days)[:10]}T00:00:00-03:00", f"{max(days)[:10]}T23:59:59-03:00", time.time()
    )
    queue = SqsQueue(client("sqs", stack.aws.endpoint_url), stack.resources.queue_url)
    replayer = replay.Replayer(queue, ledger, replay_asaas.ASAAS_PAYMENTS_LIST)
    return Replayed(ledger, replayer.replay(listed.pages(window)))


def _replay_mercadopago(stack: EmbeddedStack, drill: Sequence[Story]) -> Replayed:
    """`umavez replay mercadopago` over the drill's changes: the Orders API search, then the
    payments search; each order and payment the stories made, listed by the local fake,
    becomes the notification Mercado Pago sends; all were processed, so none applies again."""
    changes = [
        changed
        for story in drill
        if not story.statement_only
        for changed in (
            (story.mercadopago_payment or {}).get("date_last_updated"),
            (story.mercadopago_order or {}).get("last_updated_date"),
        )
        if isinstance(changed, str)
    ]
    token = MERCADOPAGO_DEVELOPMENT_TOKEN
    payments = replay_mercadopago.MercadoPagoPayments(lambda: token, stack.provider_apis.url)
    orders = replay_mercadopago.MercadoPagoOrders(lambda: token, stack.provider_apis.url)
    ledger = LedgerOutcomes(
        client("dynamodb", stack.aws.endpoint_url),
        stack.resources.tables.ledger,
        Interpreters.build(mercadopago_payments=payments.payment, mercadopago_orders=orders.order),
    )
    if not changes:
        return Replayed(ledger, [])
    moments = sorted(datetime.fromisoformat(changed) for changed in changes)
    window = replay.Window(moments[0], moments[-1])
    queue = SqsQueue(client("sqs", stack.aws.endpoint_url), stack.resources.queue_url)
    sources = replay_mercadopago.replay_sources(payments, orders, window, None)
    return Replayed(ledger, replay.replay_in_turn(queue, ledger, sources))


def replays_check(
    resent: int, replays: dict[str, Replayed], before: list[Any], after: list[Any]
) -> Check:
    """Resent events and every provider's replay found only what was done: the state is as
    it was, and every replayed delivery came back as one of `REPLAYED_AS_DONE` (each part of a
    combined outcome such as `duplicate+ignored`), none applied, pending or waiting."""
    outcomes = {
        provider: Counter(r.outcome for r in done.ledger.results(done.enqueued))
        for provider, done in replays.items()
    }
    applied = any(
        not set(outcome.split("+")) <= REPLAYED_AS_DONE
        for counted in outcomes.values()
        for outcome in counted
    )
    detail = "; ".join(
        f"{provider} {sum(counted.values())} replayed: "
        + ", ".join(f"{n} {outcome}" for outcome, n in sorted(counted.items()))
        for provider, counted in outcomes.items()
    )
    return Check(
        "resends and replays (Stripe's events, Mercado Pago's payments and orders, "
        "Asaas's payments) change nothing",
        before == after and not applied,
        f"{resent} old events resent; {detail}"
        if before == after
        else "state changed: " + _changed(before, after),
    )


def _resend(drill: Sequence[Story], providers: Providers, seed: int) -> int:
    """A provider's dashboard "resend", weeks later: old events, freshly signed, several at a
    time (as a "resend all" of a day's failures does)."""
    rng = random.Random(seed)  # noqa: S311 - sampling
    sample = [
        s.posts[0]
        for s in drill
        if s.posts and s.posts[0].forgery is None and rng.random() < RESEND_SHARE
    ]
    with ThreadPoolExecutor(RESEND_WORKERS, thread_name_prefix="resend") as posts:
        list(
            posts.map(
                lambda post: providers.deliver(Post(post.provider, post.body, post.query)), sample
            )
        )
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


def read_tables(dynamodb: Any, names: TableNames) -> Tables:
    """Both tables, every item (one scan each)."""
    return Tables(
        list(scan_items(dynamodb, names.ledger)), list(scan_items(dynamodb, names.outbox))
    )


@dataclass
class Tables:
    ledger: list[dict[str, Any]]
    outbox: list[dict[str, Any]]

    def business_state(self) -> list[Any]:
        """Every item of the business state. The reconciliation's checkpoint and the re-check
        schedule are left out: scheduled runs move them whenever they run, and any delivery of
        a watched charge's charge.refunded (a resend too) re-arms its watch, which only reads
        the charge again; what a re-read counts is in the books, which must not change. Nor
        are the failed receives' records: an injected fault during the resends writes one, and
        it says why a receive failed, not what the books hold. Nor the audit of a replayed
        delivery that moved nothing (an Asaas replay names its own deliveries,
        `replay-<payment>-<event>-<moment>`): it records the replay, not the books."""
        schedules = {CHECKPOINT_PK, RECHECK_PK}

        def of_the_books(item: dict[str, Any]) -> bool:
            pk = str(item.get("pk", ""))
            replay_audit = pk.startswith("DELIVERY#") and "#replay-" in pk
            return pk not in schedules and item.get("sk") != FAILURE_SORT and not replay_audit

        items = [i for i in self.ledger if of_the_books(i)] + self.outbox
        return sorted(items, key=repr)
