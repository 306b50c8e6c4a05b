"""Replaying provider events through the webhook queue: Stripe's Events API and Mercado Pago's
payments search on loopback fakes, the queue and the ledger on moto, the real process Lambda.
Every assertion is on the ledger (or on what reached the queue), never on a response."""

from __future__ import annotations

import itertools
import json
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fixtures import stripe
from fixtures.shapes import EVENTS_DIR
from functions.ingest.adapters import SqsQueue
from functions.ingest.errors import UnavailableError
from functions.process.stripe_api import StripeApi
from functions.shared.providers import Interpreters
from ops.outcomes import PENDING, LedgerOutcomes, Result, Tracked
from ops.replay import (
    MERCADOPAGO_PAYMENTS_SEARCH,
    REPLAY_ATTRIBUTE,
    STRIPE_EVENTS_API,
    STRIPE_TYPES,
    MercadoPagoPayments,
    Replayer,
    ReplayInterruptedError,
    ReplayRefusedError,
    Resume,
    StripeEvents,
    Window,
)
from tests.support.clock import FakeClock
from tests.support.pipeline import MERCADOPAGO_TOKEN, STRIPE_KEY, Pipeline, pipeline_on_moto

HOUR = 3600
PAYMENT_IDS = itertools.count(7_000_000_001)


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    with pipeline_on_moto(monkeypatch) as running:
        yield running


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


def stripe_payment(amount: int, created: float) -> tuple[str, dict[str, Any]]:
    """An order and the payment_intent.succeeded event Stripe keeps for it."""
    order = stripe.unique("ord")
    body = stripe.payment_intent_succeeded(order, stripe.unique("pi"), amount, int(created))
    return order, json.loads(body)


def stripe_ledger(pipeline: Pipeline) -> LedgerOutcomes:
    refunds = StripeApi(lambda: STRIPE_KEY, pipeline.apis.url).refunds_of_charge
    return LedgerOutcomes(
        pipeline.world.dynamodb,
        pipeline.world.tables.ledger,
        Interpreters.build(stripe_refunds=refunds),
    )


def replay_stripe(
    pipeline: Pipeline,
    clock: FakeClock,
    window: Window,
    page_size: int = 2,
    starting_after: str | None = None,
) -> list[Tracked]:
    events = StripeEvents(lambda: STRIPE_KEY, clock, pipeline.apis.url, page_size=page_size)
    replayer = Replayer(
        SqsQueue(pipeline.sqs, pipeline.queue_url), stripe_ledger(pipeline), STRIPE_EVENTS_API
    )
    return replayer.replay(events.pages(window, starting_after=starting_after))


def six_lost_payments(
    pipeline: Pipeline, clock: FakeClock
) -> tuple[Window, list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]:
    """A day's window, and six payments in it that Stripe keeps (1.00 to 6.00), oldest first and
    newest first (the order Stripe lists them)."""
    window = Window(at(clock.now - 24 * HOUR), at(clock.now))
    payments = [stripe_payment(100 * (n + 1), clock.now - 10 * HOUR + n) for n in range(6)]
    pipeline.apis.events += [event for _, event in payments]
    return window, payments, list(reversed(payments))


def outcomes(results: list[Result]) -> dict[str, str]:
    return {r.tracked.message.event_id: r.outcome for r in results}


def events_requests(pipeline: Pipeline) -> list[dict[str, list[str]]]:
    return [
        urllib.parse.parse_qs(urllib.parse.urlsplit(r).query)
        for r in pipeline.apis.requests
        if r.startswith("/v1/events?")
    ]


# -- Stripe -----------------------------------------------------------------------------------


