"""Lifecycles that once booked money wrong or told a customer wrongly, each held to the state
of the tables afterwards: the order's totals, its entries, the deliveries' audit and what was
announced. Each test fails on the design it names."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from fixtures import stripe
from functions.shared.domain import Outcome
from tests.support.clients import RequestCounter
from tests.support.world import World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800


@pytest.fixture
def counter(dynamodb: DynamoDBClient) -> RequestCounter:
    return RequestCounter(dynamodb)


def counted(world: World, order: str) -> list[tuple[str, int]]:
    return sorted(
        (str(e["transition"]), int(e["amount"]))
        for e in world.effects(order)
        if e["outcome"] in {Outcome.APPLIED.value, Outcome.STALE.value}
    )


# -- a refund that failed never counts, whichever order its payment is bound to later ---------


def test_a_refund_voided_under_the_order_its_metadata_names_never_counts_on_another(
    world: World,
) -> None:
    # Given a refund whose metadata names order A, whose failure is processed before any event
    # of its payment (the pair is voided under A)
    order_a, order_b = stripe.unique("ord"), stripe.unique("ord")
    intent, charge, refund = stripe.unique("pi"), stripe.unique("ch"), stripe.unique("re")
    failed = stripe.refund_event("refund.failed", intent, refund, 3000, T0 + 120, charge, order_a)
    assert world.deliver(failed).outcome is Outcome.VOIDED

    # When the payment binds to order B, then the refund's earlier success arrives
    world.deliver(stripe.payment_intent_succeeded(order_b, intent, 10000, T0, charge))
    succeeded = world.deliver(
        stripe.refund_created(intent, refund, 3000, T0 + 60, charge, order_id=order_a)
    )

    # Then the refund counts nowhere: B is paid in full, and only its payment was announced
    assert succeeded.outcome is Outcome.DUPLICATE
    assert counted(world, order_b) == [("order.paid", 10000)]
    assert counted(world, order_a) == []
    assert world.order(order_b).get("refunded_total", 0) == 0
    assert [i["transition"] for i in world.outbox()] == ["order.paid"]


# -- a chargeback's delivery is audited as what it booked --------------------------------------


def test_a_chargeback_is_audited_as_booked_and_costs_no_cancelled_transaction(
    world: World, counter: RequestCounter
) -> None:
    # Given a paid order
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.payment_intent_succeeded(order, intent, 10000, T0, charge))
    dispute = stripe.unique("dp")

    # When a chargeback (not an inquiry) is created on it
    counter.reset()
    created = stripe.dispute_created(intent, dispute, 10000, T0 + 600)
    results = world.deliver_all(created)

    # Then it is booked disputed, nothing of the delivery is audited as voided, and the inquiry
    # it might have been is voided without a transaction cancelled first
    assert [r.outcome for r in results] == [Outcome.VOIDED, Outcome.APPLIED]
    assert world.order(order)["disputed_total"] == 10000
    assert [d["outcome"] for d in world.deliveries() if d["event_id"] in created] == []
    assert counter.by_operation["TransactWriteItems"] == 2
