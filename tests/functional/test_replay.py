"""Replaying provider events through the webhook queue: Stripe's Events API, Mercado Pago's
payments search and Asaas's payments list on loopback fakes, the queue and the ledger on moto,
the real process Lambda. Every assertion is on the ledger (or on what reached the queue), never
on a response."""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fixtures import stripe
from fixtures.shapes import EVENTS_DIR, shape, unique
from functions.ingest.adapters import SqsQueue
from functions.process.asaas_cash import LedgerCash
from functions.process.interpreters import Interpreters
from functions.shared.items import Order
from functions.shared.rejections import UnavailableError
from functions.stripe.api import PLACEHOLDER, StripeApi
from ops.outcomes import PENDING, LedgerOutcomes, Result, Tracked
from ops.replay import (
    REPLAY_ATTRIBUTE,
    STRIPE_EVENTS_API,
    STRIPE_TYPES,
    Page,
    Replayer,
    ReplayInterruptedError,
    ReplayRefusedError,
    Resume,
    StripeEvents,
    Window,
    replay_in_turn,
)
from ops.replay_asaas import ASAAS_PAYMENTS_LIST, AsaasPayments
from ops.replay_mercadopago import (
    MERCADOPAGO_ORDERS_SEARCH,
    MERCADOPAGO_PAYMENTS_SEARCH,
    ORDERS_SEARCH_SPAN,
    MercadoPagoOrders,
    MercadoPagoPayments,
    replay_sources,
)
from tests.support.clock import FakeClock
from tests.support.pipeline import (
    ASAAS_KEY,
    MERCADOPAGO_TOKEN,
    STRIPE_KEY,
    Pipeline,
    pipeline_on_moto,
)

HOUR = 3600
PAYMENT_IDS = itertools.count(7_000_000_001)
ORDER_NUMBERS = itertools.count(1)


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


def replayed_twice(
    pipeline: Pipeline,
    ledger: LedgerOutcomes,
    source: str,
    pages: Callable[[], Iterator[Page]],
) -> tuple[list[Tracked], list[Result], Any, list[Tracked]]:
    """The window replayed and processed, then again: what the first run enqueued, what it
    became, the world after it, and what the second enqueued."""
    replayer = Replayer(SqsQueue(pipeline.sqs, pipeline.queue_url), ledger, source)
    first = replayer.replay(pages())
    pipeline.process()
    results, after_first = ledger.results(first), pipeline.world.snapshot()
    second = replayer.replay(pages())
    pipeline.process()
    return first, results, after_first, second


def outcomes(results: list[Result]) -> dict[str, str]:
    return {r.tracked.message.event_id: r.outcome for r in results}


def requests_to(pipeline: Pipeline, path: str) -> list[dict[str, list[str]]]:
    """The queries of the fake APIs' requests to `path`, in order."""
    return [
        urllib.parse.parse_qs(urllib.parse.urlsplit(r).query)
        for r in pipeline.apis.requests
        if r.startswith(f"{path}?")
    ]


