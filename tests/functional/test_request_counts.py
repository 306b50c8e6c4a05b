"""DynamoDB requests per delivery: one (eventually consistent) read spares the writes it can (a
duplicate writes nothing, a stale entry skips the doomed guarded attempt); the conditions
decide."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from fixtures import stripe
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

    # A Stripe refund that names its order in metadata reads its payment's binding first: a
    # movement of a payment bound to another order belongs to that order (one more read). A
    # stale entry queries its order's entries once: is a newer movement of its payment told?
    # Naming the customer the refund's order did not know, it then queries them again and
    # re-opens the refund's notification if it left without its e-mail (one conditional write,
    # refused here: the refund's was never sent). Its entry taught the order whom to e-mail:
    # its redelivery re-opens them again (the re-open after the commit may have failed).
    assert cost == {
        "new": {"BatchGetItem": 2, "TransactWriteItems": 1},
        "duplicate": {"BatchGetItem": 2},
        "stale": {"BatchGetItem": 1, "Query": 2, "TransactWriteItems": 1, "UpdateItem": 1},
        "stale duplicate": {"BatchGetItem": 1, "Query": 1, "UpdateItem": 1},
        "order looked up by payment": {"BatchGetItem": 2, "TransactWriteItems": 1},
        "ignored": {"PutItem": 1},
    }
