"""DynamoDB requests per delivery: the database's conditions decide, nothing is read first."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from provider_events import stripe
from tests.support.clients import RequestCounter
from tests.support.world import World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800


@pytest.fixture
def counter(dynamodb: DynamoDBClient) -> RequestCounter:
    return RequestCounter(dynamodb)


def test_new_duplicate_stale_and_looked_up_deliveries_cost_what_they_must(
    world: World, counter: RequestCounter
) -> None:
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    refund = stripe.refund_created(intent, stripe.unique("re"), 5000, T0 + 60, order_id=order)
    payment = stripe.payment_intent_succeeded(order, intent, 5000, T0)
    partial_refund = stripe.refund_created(intent, stripe.unique("re"), 100, T0 + 90)
    cost = {}
    for name, body in [
        ("new", refund),
        ("duplicate", refund),
        ("stale", payment),
        ("stale duplicate", payment),
        ("order looked up by payment", partial_refund),
        ("ignored", stripe.fixture_text("charge.refunded")),
    ]:
        counter.reset()
        world.deliver(body)
        cost[name] = dict(counter.by_operation)

    assert cost == {
        "new": {"TransactWriteItems": 1},
        "duplicate": {"TransactWriteItems": 1},
        "stale": {"TransactWriteItems": 2},
        "stale duplicate": {"TransactWriteItems": 1},
        "order looked up by payment": {"BatchGetItem": 1, "TransactWriteItems": 1},
        "ignored": {"PutItem": 1},
    }