def events_requests(pipeline: Pipeline) -> list[dict[str, list[str]]]:
    return requests_to(pipeline, "/v1/events")


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
        assert pipeline.world.order(order).paid_total == 1000 + n
        assert len(pipeline.world.outbox(order)) == 1
    assert pipeline.world.order(delivered_order).effect_count == 1
    assert all(pipeline.world.find_order(order) is None for order, _ in outside)

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
    assert [pipeline.world.order(o).paid_total for o, _ in newest_first] == [
        600,
        500,
        400,
        300,
        0,
        0,
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
        assert (view.paid_total, view.effect_count) == (
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
        assert (view.paid_total, view.effect_count) == (
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
    applied = [o for o, _ in payments if pipeline.world.order(o).paid_total]
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
        assert (view.paid_total, view.effect_count) == (
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
    assert pipeline.world.order(order).paid_total == 2500


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
    assert [pipeline.world.order(order).refunded_total for order, _ in paid] == [100] * 11 + [200]


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
    first, first_results, after_first, second = replayed_twice(
        pipeline, ledger, MERCADOPAGO_PAYMENTS_SEARCH, lambda: payments.pages(window)
    )

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
    assert pipeline.world.order(approved[0]).paid_total == 5000
    assert (
        pipeline.world.order(refunded[0]).paid_total,
        pipeline.world.order(refunded[0]).refunded_total,
    ) == (5000, 2000)
    assert pipeline.world.find_order(pending[0]) is None
    assert pipeline.world.find_order(before[0]) is None
    assert after_first != ledger_before
    assert pipeline.world.snapshot() == after_first
    assert [r.outcome for r in ledger.results(second)] == ["duplicate", "duplicate", "ignored"]


def orders_api_order(
    fixture: str, created: datetime, updated: datetime, named: bool = True
) -> tuple[str, dict[str, Any]]:
    """An order of umavez and the Orders API's order for it (the fixture's transactions with
    ids of their own; `named`: they name their Payments API objects, else only themselves)."""
    order, number = stripe.unique("ord"), next(ORDER_NUMBERS)
    found: dict[str, Any] = shape(f"mercadopago/{fixture}.json")
    found.update(
        {
            "id": f"ORD01TEST{number:017d}",
            "external_reference": order,
            "created_date": created.isoformat(timespec="milliseconds"),
            "last_updated_date": updated.isoformat(timespec="milliseconds"),
        }
    )
    for kind in ("payments", "refunds"):
        for transaction in found["transactions"].get(kind, []):
            transaction["id"] = f"{transaction['id'][:3]}01TEST{number:017d}"
            transaction["reference"] = {"id": str(next(PAYMENT_IDS))} if named else {}
    for refund in found["transactions"].get("refunds", []):
        refund["transaction_id"] = found["transactions"]["payments"][0]["id"]
    return order, found


def orders_ledger(pipeline: Pipeline, orders: MercadoPagoOrders) -> LedgerOutcomes:
    return LedgerOutcomes(
        pipeline.world.dynamodb,
        pipeline.world.tables.ledger,
        Interpreters.build(mercadopago_payments=lambda _: {}, mercadopago_orders=orders.order),
    )


def orders_searched(pipeline: Pipeline) -> list[dict[str, list[str]]]:
    return requests_to(pipeline, "/v1/orders")


def test_mercadopago_replay_sends_their_notification_for_each_order_changed_in_the_window(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given the Orders API knows an order created in the window (its payment named only by
    # the order: on no payments search), one created ten days before and refunded in part in
    # it, one created 40 days before and refunded in it, and one changed before the window
    start = at(clock.now - 24 * HOUR)
    new = orders_api_order(
        "order.processed", start + timedelta(hours=1), start + timedelta(hours=2), named=False
    )
    refunded = orders_api_order(
        "order.partially_refunded", start - timedelta(days=10), start + timedelta(hours=3)
    )
    older = orders_api_order(
        "order.partially_refunded", start - timedelta(days=40), start + timedelta(hours=4)
    )
    before = orders_api_order(
        "order.processed", start - timedelta(days=5), start - timedelta(hours=1)
    )
    for _, found in (new, refunded, older, before):
        pipeline.apis.orders[found["id"]] = found
    window = Window(start, at(clock.now))

    # When the window is replayed (one order a page) and processed, then replayed again
    orders = MercadoPagoOrders(lambda: MERCADOPAGO_TOKEN, pipeline.apis.url, page_size=1)
    ledger = orders_ledger(pipeline, orders)
    first, first_results, after_first, second = replayed_twice(
        pipeline, ledger, MERCADOPAGO_ORDERS_SEARCH, lambda: orders.pages(window)
    )
    queue = SqsQueue(pipeline.sqs, pipeline.queue_url)

    # Then the search read the orders created from 30 days before the window to its end, in
    # spans of at most 720 hours, oldest first, a page at a time
    searches = orders_searched(pipeline)
    spans = {(q["begin_date"][0], q["end_date"][0]) for q in searches}
    assert min(b for b, _ in spans) == (start - timedelta(days=30)).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    assert all(
        datetime.fromisoformat(e) - datetime.fromisoformat(b) <= ORDERS_SEARCH_SPAN
        for b, e in spans
    )
    assert {(q["sort_by"][0], q["sort_order"][0], q["page_size"][0]) for q in searches} == {
        ("created_date", "asc", "1")
    }

    # And each order changed in the window became the notification Mercado Pago sends for
    # an order, with a stable id per change; the order created 40 days before was not seen
    template = json.loads((EVENTS_DIR / "mercadopago" / "order.notification.json").read_text())
    sent = [json.loads(m["Body"]) for m in pipeline.processed]
    assert {body["data"]["id"] for body in sent} == {refunded[1]["id"], new[1]["id"]}
    assert all(set(body) <= set(template) | {"id"} for body in sent)
    assert {(b["type"], b["action"], b["api_version"]) for b in sent} == {
        ("order", "order.processed", "v1")
    }
    assert [t.message.event_id for t in second] == [t.message.event_id for t in first]

    # And the money moved once: the new order paid, the older one paid and refunded in part;
    # the second replay changed nothing
    assert [r.outcome for r in first_results] == ["applied", "applied"]
    assert pipeline.world.order(new[0]).paid_total == 20000
    assert (
        pipeline.world.order(refunded[0]).paid_total,
        pipeline.world.order(refunded[0]).refunded_total,
    ) == (20000, 5000)
    assert pipeline.world.find_order(older[0]) is None
    assert pipeline.world.find_order(before[0]) is None
    assert pipeline.world.snapshot() == after_first
    assert [r.outcome for r in ledger.results(second)] == ["duplicate", "duplicate"]

    # When the operator looks further back, from the older order's creation
    wider = Replayer(queue, ledger, MERCADOPAGO_ORDERS_SEARCH).replay(
        orders.pages(window, created_since=start - timedelta(days=41))
    )
    pipeline.process()

    # Then its refund is booked too, and nothing else changes
    assert [r.outcome for r in ledger.results(wider)] == ["applied", "duplicate", "duplicate"]
    assert pipeline.world.order(older[0]).refunded_total == 5000
    assert pipeline.world.order(new[0]).paid_total == 20000


def test_an_orders_search_interrupted_resumes_from_the_last_orders_creation(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given two orders created in the window, and the orders search failing on the window's
    # second page (the first span, 30 to 0 days before, is empty)
    start = at(clock.now - 24 * HOUR)
    first, second = (
        orders_api_order("order.processed", start + timedelta(hours=h), start + timedelta(hours=h))
        for h in (2, 3)
    )
    for _, found in (first, second):
        pipeline.apis.orders[found["id"]] = found
    pipeline.apis.fail("/v1/orders", request=3)
    window = Window(start, at(clock.now))
    orders = MercadoPagoOrders(lambda: MERCADOPAGO_TOKEN, pipeline.apis.url, page_size=1)
    ledger = orders_ledger(pipeline, orders)
    queue = SqsQueue(pipeline.sqs, pipeline.queue_url)

    # When the orders are replayed and the queue processed
    with pytest.raises(ReplayInterruptedError) as interrupted:
        Replayer(queue, ledger, MERCADOPAGO_ORDERS_SEARCH).replay(orders.pages(window))
    pipeline.process()

    # Then the first order is enqueued and booked, the second not yet, and the resume names
    # the search's place: the first order's creation
    assert "answered 500" in str(interrupted.value)
    assert len(interrupted.value.enqueued) == 1
    created = datetime.fromisoformat(first[1]["created_date"])
    assert interrupted.value.resume == Resume(
        "--orders-created-since", created.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
    assert pipeline.world.order(first[0]).paid_total == 20000
    assert pipeline.world.find_order(second[0]) is None

    # When resumed from there
    created_since = datetime.fromisoformat(interrupted.value.resume.value)
    resumed = Replayer(queue, ledger, MERCADOPAGO_ORDERS_SEARCH).replay(
        orders.pages(window, created_since)
    )
    pipeline.process()

    # Then the second order is booked, the first is a duplicate
    assert [r.outcome for r in ledger.results(resumed)] == ["duplicate", "applied"]
    assert pipeline.world.order(second[0]).paid_total == 20000


def test_a_mercadopago_replay_whose_payments_stop_resumes_by_since_and_loses_no_order(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given an order changed half an hour into the window (on no payments search), two
    # payments updated after it, and the payments search failing on its second page
    start = at(clock.now - 24 * HOUR)
    changed = start + timedelta(minutes=30)
    lone = orders_api_order("order.processed", changed, changed, named=False)
    pipeline.apis.orders[lone[1]["id"]] = lone[1]
    paid = [mercadopago_payment("approved", start + timedelta(hours=h)) for h in (1, 2)]
    for _, payment in paid:
        pipeline.apis.payments[str(payment["id"])] = payment
    pipeline.apis.fail("/v1/payments/search", request=2)
    window = Window(start, at(clock.now))
    queue = SqsQueue(pipeline.sqs, pipeline.queue_url)

    def replayed(window: Window) -> tuple[LedgerOutcomes, list[Tracked]]:
        """As `umavez replay mercadopago` runs its two searches."""
        payments = MercadoPagoPayments(lambda: MERCADOPAGO_TOKEN, pipeline.apis.url, page_size=1)
        orders = MercadoPagoOrders(lambda: MERCADOPAGO_TOKEN, pipeline.apis.url)
        ledger = LedgerOutcomes(
            pipeline.world.dynamodb,
            pipeline.world.tables.ledger,
            Interpreters.build(
                mercadopago_payments=payments.payment, mercadopago_orders=orders.order
            ),
        )
        sources = replay_sources(payments, orders, window, None)
        return ledger, replay_in_turn(queue, ledger, sources)

    # When the window is replayed, then resumed with the option the interruption names
    with pytest.raises(ReplayInterruptedError) as interrupted:
        replayed(window)
    pipeline.process()
    resume = interrupted.value.resume
    assert resume is not None
    assert resume.option == "--since"
    _, resumed = replayed(Window(datetime.fromisoformat(resume.value), window.until))
    pipeline.process()

    # Then the order, which changed before the resumed window, was booked by the first run
    # (the orders are searched first), and both payments are booked once
    assert pipeline.world.order(lone[0]).paid_total == 20000
    assert [pipeline.world.order(order).paid_total for order, _ in paid] == [5000, 5000]
    assert len(resumed) == 2  # the first payment again (a duplicate) and the second


def test_a_mercadopago_orders_replay_is_refused_without_a_token_or_with_bounds_reversed(
    pipeline: Pipeline, clock: FakeClock
) -> None:
    # Given a window
    window = Window(at(clock.now - HOUR), at(clock.now))

    # When the orders are replayed without the access token, or looking back from after the
    # window's end
    # Then each is refused before anything is read
    with pytest.raises(ReplayRefusedError, match="access token"):
        MercadoPagoOrders(lambda: PLACEHOLDER, pipeline.apis.url).pages(window)
    with pytest.raises(ReplayRefusedError, match="after --until"):
        MercadoPagoOrders(lambda: MERCADOPAGO_TOKEN, pipeline.apis.url).pages(
            window, created_since=at(clock.now + HOUR)
        )
    assert orders_searched(pipeline) == []


def test_the_fake_orders_search_refuses_what_mercado_pagos_refuses(pipeline: Pipeline) -> None:
    # Given the fake Orders API
    def search(**query: str) -> int:
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{pipeline.apis.url}/v1/orders?{urllib.parse.urlencode(query)}",
            headers={"Authorization": f"Bearer {MERCADOPAGO_TOKEN}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:  # noqa: S310 - loopback
                return int(answer.status)
        except urllib.error.HTTPError as refused:
            return refused.code

    # When searched without dates, over more than 720 hours, or with a page too large
    # Then each is refused with 400; a span of exactly 720 hours is answered
    day = "2026-11-01T00:00:00Z"
    assert search() == 400
    assert search(begin_date=day, end_date="2026-12-02T00:00:00Z") == 400
    assert search(begin_date=day, end_date="2026-11-02T00:00:00Z", page_size="101") == 400
    assert search(begin_date=day, end_date="2026-12-01T00:00:00Z") == 200


# -- Asaas ------------------------------------------------------------------------------------

# The window Asaas's queue was paused: 29 November 2026 from midnight in Brazil (03:00 UTC) to
# noon (UTC) the next day, two of Brazil's days.
ASAAS_WINDOW = Window(datetime(2026, 11, 29, 3, tzinfo=UTC), datetime(2026, 11, 30, 12, tzinfo=UTC))
BRAZIL_29 = "2026-11-29T00:00:00-03:00"
BRAZIL_30 = "2026-11-30T00:00:00-03:00"


def asaas_payment(fixture: str, created: str, **fields: Any) -> tuple[str, dict[str, Any]]:
    """An order, and Asaas's payment for it as the fixture's webhook carries it, created on
    `created` (its other fields as given)."""
    order = stripe.unique("ord")
    payment: dict[str, Any] = shape(f"asaas/{fixture}.json")["payment"]
    payment.update({"id": unique("pay"), "externalReference": order, "dateCreated": created})
    payment.update(fields)
    return order, payment


def asaas_ledger(pipeline: Pipeline, payments: AsaasPayments) -> LedgerOutcomes:
    return LedgerOutcomes(
        pipeline.world.dynamodb,
        pipeline.world.tables.ledger,
        Interpreters.build(
            asaas_payments=payments.payment,
            asaas_cash=LedgerCash(pipeline.world.dynamodb, pipeline.world.tables.ledger),
        ),
    )


def replay_asaas(pipeline: Pipeline, window: Window = ASAAS_WINDOW) -> list[Tracked]:
    payments = AsaasPayments(lambda: ASAAS_KEY, pipeline.apis.url, page_size=2)
    replayer = Replayer(
        SqsQueue(pipeline.sqs, pipeline.queue_url),
        asaas_ledger(pipeline, payments),
        ASAAS_PAYMENTS_LIST,
    )
    return replayer.replay(payments.pages(window))


def asaas_results(pipeline: Pipeline, tracked: list[Tracked]) -> list[Result]:
    payments = AsaasPayments(lambda: ASAAS_KEY, pipeline.apis.url)
    return asaas_ledger(pipeline, payments).results(tracked)


def asaas_webhook(event: str, payment: dict[str, Any], created: str) -> str:
    """The webhook Asaas sends (its envelope, a fresh id) announcing `event` of the payment."""
    return json.dumps(
        {"id": unique("evt"), "event": event, "dateCreated": created, "payment": payment}
    )


def listings(pipeline: Pipeline) -> list[dict[str, list[str]]]:
    return [
        urllib.parse.parse_qs(urllib.parse.urlsplit(r).query)
        for r in pipeline.apis.requests
        if urllib.parse.urlsplit(r).path == "/v3/payments"
    ]


def money(state: Order) -> tuple[int, int, int]:
    return (state.paid_total, state.refunded_total, state.disputed_total)


def test_asaas_replay_books_what_the_paused_queue_held_once_and_again_changes_nothing(
    pipeline: Pipeline,
) -> None:
    # Given Asaas knows, from the days its queue was paused: a Pix payment received, a card
    # confirmed (credited next month), a Pix payment refunded in two parts, a card charged
    # back, a boleto received in cash on the 30th (created before), a charge still pending;
    # and one received the day before the window
    pix = asaas_payment("PAYMENT_RECEIVED", "2026-11-29")
    card = asaas_payment(
        "PAYMENT_RECEIVED",
        "2026-11-29",
        billingType="CREDIT_CARD",
        status="CONFIRMED",
        confirmedDate="2026-11-29",
        paymentDate=None,
        creditDate=None,
        estimatedCreditDate="2026-12-29",
    )
    refunded = asaas_payment("PAYMENT_PARTIALLY_REFUNDED", "2026-11-29")
    charged_back = asaas_payment("PAYMENT_CHARGEBACK_REQUESTED", "2026-11-29")
    cash = asaas_payment("PAYMENT_RECEIVED.in_cash", "2026-11-20", paymentDate="2026-11-30")
    pending = asaas_payment(
        "PAYMENT_RECEIVED_IN_CASH_UNDONE", "2026-11-29", status="PENDING", paymentDate=None
    )
    before = asaas_payment(
        "PAYMENT_RECEIVED", "2026-11-28", paymentDate="2026-11-28", clientPaymentDate=None
    )
    everyone = (pix, card, refunded, charged_back, cash, pending, before)
    for _, payment in everyone:
        pipeline.apis.asaas_payments[payment["id"]] = payment
    ledger_before = pipeline.world.snapshot()

    # When the window is replayed (two payments a page) and processed, then replayed again
    first = replay_asaas(pipeline)
    pipeline.process()
    first_results = asaas_results(pipeline, first)
    after_first = pipeline.world.snapshot()
    second = replay_asaas(pipeline)
    pipeline.process()

    # Then each of the window's days was listed by creation day, then by payment day, paged
    asked = [
        (q.get("dateCreated[ge]") or q["paymentDate[ge]"], "dateCreated[ge]" in q, q["offset"])
        for q in listings(pipeline)[: len(listings(pipeline)) // 2]
    ]
    assert asked == [
        (["2026-11-29"], True, ["0"]),
        (["2026-11-29"], True, ["2"]),
        (["2026-11-29"], True, ["4"]),
        (["2026-11-29"], False, ["0"]),
        (["2026-11-30"], True, ["0"]),
        (["2026-11-30"], False, ["0"]),
    ]
    assert all(q.get("limit") == ["2"] for q in listings(pipeline))

    # And each payment became the webhooks Asaas sends for its state, marked as a replay
    sent = {
        (json.loads(m["Body"])["payment"]["id"], json.loads(m["Body"])["event"])
        for m in pipeline.processed
    }
    assert sent == {
        (pix[1]["id"], "PAYMENT_RECEIVED"),
        (card[1]["id"], "PAYMENT_CONFIRMED"),
        (refunded[1]["id"], "PAYMENT_RECEIVED"),
        (refunded[1]["id"], "PAYMENT_PARTIALLY_REFUNDED"),
        (charged_back[1]["id"], "PAYMENT_RECEIVED"),
        (charged_back[1]["id"], "PAYMENT_CHARGEBACK_REQUESTED"),
        (cash[1]["id"], "PAYMENT_RECEIVED"),
    }
    assert {pipeline.attributes(m)[REPLAY_ATTRIBUTE] for m in pipeline.processed} == {
        ASAAS_PAYMENTS_LIST
    }

    # And the money moved once each, as Asaas shows it; nothing for the pending charge nor
    # for the payment outside the window
    assert [r.outcome for r in first_results] == ["applied"] * 7
    assert money(pipeline.world.order(pix[0])) == (5000, 0, 0)
    assert money(pipeline.world.order(card[0])) == (5000, 0, 0)
    assert money(pipeline.world.order(refunded[0])) == (10000, 5000, 0)
    assert money(pipeline.world.order(charged_back[0])) == (5000, 0, 5000)
    assert money(pipeline.world.order(cash[0])) == (5000, 0, 0)
    assert pipeline.world.find_order(pending[0]) is None
    assert pipeline.world.find_order(before[0]) is None
    for order, _ in everyone[:5]:
        assert pipeline.world.mismatches(order) == []

    # And the second replay was the same deliveries, and changed nothing at all
    assert after_first != ledger_before
    assert pipeline.world.snapshot() == after_first
    assert [t.message.event_id for t in second] == [t.message.event_id for t in first]
    assert {r.outcome for r in asaas_results(pipeline, second)} == {"duplicate"}


def test_money_a_webhook_brought_and_a_replay_brings_again_is_one_effect_either_way(
    pipeline: Pipeline,
) -> None:
    # Given a payment refunded in part whose webhooks came before the queue paused, and a card
    # charged back whose webhooks Asaas still holds (delivered once the queue resumes)
    delivered = asaas_payment("PAYMENT_PARTIALLY_REFUNDED", "2026-11-29")
    held = asaas_payment("PAYMENT_CHARGEBACK_REQUESTED", "2026-11-29")
    for _, payment in (delivered, held):
        pipeline.apis.asaas_payments[payment["id"]] = payment
    for event, at in (
        ("PAYMENT_RECEIVED", "2026-11-29 18:00:05"),
        ("PAYMENT_PARTIALLY_REFUNDED", "2026-11-30 11:05:02"),
    ):
        pipeline.world.deliver_all(asaas_webhook(event, delivered[1], at), provider="asaas")
    booked = money(pipeline.world.order(delivered[0]))

    # When the window is replayed and processed, then the webhooks Asaas held arrive
    replayed = replay_asaas(pipeline)
    pipeline.process()
    results = {
        (r.tracked.message.event_type, json.loads(r.tracked.message.body)["payment"]["id"]): (
            r.outcome
        )
        for r in asaas_results(pipeline, replayed)
    }
    after_replay = pipeline.world.snapshot()
    for event, at in (
        ("PAYMENT_CONFIRMED", "2026-11-29 14:00:00"),
        ("PAYMENT_CHARGEBACK_REQUESTED", "2026-12-10 08:30:11"),
    ):
        pipeline.world.deliver_all(asaas_webhook(event, held[1], at), provider="asaas")

    # Then what the webhooks booked came back a duplicate, what they had not was applied, and
    # the webhooks after the replay changed nothing: each movement is one entry
    assert booked == (10000, 5000, 0)
    assert results == {
        ("PAYMENT_RECEIVED", delivered[1]["id"]): "duplicate",
        ("PAYMENT_PARTIALLY_REFUNDED", delivered[1]["id"]): "duplicate",
        ("PAYMENT_RECEIVED", held[1]["id"]): "applied",
        ("PAYMENT_CHARGEBACK_REQUESTED", held[1]["id"]): "applied",
    }
    assert pipeline.world.snapshot() == after_replay
    assert money(pipeline.world.order(delivered[0])) == booked
    assert money(pipeline.world.order(held[0])) == (5000, 0, 5000)
    assert len(pipeline.world.effects(delivered[0])) == 3
    assert len(pipeline.world.effects(held[0])) == 2


def test_an_asaas_api_error_stops_the_replay_resumable_from_the_day_it_was_reading(
    pipeline: Pipeline,
) -> None:
    # Given five Pix payments received on the 29th and two on the 30th, and Asaas failing on
    # the seventh listing (the 30th's first: three pages of the 29th's by creation, three by
    # payment, two payments a page)
    lost = [asaas_payment("PAYMENT_RECEIVED", "2026-11-29") for _ in range(5)]
    lost += [
        asaas_payment("PAYMENT_RECEIVED", "2026-11-30", paymentDate="2026-11-30") for _ in range(2)
    ]
    for _, payment in lost:
        pipeline.apis.asaas_payments[payment["id"]] = payment
    pipeline.apis.fail("/v3/payments", request=7)

    # When the window is replayed and processed
    with pytest.raises(ReplayInterruptedError) as interrupted:
        replay_asaas(pipeline)
    pipeline.process()

    # Then it stopped saying where to go on: the 30th, the day it was reading; the 29th's
    # five were enqueued and applied, the 30th's not yet
    assert "answered 500" in str(interrupted.value)
    assert interrupted.value.resume == Resume("--since", BRAZIL_30)
    assert len(interrupted.value.enqueued) == 5
    assert [pipeline.world.find_order(o) is not None for o, _ in lost] == [True] * 5 + [False] * 2

    # When it is resumed from there
    resumed = replay_asaas(
        pipeline, Window(datetime.fromisoformat(interrupted.value.resume.value), ASAAS_WINDOW.until)
    )
    pipeline.process()

    # Then the 30th's two were applied, and every payment is paid once
    assert {r.outcome for r in asaas_results(pipeline, resumed)} == {"applied"}
    assert len(resumed) == 2
    for order, _ in lost:
        assert money(pipeline.world.order(order)) == (5000, 0, 0)
        assert len(pipeline.world.effects(order)) == 1


def test_an_asaas_error_on_a_later_page_of_a_day_resumes_that_day_whole(
    pipeline: Pipeline,
) -> None:
    # Given five payments created on the 29th, and Asaas failing on the 29th's second page
    lost = [asaas_payment("PAYMENT_RECEIVED", "2026-11-29") for _ in range(5)]
    for _, payment in lost:
        pipeline.apis.asaas_payments[payment["id"]] = payment
    pipeline.apis.fail("/v3/payments", request=2)

    # When the window is replayed, processed, and resumed with the option it printed
    with pytest.raises(ReplayInterruptedError) as interrupted:
        replay_asaas(pipeline)
    pipeline.process()
    assert interrupted.value.resume == Resume("--since", BRAZIL_29)
    assert interrupted.value.resume is not None
    resumed = replay_asaas(
        pipeline, Window(datetime.fromisoformat(interrupted.value.resume.value), ASAAS_WINDOW.until)
    )
    pipeline.process()

    # Then the day was read again whole: the first page's two are duplicates, the rest applied
    assert sorted(r.outcome for r in asaas_results(pipeline, resumed)) == [
        "applied",
        "applied",
        "applied",
        "duplicate",
        "duplicate",
    ]
    for order, _ in lost:
        assert len(pipeline.world.effects(order)) == 1


def test_an_asaas_replay_without_the_api_key_is_refused_before_any_request(
    pipeline: Pipeline,
) -> None:
    # Given the stack's Asaas key still its placeholder
    payments = AsaasPayments(lambda: PLACEHOLDER, pipeline.apis.url)

    # When a window is asked for, Then it is refused saying which secret, and nothing is read
    with pytest.raises(ReplayRefusedError, match="asaas/api-key"):
        payments.pages(ASAAS_WINDOW)
    assert pipeline.apis.requests == []
