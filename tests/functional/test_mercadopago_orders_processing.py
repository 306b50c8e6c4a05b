"""Mercado Pago orders (topic `order`) through the same transaction, on moto; the Orders API is
the embedded stack's fake on loopback, told its orders over HTTP as from outside."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from devstack.fake_registration import register_mercadopago_order
from devstack.provider_apis import FakeProviderApis
from fixtures.shapes import EVENTS_DIR, shape
from functions.mercadopago.api import MercadoPagoApi, ProviderApiUnavailableError
from functions.process.interpreters import Interpreters
from functions.process.service import EffectProcessor
from functions.shared.domain import Outcome
from tests.support.clock import FakeClock
from tests.support.world import World

ORDER_NOTIFICATION = (EVENTS_DIR / "mercadopago" / "order.notification.json").read_text()
PAYMENT_NOTIFICATION = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text()
TOKEN = "APP_USR-test-token-not-real"


@pytest.fixture
def apis() -> Iterator[FakeProviderApis]:
    api = FakeProviderApis(mercadopago_token=TOKEN).start()
    yield api
    api.stop()


def processor_with(world: World, base_url: str) -> EffectProcessor:
    """Wired as the process Lambda is: the payments and the orders API with the access token."""
    api = MercadoPagoApi(lambda: TOKEN, base_url=base_url, timeout_seconds=2)
    return EffectProcessor(
        world.dynamodb,
        world.tables,
        FakeClock(),
        Interpreters.build(mercadopago_payments=api.payment, mercadopago_orders=api.order),
    )


def test_an_order_paid_then_partly_refunded_balances_and_resends_are_duplicates(
    world: World, apis: FakeProviderApis
) -> None:
    # Given the Orders API knows the order processed, told from outside over HTTP
    processor = processor_with(world, apis.url)
    assert register_mercadopago_order(apis.url, TOKEN, shape("mercadopago/order.processed.json"))
    [paid] = processor.process("mercadopago", ORDER_NOTIFICATION)

    # When the order is refunded in part, notified, and that notification resent
    refunded = shape("mercadopago/order.partially_refunded.json")
    assert not register_mercadopago_order(apis.url, TOKEN, refunded)
    after_refund = processor.process("mercadopago", ORDER_NOTIFICATION)
    snapshot = world.snapshot()
    resent = processor.process("mercadopago", ORDER_NOTIFICATION)

    # Then the order holds the payment and the refund once each, announced once each
    state = world.order("ord_2077")
    assert (state.financial_status, state.paid_total, state.refunded_total) == (
        "partially_refunded",
        20000,
        5000,
    )
    assert paid.outcome is Outcome.APPLIED
    assert [p.outcome for p in after_refund] == [Outcome.DUPLICATE, Outcome.APPLIED]
    assert {p.outcome for p in resent} == {Outcome.DUPLICATE}
    assert world.snapshot() == snapshot
    assert len(world.outbox("ord_2077")) == 2
    assert world.mismatches("ord_2077") == []


def test_the_payment_topic_after_the_order_topic_is_a_duplicate(
    world: World, apis: FakeProviderApis
) -> None:
    # Given the order booked through `order`
    processor = processor_with(world, apis.url)
    apis.orders["ORD01JQ4S4KY8HWQ6NA5PXB65B3D3"] = shape("mercadopago/order.processed.json")
    processor.process("mercadopago", ORDER_NOTIFICATION)
    # ... and the Payments API object its transaction names
    payment = shape("mercadopago/payment.json")
    payment.update({"id": 116232980550, "external_reference": "ord_2077", "metadata": {}})
    payment["transaction_amount"] = 200
    apis.payments["116232980550"] = payment
    note = json.loads(PAYMENT_NOTIFICATION)
    note["data"] = {"id": "116232980550"}

    # When the same money is announced through `payment`
    processed = processor.process("mercadopago", json.dumps(note))

    # Then it is paid once
    assert processed[0].outcome is Outcome.DUPLICATE
    assert world.order("ord_2077").paid_total == 20000
    assert len(world.outbox("ord_2077")) == 1


def test_an_order_the_api_does_not_know_is_retried_and_writes_nothing(
    world: World, apis: FakeProviderApis
) -> None:
    before = world.snapshot()

    with pytest.raises(ProviderApiUnavailableError):
        processor_with(world, apis.url).process("mercadopago", ORDER_NOTIFICATION)

    assert world.snapshot() == before


def put(url: str, body: bytes, token: str = TOKEN) -> int:
    assert url.startswith("http://127.0.0.1:")
    request = urllib.request.Request(  # noqa: S310 (loopback, asserted)
        url, body, {"Authorization": f"Bearer {token}"}, method="PUT"
    )
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:  # noqa: S310 (loopback)
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_the_fake_orders_api_refuses_what_is_not_the_order_its_path_names(
    apis: FakeProviderApis,
) -> None:
    order = shape("mercadopago/order.processed.json")
    path = f"{apis.url}/__fake__/v1/orders/ORD01JQ4S4KY8HWQ6NA5PXB65B3D3"

    assert put(f"{path}X", json.dumps(order).encode()) == 400
    assert put(path, b"not json") == 400
    assert put(path, json.dumps(order).encode(), token="wrong") == 401
    assert apis.orders == {}
    assert put(path, json.dumps(order).encode()) == 201
    assert apis.orders["ORD01JQ4S4KY8HWQ6NA5PXB65B3D3"] == order
