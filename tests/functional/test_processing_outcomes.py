"""Every delivery ends in exactly one visible place: applied, duplicate, stale, ignored,
unroutable, retried later, or failed towards the DLQ."""

from __future__ import annotations

import json

import pytest

from fixtures import stripe
from functions.shared.domain import Outcome
from functions.shared.errors import (
    CurrencyMismatchError,
    MalformedEventError,
    OrderNotYetKnownError,
    UnknownProviderError,
)
from functions.shared.money import InvalidFieldError
from tests.support.world import World

T0 = 1_764_460_800
AMOUNT = 5000


def test_event_without_a_mapped_effect_is_recorded_as_ignored_once(world: World) -> None:
    # Given charge.refunded on an API version that sends refund.* events for every refund: it
    # names no refund, only the cumulative amount
    body = stripe.fixture_text("charge.refunded")

    # When it is delivered twice
    outcomes = [world.deliver(body).outcome, world.deliver(body).outcome]

    # Then one ignored delivery is recorded, with its reason, and no order exists
    [delivery] = world.deliveries()
    assert (delivery.outcome, delivery.event_type) == ("ignored", "charge.refunded")
    assert "refund.created" in delivery.reason
    assert world.find_order("ord_1042") is None
    assert outcomes == [Outcome.IGNORED, Outcome.IGNORED]


def test_payment_without_order_metadata_waits_for_what_binds_it(world: World) -> None:
    # Given a PaymentIntent created without our order metadata (as Checkout creates them)
    intent = stripe.unique("pi")
    body = stripe.payment_intent_succeeded(None, intent, AMOUNT, T0)
    before = world.snapshot()

    # When it is delivered, Then it is retried later and nothing is written
    with pytest.raises(OrderNotYetKnownError):
        world.deliver(body)
    assert world.snapshot() == before


def test_object_naming_no_order_and_no_payment_is_recorded_as_unroutable(world: World) -> None:
    # Given a refund that names neither an order nor any payment or charge
    event = json.loads(stripe.refund_created("pi_x", stripe.unique("re"), AMOUNT, T0))
    event["data"]["object"].update({"payment_intent": None, "charge": None})

    # When it is delivered
    processed = world.deliver(json.dumps(event))

    # Then it is recorded as unroutable and nothing else is written
    assert [d.outcome for d in world.deliveries()] == ["unroutable"]
    assert world.outbox() == []
    assert processed.outcome is Outcome.UNROUTABLE


def test_refund_of_a_payment_not_yet_recorded_waits_for_it(world: World) -> None:
    # Given a refund without order metadata whose payment has not arrived
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    refund = stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0 + 60)
    before = world.snapshot()

    # When it is delivered, Then it is retried later and nothing is written
    with pytest.raises(OrderNotYetKnownError):
        world.deliver(refund)
    assert world.snapshot() == before

    # When the payment arrives and SQS redelivers the refund
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    redelivered = world.deliver(refund)

    # Then the refund is applied to the payment's order
    state = world.order(order)
    assert (state.financial_status, state.refunded_total) == ("refunded", AMOUNT)
    assert world.mismatches(order) == []
    assert redelivered.outcome is Outcome.APPLIED


def test_dispute_after_payment_marks_the_order_disputed(world: World) -> None:
    # Given a paid order
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))

    # When a dispute is opened
    world.deliver_all(stripe.dispute_created(intent, stripe.unique("du"), AMOUNT, T0 + 3600))

    # Then the order is disputed and the disputed amount is recorded
    state = world.order(order)
    assert (state.financial_status, state.disputed_total) == ("disputed", AMOUNT)
    assert sorted(i["transition"] for i in world.outbox(order)) == ["order.disputed", "order.paid"]


@pytest.mark.parametrize("refund_first", [True, False], ids=["refund-first", "payment-first"])
def test_same_second_payment_and_refund_end_refunded_in_either_order(
    world: World, refund_first: bool
) -> None:
    # Given a payment and its refund stamped with the same second
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)
    refund = stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0, order_id=order)

    # When they arrive in either order
    for body in [refund, payment] if refund_first else [payment, refund]:
        world.deliver(body)

    # Then the tie rule puts the refund last: the order is refunded, both amounts count
    state = world.order(order)
    assert (state.lifecycle_status, state.financial_status) == ("refunded", "refunded")
    assert (state.paid_total, state.refunded_total) == (AMOUNT, AMOUNT)
    assert world.mismatches(order) == []


def test_effect_in_another_currency_than_its_order_is_refused(world: World) -> None:
    # Given an order paid in BRL
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    before = world.snapshot()
    refund = json.loads(stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0 + 60))
    refund["data"]["object"]["currency"] = "usd"

    # When a refund in USD arrives, Then it is refused and nothing is written
    with pytest.raises(CurrencyMismatchError, match="brl"):
        world.deliver(json.dumps(refund))
    assert world.snapshot() == before


def test_malformed_payload_writes_nothing(world: World) -> None:
    before = world.snapshot()

    with pytest.raises(MalformedEventError):
        world.deliver('{"id": "evt_1", "object": "event"}')

    assert world.snapshot() == before


@pytest.mark.parametrize(
    ("what", "field"),
    [("id", "event id"), ("object", "order.paid object id")],
)
def test_an_id_longer_than_any_provider_makes_is_refused_by_name_and_writes_nothing(
    world: World, what: str, field: str
) -> None:
    # Given a payment event whose event id, or whose PaymentIntent's id, is 600 bytes long
    event = json.loads(stripe.payment_intent_succeeded("ord_long", "pi_ok", 5000, 1_764_460_800))
    if what == "id":
        event["id"] = "evt_" + "x" * 596
    else:
        event["data"]["object"]["id"] = "pi_" + "x" * 597
    before = world.snapshot()

    # When it is processed, Then it is refused naming what is too long (before it becomes a key:
    # longer still, DynamoDB refuses it with an error that names nothing), and nothing is
    # written
    with pytest.raises(InvalidFieldError) as refused:
        world.deliver(json.dumps(event))
    assert refused.value.field == field
    assert "600 bytes long" in refused.value.problem
    assert world.snapshot() == before


def test_unknown_provider_writes_nothing(world: World) -> None:
    before = world.snapshot()

    with pytest.raises(UnknownProviderError):
        world.processor().process("paypal", stripe.fixture_text("payment_intent.succeeded"))

    assert world.snapshot() == before


def test_legacy_and_current_shapes_of_one_payment_are_one_effect(world: World) -> None:
    # Given the payment applied from a current-version payment_intent.succeeded
    world.deliver(stripe.fixture_text("payment_intent.succeeded"))
    after_first = world.snapshot()

    # When an endpoint on API 2024-06-20 announces it as invoice.payment_succeeded
    legacy = world.deliver(stripe.fixture_text("invoice.payment_succeeded.2024-06-20"))

    # Then nothing changed
    assert world.snapshot() == after_first
    assert legacy.outcome is Outcome.DUPLICATE
