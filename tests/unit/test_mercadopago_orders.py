"""Mercado Pago's Orders API (topic `order`) on the shapes its documentation gives."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fixtures.shapes import EVENTS_DIR, shape
from functions.process.interpreters import Interpreters
from functions.shared.domain import Effect, Interpretation, Money, NoEffect, Transition, effect_key
from functions.shared.money import InvalidFieldError

ORDER_NOTIFICATION = (EVENTS_DIR / "mercadopago" / "order.notification.json").read_text()


def notification_of(order: dict[str, Any]) -> str:
    """The order's notification as Mercado Pago sends it (`data.id` the order's id)."""
    note = json.loads(ORDER_NOTIFICATION)
    note["data"]["id"] = order["id"]
    return json.dumps(note)


def read_order(order: dict[str, Any]) -> list[Interpretation]:
    """What process books from the order's notification when the Orders API answers `order`;
    the payments API is never asked for an order's notification."""
    interpreters = Interpreters.build(
        mercadopago_payments=lambda _: pytest.fail("an order is not a payment"),
        mercadopago_orders=lambda order_id: order if order_id == order["id"] else {},
    )
    return list(interpreters("mercadopago", notification_of(order)))


def booked(readings: list[Interpretation]) -> list[tuple[Transition, str, int]]:
    return [
        (r.transition, r.external_ref, r.amount.minor) for r in readings if isinstance(r, Effect)
    ]


def test_a_processed_order_is_paid_by_its_payment_under_the_payments_api_id() -> None:
    # Given an order whose payment names its Payments API object
    order = shape("mercadopago/order.processed.json")

    # When its notification is processed
    [effect] = read_order(order)

    # Then the order of umavez is the external reference, paid 200.00 BRL, keyed by the
    # numeric id the `payment` topic announces
    assert isinstance(effect, Effect)
    assert (effect.transition, effect.external_ref, effect.payment) == (
        Transition.PAID,
        "116232980550",
        "116232980550",
    )
    assert (effect.amount, effect.order_id, effect.recipient) == (
        Money(20000, "brl"),
        "ord_2077",
        "cliente@example.com",
    )


def test_the_same_money_through_payment_and_order_is_one_effect() -> None:
    # Given the payment the order's transaction names, as the payments API answers it
    order = shape("mercadopago/order.processed.json")
    payment = shape("mercadopago/payment.json")
    payment.update({"id": 116232980550, "external_reference": "ord_2077", "metadata": {}})
    payment["transaction_amount"] = 200
    interpreters = Interpreters.build(
        mercadopago_payments=lambda _: payment, mercadopago_orders=lambda _: order
    )
    by_payment = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text()

    # When both topics announce it
    keys = [
        effect_key(r, "ord_2077")
        for body in (by_payment, ORDER_NOTIFICATION)
        for r in interpreters("mercadopago", body)
        if isinstance(r, Effect) and r.transition is Transition.PAID
    ]

    # Then they name one effect
    assert len(keys) == 2
    assert len(set(keys)) == 1


def test_a_payment_without_a_payments_api_object_is_keyed_by_its_transaction() -> None:
    order = shape("mercadopago/order.processed.json")
    del order["transactions"]["payments"][0]["reference"]

    assert booked(read_order(order)) == [(Transition.PAID, "PAY01JQ4S4KY8HWQ6NA5PXB65B3D3", 20000)]


def test_a_partial_refund_is_its_own_entry_and_the_payment_stays_paid() -> None:
    order = shape("mercadopago/order.partially_refunded.json")

    assert booked(read_order(order)) == [
        (Transition.PAID, "116232980550", 20000),
        (Transition.REFUNDED, "refund:2187654455", 5000),
    ]


def test_a_reread_order_yields_the_same_keys() -> None:
    # Given the order read once paid, then again after its refund
    first = read_order(shape("mercadopago/order.processed.json"))
    later = read_order(shape("mercadopago/order.partially_refunded.json"))

    # Then the payment is the same key both times, stamped the same (the order's creation)
    paid = [
        r for r in (*first, *later) if isinstance(r, Effect) and r.transition.value == "order.paid"
    ]
    assert len({effect_key(r, "ord_2077") for r in paid}) == 1
    assert len({r.delivery.created for r in paid}) == 1


def test_a_payment_failed_then_retried_in_the_same_order_is_paid_once() -> None:
    order = shape("mercadopago/order.retried.json")

    assert booked(read_order(order)) == [(Transition.PAID, "PAY01JQ7A9Q2W4E6R8T0Y2U4I6O8P", 20000)]


def test_a_chargeback_withdraws_what_the_payment_still_holds() -> None:
    order = shape("mercadopago/order.charged_back.json")

    assert booked(read_order(order)) == [
        (Transition.PAID, "116232981177", 20000),
        (Transition.DISPUTED, "116232981177:dispute", 20000),
    ]


def test_a_chargeback_after_a_full_refund_holds_nothing() -> None:
    # Given a payment refunded in full, then charged back
    order = shape("mercadopago/order.charged_back.json")
    payment = order["transactions"]["payments"][0]
    order["transactions"]["refunds"] = [
        {"id": "REF01", "transaction_id": payment["id"], "amount": "200.00", "status": "processed"}
    ]

    readings = read_order(order)

    # Then the refund is booked and the chargeback withdraws nothing more
    assert booked(readings) == [
        (Transition.PAID, "116232981177", 20000),
        (Transition.REFUNDED, "refund:REF01", 20000),
    ]
    assert any(isinstance(r, NoEffect) for r in readings)


def test_an_order_still_waiting_for_payment_books_nothing() -> None:
    order = shape("mercadopago/order.processed.json")
    order.update({"status": "action_required", "status_detail": "waiting_payment"})
    order["transactions"]["payments"][0].update(
        {"status": "action_required", "status_detail": "waiting_payment", "paid_amount": "0.00"}
    )

    [reading] = read_order(order)

    assert isinstance(reading, NoEffect)
    assert "action_required" in reading.reason


def test_a_refund_of_no_payment_of_the_order_is_refused_naming_the_field() -> None:
    order = shape("mercadopago/order.partially_refunded.json")
    order["transactions"]["refunds"][0]["transaction_id"] = "PAY_ELSEWHERE"

    with pytest.raises(InvalidFieldError) as refused:
        read_order(order)

    assert refused.value.field == "order.transactions.refunds.0.transaction_id"


def test_an_order_without_its_currency_is_refused() -> None:
    order = shape("mercadopago/order.processed.json")
    del order["currency"]

    with pytest.raises(InvalidFieldError) as refused:
        read_order(order)

    assert refused.value.field == "order.currency"


def test_an_order_notification_without_an_id_is_named_by_its_order_and_version() -> None:
    # Given an order's notification as Mercado Pago sends it: no id of its own
    note = json.loads(ORDER_NOTIFICATION)
    assert "id" not in note

    [effect] = read_order(shape("mercadopago/order.processed.json"))

    assert isinstance(effect, Effect)
    assert effect.delivery.event_id == "ORD01JQ4S4KY8HWQ6NA5PXB65B3D3:3"
    assert effect.delivery.event_type == "order.processed"


def test_without_the_orders_api_an_order_notification_is_no_effect() -> None:
    interpreters = Interpreters.build(mercadopago_payments=lambda _: pytest.fail("called"))

    [reading] = interpreters("mercadopago", ORDER_NOTIFICATION)

    assert isinstance(reading, NoEffect)
