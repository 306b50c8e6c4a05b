"""Stripe's events through an Amazon EventBridge event destination: the rule puts EventBridge's
envelope on the webhook queue with no attributes, and process books the Stripe event inside as
the webhook's, once whichever way it came."""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import pytest

from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext, sqs_event, sqs_record
from functions.process import handler
from tests.support.world import World

if TYPE_CHECKING:
    pass

T0 = 1_764_460_800
SOURCE = "aws.partner/stripe.com/ed_test_61RM0xAHcFZJ2wBNN16RLfH3kxSJ2rGQCAgh"


def through_eventbridge(event: str, source: str = SOURCE) -> str:
    """The envelope EventBridge puts on an SQS target for an event Stripe's destination sent:
    source the partner event source, detail-type the event's type, detail the event."""
    detail = json.loads(event)
    return json.dumps(
        {
            "version": "0",
            "id": str(uuid.uuid4()),
            "detail-type": detail["type"],
            "source": source,
            "account": "123456789012",
            "time": "2025-11-30T00:00:00Z",
            "region": "us-east-1",
            "resources": [],
            "detail": detail,
        }
    )


@pytest.mark.usefixtures("deployed_tables")
def test_a_stripe_event_through_eventbridge_and_its_webhook_are_one_payment(
    world: World,
) -> None:
    # Given a payment Stripe sent both to its EventBridge destination and to a webhook
    order = stripe.unique("ord")
    event = stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0)
    by_bus = sqs_record(through_eventbridge(event), {})
    by_webhook = sqs_record(event, {"provider": "stripe", "event_id": json.loads(event)["id"]})

    # When process receives both
    first = handler.lambda_handler(sqs_event(by_bus), FakeLambdaContext())
    second = handler.lambda_handler(sqs_event(by_webhook), FakeLambdaContext())

    # Then the order is paid once, announced once; neither record failed
    assert world.order(order).paid_total == 5000
    assert len(world.outbox(order)) == 1
    assert first["batchItemFailures"] == second["batchItemFailures"] == []


@pytest.mark.usefixtures("deployed_tables")
def test_a_live_event_on_a_test_stack_is_ignored_and_writes_nothing(world: World) -> None:
    # Given a live-mode Stripe event on the bus of a test-mode stack
    order = stripe.unique("ord")
    event = json.loads(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    event["livemode"] = True
    before = world.snapshot()

    # When process receives it
    response = handler.lambda_handler(
        sqs_event(sqs_record(through_eventbridge(json.dumps(event)), {})), FakeLambdaContext()
    )

    # Then it is acknowledged and nothing is booked
    assert response["batchItemFailures"] == []
    assert world.snapshot() == before


@pytest.mark.usefixtures("deployed_tables")
@pytest.mark.parametrize(
    "source", ["aws.partner/other.com/x", "com.example.shop", "aws.partner/stripe.comx/ed"]
)
def test_an_envelope_of_another_source_without_attributes_fails_and_writes_nothing(
    world: World, source: str
) -> None:
    # Given an envelope from another source, carrying a well-formed Stripe event
    order = stripe.unique("ord")
    event = stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0)
    record = sqs_record(through_eventbridge(event, source), {})

    # When process receives it
    response = handler.lambda_handler(sqs_event(record), FakeLambdaContext())

    # Then it fails towards the dead-letter queue, its reason kept, and nothing is booked
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [record["messageId"]]
    assert world.find_order(order) is None
    assert world.outbox(order) == []
