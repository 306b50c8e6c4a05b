"""The Stripe map on real payload shapes: which events are effects, and which object each is."""

from __future__ import annotations

import json

import pytest

from fixtures.stripe import fixture_text
from functions.process.interpreters import Interpreters
from functions.shared.domain import (
    Binding,
    Effect,
    Interpretation,
    Money,
    NoEffect,
    Transition,
    effect_key,
)
from functions.shared.errors import MalformedEventError
from functions.shared.money import InvalidFieldError, InvalidMoneyError

INTENT = "pi_3QpLqRJz8fEoYh0N1kWc2DxT"
CHARGE = "ch_3QpLqRJz8fEoYh0N1Yt9sLq2"


def interpret(provider: str, body: str) -> Interpretation:
    [interpretation] = Interpreters.build()(provider, body)
    return interpretation


def effect_of(fixture: str) -> Effect:
    interpretation = interpret("stripe", fixture_text(fixture))
    assert isinstance(interpretation, Effect), interpretation
    return interpretation


def no_effect_reason(fixture: str) -> str:
    interpretation = interpret("stripe", fixture_text(fixture))
    assert isinstance(interpretation, NoEffect), interpretation
    return interpretation.reason


@pytest.mark.parametrize(
    ("fixture", "order_id"),
    [
        ("payment_intent.succeeded", "ord_1042"),
        ("charge.succeeded", "ord_1042"),
        ("invoice.payment_succeeded.2024-06-20", "ord_1042"),
        ("invoice_payment.paid", None),
    ],
)
def test_every_announcement_of_one_payment_names_the_payment_intent(
    fixture: str, order_id: str | None
) -> None:
    effect = effect_of(fixture)

    assert effect.transition is Transition.PAID
    assert effect.external_ref == INTENT
    assert effect.amount == Money(5000, "brl")
    # Without order metadata, the order is found through the payment's binding first.
    assert (effect.order_id, effect.order_lookup[0]) == (order_id, INTENT)


def test_one_payment_announced_three_ways_has_one_key() -> None:
    fixtures = ["payment_intent.succeeded", "charge.succeeded", "invoice_payment.paid"]

    keys = {effect_key(effect_of(fixture), "ord_1042") for fixture in fixtures}

    assert len(keys) == 1


def test_payment_events_register_the_objects_refunds_will_name() -> None:
    assert effect_of("payment_intent.succeeded").registers == (INTENT, CHARGE)
    assert effect_of("charge.succeeded").registers == (INTENT, CHARGE)


def test_legacy_payment_intent_with_embedded_charges_is_read() -> None:
    effect = effect_of("payment_intent.succeeded.2020-08-27")

    assert effect.external_ref == "pi_1HqZk0Jz8fEoYh0NcD4eFgHi"
    assert effect.order_id == "ord_1042"


def test_refund_is_its_own_effect_found_through_its_payment() -> None:
    effect = effect_of("refund.created")

    assert effect.transition is Transition.REFUNDED
    assert effect.external_ref == "re_3QpLqRJz8fEoYh0N1fG3hI4j"
    assert effect.amount == Money(2000, "brl")
    assert (effect.order_id, effect.order_lookup) == (None, (INTENT, CHARGE))


def test_two_partial_refunds_have_two_keys() -> None:
    first = effect_of("refund.created")
    event = json.loads(fixture_text("refund.created"))
    event["data"]["object"]["id"] = "re_3QpLqRJz8fEoYh0N1second"
    second = interpret("stripe", json.dumps(event))
    assert isinstance(second, Effect)

    assert effect_key(first, "ord_1042") != effect_key(second, "ord_1042")


def test_dispute_is_its_own_effect() -> None:
    *_, effect = Interpreters.build()("stripe", fixture_text("charge.dispute.created"))

    assert isinstance(effect, Effect)
    assert effect.transition is Transition.DISPUTED
    assert effect.external_ref == "du_1QpN2ZJz8fEoYh0NjK5lM6nO"
    assert effect.order_lookup == (INTENT, CHARGE)


@pytest.mark.parametrize(
    ("fixture", "reason_mentions"),
    [
        ("charge.refunded", "refund.created"),
        ("customer.created", "no mapped effect"),
    ],
)
def test_events_that_cannot_name_their_effect_are_ignored(
    fixture: str, reason_mentions: str
) -> None:
    assert reason_mentions in no_effect_reason(fixture)


@pytest.mark.parametrize(
    ("fixture", "field", "value", "reason_mentions"),
    [
        ("refund.created", "status", "pending", "pending"),
        ("charge.succeeded", "captured", False, "not captured"),
    ],
)
def test_effects_that_moved_no_money_yet_are_ignored(
    fixture: str, field: str, value: object, reason_mentions: str
) -> None:
    event = json.loads(fixture_text(fixture))
    event["data"]["object"][field] = value

    interpretation = interpret("stripe", json.dumps(event))

    assert isinstance(interpretation, NoEffect)
    assert reason_mentions in interpretation.reason


@pytest.mark.parametrize(
    ("body", "message_mentions"),
    [
        ("not json", "not a Stripe event"),
        ('{"object": "event"}', "id"),
        (
            json.dumps(
                {**json.loads(fixture_text("refund.created")), "data": {"object": {"id": "re_1"}}}
            ),
            "amount",
        ),
    ],
)
def test_malformed_payloads_raise_a_clear_error(body: str, message_mentions: str) -> None:
    with pytest.raises(MalformedEventError, match=message_mentions):
        interpret("stripe", body)


def with_object(fixture: str, **fields: object) -> str:
    event = json.loads(fixture_text(fixture))
    event["data"]["object"].update(fields)
    return json.dumps(event)


def test_a_checkout_paid_with_nothing_to_pay_binds_its_order_and_books_nothing() -> None:
    # A full discount: the session is paid, for zero
    reading = interpret("stripe", with_object("checkout.session.completed.card", amount_total=0))

    assert isinstance(reading, Binding)
    assert (reading.order_id, "paid nothing" in reading.reason) == ("ord_2001", True)


def test_an_invoice_payment_of_zero_is_ignored_with_its_reason() -> None:
    reading = interpret("stripe", with_object("invoice_payment.paid", amount_paid=0))

    assert isinstance(reading, NoEffect)
    assert "paid nothing" in reading.reason


@pytest.mark.parametrize("fixture", ["charge.dispute.created", "refund.created"])
def test_a_dispute_or_refund_of_zero_is_refused_naming_its_amount(fixture: str) -> None:
    with pytest.raises(InvalidMoneyError) as refused:
        interpret("stripe", with_object(fixture, amount=0))

    assert refused.value.field == "data.object.amount"


def test_an_event_stamped_in_milliseconds_is_refused_naming_created() -> None:
    event = {**json.loads(fixture_text("payment_intent.succeeded")), "created": 1_764_460_800_000}

    with pytest.raises(InvalidFieldError) as refused:
        interpret("stripe", json.dumps(event))

    assert refused.value.field == "created"
