"""Stripe's thin events through the pipeline on moto, their objects read from the fake Stripe
API on loopback: booked once with the snapshot events of the same changes, whichever arrives
first and however often; an object the API does not show yet is retried, never dropped."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext, sqs_event, sqs_record
from fixtures.stripe import object_of, thin_of
from functions.ingest.adapters import SqsQueue
from functions.process import handler
from functions.stripe.models import NEWEST_KNOWN_API_VERSION
from tests.functional.test_stripe_eventbridge import through_eventbridge
from tests.support.pipeline import Pipeline, pipeline_on_moto

T0 = 1_780_000_000


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    with pipeline_on_moto(monkeypatch) as running:
        yield running


def held_by_stripe(pipeline: Pipeline, *snapshots: str) -> None:
    """Stripe's API holds each object as the snapshot shows it (the latest given wins)."""
    for snapshot in snapshots:
        _, carried = object_of(snapshot)
        pipeline.apis.stripe_objects[carried["id"]] = carried


def enqueued(pipeline: Pipeline, body: str, copies: int = 1) -> None:
    event = json.loads(body)
    attributes = {"provider": "stripe", "event_id": event["id"], "event_type": event["type"]}
    for _ in range(copies):
        SqsQueue(pipeline.sqs, pipeline.queue_url).send(body, attributes)


@pytest.mark.parametrize("thin_first", [True, False])
def test_a_payment_and_refund_announced_thin_and_snapshot_are_booked_once(
    pipeline: Pipeline, thin_first: bool
) -> None:
    # Given a stack with a snapshot and a thin destination: a payment and a partial refund,
    # each announced both ways (the thin ones twice), the objects held by Stripe's API
    order, intent, charge, refund = (stripe.unique(p) for p in ("ord", "pi", "ch", "re"))
    paid = stripe.payment_intent_succeeded(order, intent, 5000, T0, charge)
    refunded = stripe.refund_created(intent, refund, 2000, T0 + 60, charge, order)
    held_by_stripe(pipeline, paid, refunded)
    thin = [thin_of(paid), thin_of(refunded)]
    for body in [*thin, paid, refunded] if thin_first else [paid, refunded, *thin]:
        enqueued(pipeline, body, copies=2 if body in thin else 1)

    # When the pipeline processes them all
    pipeline.process()

    # Then the order is paid and partly refunded, each movement counted and announced once,
    # its objects read on the newest API version the map knows, nothing dead-lettered
    order_item = pipeline.world.order(order)
    assert (order_item.paid_total, order_item.refunded_total) == (5000, 2000)
    assert order_item.effect_count == 2
    assert len(pipeline.world.outbox(order)) == 2
    assert pipeline.apis.stripe_versions
    assert set(pipeline.apis.stripe_versions) == {NEWEST_KNOWN_API_VERSION}
    assert pipeline.dead_letters() == 0


def test_a_thin_event_whose_object_stripe_does_not_show_yet_is_retried_then_booked(
    pipeline: Pipeline,
) -> None:
    # Given a thin payment whose PaymentIntent Stripe's API does not answer yet (404)
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, T0)
    note = thin_of(paid)
    record = sqs_record(
        note, {"provider": "stripe", "event_id": json.loads(note)["id"], "event_type": "v1.x"}
    )

    # When process receives it
    first = handler.lambda_handler(sqs_event(record), FakeLambdaContext())

    # Then the record fails for a retry, nothing booked
    assert [f["itemIdentifier"] for f in first["batchItemFailures"]] == [record["messageId"]]
    assert pipeline.world.find_order(order) is None

    # And when Stripe shows it and the record comes back, it is booked once
    held_by_stripe(pipeline, paid)
    again = handler.lambda_handler(sqs_event(record), FakeLambdaContext())
    assert again["batchItemFailures"] == []
    assert pipeline.world.order(order).paid_total == 5000


def test_a_thin_event_through_eventbridge_is_booked_as_its_webhook(pipeline: Pipeline) -> None:
    # Given a thin payment put on the partner bus, and the same change's snapshot webhook
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, T0)
    held_by_stripe(pipeline, paid)
    by_bus = sqs_record(through_eventbridge(thin_of(paid)), {})
    by_webhook = sqs_record(paid, {"provider": "stripe", "event_id": json.loads(paid)["id"]})

    # When process receives both
    response = handler.lambda_handler(sqs_event(by_bus, by_webhook), FakeLambdaContext())

    # Then the order is paid once
    assert response["batchItemFailures"] == []
    assert pipeline.world.order(order).paid_total == 5000
    assert pipeline.world.order(order).effect_count == 1
