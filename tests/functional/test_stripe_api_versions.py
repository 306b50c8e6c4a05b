"""A Stripe delivery on an API version newer than any the map knows, through the pipeline on
moto: booked when every field it needs is there, dead-lettered with nothing applied when not."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from fixtures import stripe
from functions.ingest.adapters import SqsQueue
from functions.shared.failures import FailureRecords
from infra.settings import MAX_RECEIVE_COUNT
from ops.dlq import DeadLetters
from tests.support.pipeline import Pipeline, pipeline_on_moto
from tests.support.world import TABLES

NEWER = "2027-01-27.elm"  # made up: later than any version Stripe had published
T0 = 1_780_000_000


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    with pipeline_on_moto(monkeypatch) as running:
        yield running


def enqueue_payment(pipeline: Pipeline, *, drop: str | None = None) -> tuple[str, str]:
    """A paid PaymentIntent on the newer version, `drop` left out of it, enqueued as ingest
    does. Returns the order and the event id."""
    order = stripe.unique("ord")
    event = json.loads(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    event["api_version"] = NEWER
    if drop is not None:
        del event["data"]["object"][drop]
    attributes = {
        "provider": "stripe",
        "event_id": event["id"],
        "event_type": event["type"],
    }
    SqsQueue(pipeline.sqs, pipeline.queue_url).send(json.dumps(event), attributes)
    return order, event["id"]


def test_a_payment_on_a_newer_version_with_its_fields_intact_is_booked(
    pipeline: Pipeline,
) -> None:
    # Given a payment on a newer, unknown API version, shaped as the known ones
    order, _ = enqueue_payment(pipeline)

    # When the pipeline processes it
    pipeline.process()

    # Then the order is paid, once, and nothing is dead-lettered
    assert pipeline.world.order(order).paid_total == 5000
    assert pipeline.world.order(order).effect_count == 1
    assert pipeline.dead_letters() == 0


def test_a_payment_on_a_newer_version_lacking_a_needed_field_ends_in_the_dlq_unapplied(
    pipeline: Pipeline,
) -> None:
    # Given a payment on a newer, unknown API version without `latest_charge`, which the map
    # would otherwise read as no charge
    order, event_id = enqueue_payment(pipeline, drop="latest_charge")

    # When the pipeline processes it
    pipeline.process()

    # Then it is in the DLQ after every receive, its failure naming the version and the
    # field, and nothing reached the order or the ledger
    failures = FailureRecords(pipeline.world.dynamodb, TABLES.ledger, time.time)
    [letter] = DeadLetters(
        pipeline.sqs,
        pipeline.dead_letter_url,
        pipeline.queue_url,
        30,
        0,
        last_failures=failures.last_failures,
    ).letters()
    assert letter.event_id == event_id
    assert letter.receives == MAX_RECEIVE_COUNT
    assert pipeline.dead_letters() == 1
    assert pipeline.world.find_order(order) is None
    assert pipeline.world.effects(order) == []
    assert "data.object.latest_charge" in str(letter.reason)
    assert NEWER in str(letter.reason)