def test_stripe_replay_pages_through_the_window_and_applies_each_lost_event_once(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given Stripe keeps five payments of the last day whose webhooks were lost, one whose
    # webhook arrived, and one payment on each side of the window
    window = Window(at(clock.now - 24 * HOUR), at(clock.now - HOUR))
    lost = [stripe_payment(1000 + n, clock.now - 20 * HOUR + n) for n in range(5)]
    delivered_order, delivered = stripe_payment(7000, clock.now - 10 * HOUR)
    outside = [stripe_payment(900, clock.now - 30 * HOUR), stripe_payment(800, clock.now - 60)]
    pipeline.world.deliver(json.dumps(delivered))
    pipeline.apis.events += [event for _, event in [*lost, (delivered_order, delivered), *outside]]

    # When the window is replayed, two events a page, and the queue processed
    tracked = replay_stripe(pipeline, clock, window)
    pipeline.process()
    results = stripe_ledger(pipeline).results(tracked)

    # Then Stripe was asked for the window and the map's types, page after page
    asked = events_requests(pipeline)
    assert len(asked) == 3
    assert asked[0]["created[gte]"] == [str(int(clock.now - 24 * HOUR))]
    assert asked[0]["created[lte]"] == [str(int(clock.now - HOUR))]
    assert asked[0]["types[]"] == list(STRIPE_TYPES)
    # (newest first: the delivered one and lost[4], then lost[3] and lost[2], then the rest)
    assert [q.get("starting_after") for q in asked] == [
        None,
        [lost[4][1]["id"]],
        [lost[2][1]["id"]],
    ]

    # And each lost payment was applied once, the delivered one is a duplicate, the ones
    # outside the window were never enqueued
    assert outcomes(results) == {
        **{event["id"]: "applied" for _, event in lost},
        delivered["id"]: "duplicate",
    }
    for n, (order, _) in enumerate(lost):
        assert pipeline.world.order(order)["paid_total"] == 1000 + n
        assert len(pipeline.world.outbox(order)) == 1
    assert pipeline.world.order(delivered_order)["effect_count"] == 1
    assert all(pipeline.world.order(order) == {} for order, _ in outside)

    # And each message is the event as the API returned it, marked as a replay
    by_id = {event["id"]: event for _, event in [*lost, (delivered_order, delivered)]}
    for message in pipeline.processed:
        attributes = pipeline.attributes(message)
        assert json.loads(message["Body"]) == by_id[attributes["event_id"]]
        assert attributes == {
            "provider": "stripe",
            "event_id": by_id[attributes["event_id"]]["id"],
            "event_type": "payment_intent.succeeded",
            REPLAY_ATTRIBUTE: STRIPE_EVENTS_API,
        }


def test_an_api_error_mid_way_says_how_to_resume_and_nothing_applies_twice(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given six lost payments, and Stripe failing on the third page of a first replay
    window, payments, newest_first = six_lost_payments(pipeline, clock)
    pipeline.apis.fail("/v1/events", request=3)

    # When it is replayed and the queue processed
    with pytest.raises(ReplayInterruptedError) as interrupted:
        replay_stripe(pipeline, clock, window)
    pipeline.process()

    # Then it stopped saying where to resume: after the last event of the second page
    assert "answered 500" in str(interrupted.value)
    assert interrupted.value.resume == Resume("--starting-after", newest_first[3][1]["id"])
    assert len(interrupted.value.enqueued) == 4
    # And the two pages enqueued before the error are applied, the rest not yet
    assert [pipeline.world.order(o).get("paid_total") for o, _ in newest_first] == [
        600,
        500,
        400,
        300,
        None,
        None,
    ]

    # When the replay is resumed, then run again over the whole window
    resumed = replay_stripe(pipeline, clock, window, starting_after=interrupted.value.resume.value)
    pipeline.process()
    after_resume = pipeline.world.snapshot()
    again = replay_stripe(pipeline, clock, window)
    pipeline.process()

    # Then the resumed run applied the last two, and the whole window again changed nothing
    ledger = stripe_ledger(pipeline)
    assert set(outcomes(ledger.results(resumed)).values()) == {"applied"}
    assert [t.message.event_id for t in resumed] == [e["id"] for _, e in newest_first[4:]]
    assert set(outcomes(ledger.results(again)).values()) == {"duplicate"}
    assert pipeline.world.snapshot() == after_resume
    for order, event in payments:
        view = pipeline.world.order(order)
        assert (view["paid_total"], view["effect_count"]) == (
            event["data"]["object"]["amount"],
            1,
        )
        assert len(pipeline.world.outbox(order)) == 1
        assert pipeline.world.mismatches(order) == []


def test_a_page_is_enqueued_ten_messages_a_request(pipeline: Pipeline, clock: FakeClock) -> None:
    # Given 25 lost payments, read back as one page
    window = Window(at(clock.now - 24 * HOUR), at(clock.now))
    payments = [stripe_payment(100 + n, clock.now - 10 * HOUR + n) for n in range(25)]
    pipeline.apis.events += [event for _, event in payments]
    operations: list[str] = []
    pipeline.sqs.meta.events.register(
        "before-call.sqs.*", lambda model, **_: operations.append(model.name)
    )

    # When the window is replayed and the queue processed
    replayed = replay_stripe(pipeline, clock, window, page_size=100)
    enqueuing = list(operations)
    pipeline.process()

    # Then three requests enqueued all 25, each with its own message id, and each applied once
    assert enqueuing == ["SendMessageBatch"] * 3
    assert len({t.queue_message_id for t in replayed}) == 25
    for order, event in payments:
        view = pipeline.world.order(order)
        assert (view["paid_total"], view["effect_count"]) == (
            event["data"]["object"]["amount"],
            1,
        )


class RefusingOne(SqsQueue):
    """The queue refusing one message of the batch whose position is given (throttled)."""

    def __init__(self, queue: SqsQueue, batch: int, position: int) -> None:
        self._queue, self._batch, self._position, self.batches = queue, batch, position, 0

    def send_batch(self, messages: Sequence[tuple[str, Mapping[str, str]]]) -> list[str | None]:
        self.batches += 1
        if self.batches != self._batch:
            return self._queue.send_batch(messages)
        taken = [m for n, m in enumerate(messages) if n != self._position]
        ids = iter(self._queue.send_batch(taken))
        return [None if n == self._position else next(ids) for n in range(len(messages))]


class FailingOnRequest(SqsQueue):
    """The queue unreachable from its n-th request on."""

    def __init__(self, queue: SqsQueue, request: int) -> None:
        self._queue, self._request, self.requests = queue, request, 0

    def send_batch(self, messages: Sequence[tuple[str, Mapping[str, str]]]) -> list[str | None]:
        self.requests += 1
        if self.requests >= self._request:
            raise UnavailableError("enqueue_failed", "could not enqueue; retry")
        return self._queue.send_batch(messages)


def test_a_queue_failing_mid_page_reports_what_it_took_before(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given 25 lost payments read as one page, and a queue failing on its second request
    window = Window(at(clock.now - 24 * HOUR), at(clock.now))
    payments = [stripe_payment(100 + n, clock.now - 10 * HOUR + n) for n in range(25)]
    pipeline.apis.events += [event for _, event in payments]
    events = StripeEvents(lambda: STRIPE_KEY, clock, pipeline.apis.url, page_size=100)
    queue = FailingOnRequest(SqsQueue(pipeline.sqs, pipeline.queue_url), request=2)

    # When the window is replayed
    with pytest.raises(ReplayInterruptedError) as interrupted:
        Replayer(queue, stripe_ledger(pipeline), STRIPE_EVENTS_API).replay(events.pages(window))
    pipeline.process()

    # Then the ten the first request took are reported enqueued, and are applied; the resume
    # starts the window again (no page was done)
    enqueued = interrupted.value.enqueued
    assert len(enqueued) == 10
    assert all(t.queue_message_id for t in enqueued)
    assert interrupted.value.resume is None
    applied = [o for o, _ in payments if pipeline.world.order(o).get("paid_total")]
    assert len(applied) == 10


def test_a_page_the_queue_partly_refuses_stops_the_replay_resumable_before_that_page(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given six lost payments, read two a page, and a queue refusing one of the second page's
    window, payments, newest_first = six_lost_payments(pipeline, clock)
    events = StripeEvents(lambda: STRIPE_KEY, clock, pipeline.apis.url, page_size=2)
    queue = RefusingOne(SqsQueue(pipeline.sqs, pipeline.queue_url), batch=2, position=1)

    # When the window is replayed
    with pytest.raises(ReplayInterruptedError) as interrupted:
        Replayer(queue, stripe_ledger(pipeline), STRIPE_EVENTS_API).replay(events.pages(window))
    pipeline.process()

    # Then it stopped at that page: what the queue took is enqueued, the resume repeats the page
    assert "refused 1 of the page's 2 messages" in str(interrupted.value)
    assert [t.message.event_id for t in interrupted.value.enqueued] == [
        e["id"] for _, e in newest_first[:3]
    ]
    assert interrupted.value.resume == Resume("--starting-after", newest_first[1][1]["id"])

    # When it is resumed from there
    replay_stripe(pipeline, clock, window, starting_after=interrupted.value.resume.value)
    pipeline.process()

    # Then every payment is applied once
    for order, event in payments:
        view = pipeline.world.order(order)
        assert (view["paid_total"], view["effect_count"]) == (
            event["data"]["object"]["amount"],
            1,
        )


def test_a_window_older_than_stripe_keeps_events_is_refused_before_any_request(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given a window starting 31 days ago
    window = Window(at(clock.now) - timedelta(days=31), at(clock.now))

    # When it is asked for
    with pytest.raises(ReplayRefusedError) as refused:
        replay_stripe(pipeline, clock, window)

    # Then nothing was asked of Stripe, nothing enqueued, and the refusal says why
    assert "30 days" in str(refused.value)
    assert pipeline.apis.requests == []
    assert pipeline.process() == 0


def test_outcomes_are_pending_until_processed_then_what_process_made_of_them(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given a replayed payment and a replayed event that moves no money, not processed yet
    order, paid = stripe_payment(2500, clock.now - HOUR)
    customer = json.loads(stripe.fixture_text("customer.created"))
    customer["created"] = int(clock.now - HOUR)
    pipeline.apis.events += [paid, customer]
    window = Window(at(clock.now - 2 * HOUR), at(clock.now))
    events = StripeEvents(lambda: STRIPE_KEY, clock, pipeline.apis.url)
    ledger = stripe_ledger(pipeline)
    replayer = Replayer(SqsQueue(pipeline.sqs, pipeline.queue_url), ledger, STRIPE_EVENTS_API)
    tracked = replayer.replay(events.pages(window, types=[paid["type"], customer["type"]]))

    # When nothing waits, then when the wait's first sleep lets the queue be processed
    at_once = ledger.settle(tracked, wait_seconds=0, clock=clock)
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(seconds)
        pipeline.process()

    settled = ledger.settle(tracked, wait_seconds=10, clock=clock, sleep=sleep)

    # Then at once both are pending; after one poll the payment is applied on its order and
    # the other recorded as ignored, with the reason
    assert set(outcomes(at_once).values()) == {PENDING}
    assert slept == [2.0]
    assert outcomes(settled) == {paid["id"]: "applied", customer["id"]: "ignored"}
    assert {r.order_id for r in settled} == {order, None}
    assert pipeline.world.order(order)["paid_total"] == 2500


def test_a_page_of_refunds_finds_all_their_orders_in_one_read(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given twelve paid orders (their payments bound), and for each a lost refund naming only
    # the payment; two refunds for the last payment
    paid = []
    for _ in range(12):
        order, intent = stripe.unique("ord"), stripe.unique("pi")
        created = int(clock.now) - 2 * HOUR
        pipeline.world.deliver(stripe.payment_intent_succeeded(order, intent, 1000, created))
        paid.append((order, intent))
    refunds = [
        json.loads(
            stripe.refund_created(intent, stripe.unique("re"), 100, int(clock.now - HOUR) + n)
        )
        for n, (_, intent) in enumerate([*paid, paid[-1]])
    ]
    pipeline.apis.events += refunds
    window = Window(at(clock.now - 2 * HOUR), at(clock.now))
    reads: list[str] = []
    pipeline.world.dynamodb.meta.events.register(
        "before-call.dynamodb.*", lambda model, **_: reads.append(model.name)
    )

    # When the window is replayed as one page, processed, and its outcomes read
    replayed = replay_stripe(pipeline, clock, window, page_size=100)
    before_enqueueing = list(reads)
    pipeline.process()
    results = stripe_ledger(pipeline).results(replayed)

    # Then the page found every refund's order with one read of the bindings (and one of the
    # keys already held), and each refund counted on its own order (the older of the last
    # payment's two came second, newest first: counted, flagged late)
    assert before_enqueueing == ["BatchGetItem", "BatchGetItem"]
    assert {r.tracked.message.event_id: r.order_id for r in results} == {
        refund["id"]: order for refund, (order, _) in zip(refunds, [*paid, paid[-1]], strict=True)
    }
    assert [r.outcome for r in results if r.outcome != "applied"] == ["stale"]
    assert [pipeline.world.order(order)["refunded_total"] for order, _ in paid] == [100] * 11 + [
        200
    ]


# -- Mercado Pago -----------------------------------------------------------------------------


def mercadopago_payment(
    status: str, updated: datetime, refunds: list[dict[str, Any]] | None = None
) -> tuple[str, dict[str, Any]]:
    payment: dict[str, Any] = json.loads((EVENTS_DIR / "mercadopago" / "payment.json").read_text())
    order = stripe.unique("ord")
    payment.update(
        {
            "id": next(PAYMENT_IDS),
            "status": status,
            "date_approved": None if status == "pending" else payment["date_approved"],
            "date_last_updated": updated.isoformat(timespec="milliseconds"),
            "external_reference": order,
            "metadata": {"order_id": order},
            "refunds": refunds or [],
        }
    )
    return order, payment


def test_mercadopago_replay_sends_their_notification_for_each_payment_updated_in_the_window(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given Mercado Pago knows an approved payment, a refunded one and a pending one updated in
    # the window, and one updated before it
    start = at(clock.now - 24 * HOUR)
    refund = {"id": 9001, "amount": 20, "date_created": "2026-11-29T19:00:00.000-04:00"}
    approved = mercadopago_payment("approved", start + timedelta(hours=1))
    refunded = mercadopago_payment(
        "refunded", start + timedelta(hours=2), [{**refund, "status": "approved"}]
    )
    pending = mercadopago_payment("pending", start + timedelta(hours=3))
    before = mercadopago_payment("approved", start - timedelta(hours=1))
    for _, payment in (approved, refunded, pending, before):
        pipeline.apis.payments[str(payment["id"])] = payment
    window = Window(start, at(clock.now))
    ledger_before = pipeline.world.snapshot()

    # When the window is replayed (two payments a page) and processed, then replayed again
    payments = MercadoPagoPayments(lambda: MERCADOPAGO_TOKEN, pipeline.apis.url, page_size=2)
    ledger = LedgerOutcomes(
        pipeline.world.dynamodb,
        pipeline.world.tables.ledger,
        Interpreters.build(mercadopago_payments=payments.payment),
    )
    queue = SqsQueue(pipeline.sqs, pipeline.queue_url)
    first = Replayer(queue, ledger, MERCADOPAGO_PAYMENTS_SEARCH).replay(payments.pages(window))
    pipeline.process()
    first_results = ledger.results(first)
    after_first = pipeline.world.snapshot()
    second = Replayer(queue, ledger, MERCADOPAGO_PAYMENTS_SEARCH).replay(payments.pages(window))
    pipeline.process()

    # Then the search asked for the payments updated in the window, oldest update first, paged
    searches = [
        urllib.parse.parse_qs(urllib.parse.urlsplit(r).query)
        for r in pipeline.apis.requests
        if r.startswith("/v1/payments/search?")
    ]
    assert [(q["offset"], q["limit"]) for q in searches[:2]] == [(["0"], ["2"]), (["2"], ["2"])]
    assert {(q["range"][0], q["sort"][0], q["criteria"][0]) for q in searches} == {
        ("date_last_updated", "date_last_updated", "asc")
    }

    # And each became the notification Mercado Pago sends, with a stable id per update
    template = json.loads((EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text())
    sent = [json.loads(m["Body"]) for m in pipeline.processed]
    assert all(set(body) == set(template) for body in sent)
    assert [body["data"]["id"] for body in sent[:3]] == [
        str(p["id"]) for _, p in (approved, refunded, pending)
    ]
    assert {(b["type"], b["action"], b["api_version"]) for b in sent} == {
        ("payment", "payment.updated", "v1")
    }
    assert [t.message.event_id for t in second] == [t.message.event_id for t in first]
    assert all(
        pipeline.attributes(m)[REPLAY_ATTRIBUTE] == MERCADOPAGO_PAYMENTS_SEARCH
        for m in pipeline.processed
    )

    # And the money moved once: paid, paid and refunded, nothing for the pending payment;
    # the second replay changed nothing at all
    assert [r.outcome for r in first_results] == ["applied", "applied", "ignored"]
    assert pipeline.world.order(approved[0])["paid_total"] == 5000
    assert (
        pipeline.world.order(refunded[0])["paid_total"],
        pipeline.world.order(refunded[0])["refunded_total"],
    ) == (5000, 2000)
    assert pipeline.world.order(pending[0]) == {}
    assert pipeline.world.order(before[0]) == {}
    assert after_first != ledger_before
    assert pipeline.world.snapshot() == after_first
    assert [r.outcome for r in ledger.results(second)] == ["duplicate", "duplicate", "ignored"]
