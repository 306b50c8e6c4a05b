"""Asaas and Mercado Pago maps on real payload shapes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from fixtures.shapes import EVENTS_DIR
from functions.process.interpreters import Interpreters
from functions.shared.domain import (
    Effect,
    Interpretation,
    InvalidOrderIdError,
    Money,
    NoEffect,
    Transition,
    effect_key,
)
from functions.shared.errors import MalformedEventError
from functions.shared.money import InvalidFieldError
from tests.support.asaas import AsaasAsDelivered


def asaas_event(name: str, **changes: Any) -> str:
    event = json.loads((EVENTS_DIR / "asaas" / f"{name}.json").read_text())
    event.update(changes)
    return json.dumps(event)


def mercadopago_payment(name: str = "payment", **changes: Any) -> dict[str, Any]:
    payment: dict[str, Any] = json.loads((EVENTS_DIR / "mercadopago" / f"{name}.json").read_text())
    payment.update(changes)
    return payment


NOTIFICATION = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text()


def read(
    provider: str, body: str, payment: Mapping[str, Any] | None = None
) -> list[Interpretation]:
    """What the map reads of `body`: Mercado Pago's payment is `payment`; Asaas's API answers
    the payment as the body carries it (tests of the read itself: the functional ones)."""
    asaas = AsaasAsDelivered()
    interpreters = Interpreters.build(
        mercadopago_payments=lambda payment_id: payment or {}, asaas_payments=asaas
    )
    return list(interpreters(provider, asaas.carried_by(body) if provider == "asaas" else body))


def test_asaas_received_payment_is_paid_in_centavos_at_brazil_time() -> None:
    [effect] = read("asaas", asaas_event("PAYMENT_RECEIVED"))

    assert isinstance(effect, Effect)
    assert (effect.transition, effect.external_ref) == (Transition.PAID, "pay_080225913252")
    assert (effect.amount, effect.order_id) == (Money(5000, "brl"), "ord_1042")
    assert effect.delivery.created == int(datetime(2026, 11, 29, 21, 0, 5, tzinfo=UTC).timestamp())


def test_asaas_confirmed_and_received_are_one_payment() -> None:
    keys = {
        effect_key(effect, "ord_1042")
        for name in ("PAYMENT_CONFIRMED", "PAYMENT_RECEIVED")
        for effect in read("asaas", asaas_event("PAYMENT_RECEIVED", event=name))
        if isinstance(effect, Effect)
    }

    assert len(keys) == 1


def test_asaas_refund_is_its_own_effect() -> None:
    [effect] = read("asaas", asaas_event("PAYMENT_REFUNDED"))

    assert isinstance(effect, Effect)
    assert (effect.transition, effect.external_ref) == (
        Transition.REFUNDED,
        "pay_080225913252:refund:2026-11-30 09:30:10:5000#1",
    )


@pytest.mark.parametrize("name", ["PAYMENT_CREATED", "PAYMENT_OVERDUE"])
def test_asaas_events_without_an_identifiable_effect_are_ignored(name: str) -> None:
    [reading] = read("asaas", asaas_event("PAYMENT_RECEIVED", event=name))

    assert isinstance(reading, NoEffect)


def test_asaas_event_with_a_bad_date_is_malformed() -> None:
    with pytest.raises(MalformedEventError):
        read("asaas", asaas_event("PAYMENT_RECEIVED", dateCreated="29/11/2026"))


def test_mercadopago_approved_payment_is_paid() -> None:
    [effect, release] = read("mercadopago", NOTIFICATION, mercadopago_payment())

    # An approved payment also releases a mediation hold, if one is open (its current state).
    assert isinstance(release, Effect)
    assert release.only_if_open
    assert release.transition is Transition.DISPUTE_WON
    assert isinstance(effect, Effect)
    assert (effect.transition, effect.external_ref) == (Transition.PAID, "1325896547")
    assert (effect.amount, effect.order_id, effect.recipient) == (
        Money(5000, "brl"),
        "ord_1042",
        "cliente@example.com",
    )


def test_mercadopago_refunded_payment_holds_the_payment_and_each_refund() -> None:
    effects = read("mercadopago", NOTIFICATION, mercadopago_payment("payment.refunded"))

    summary = [
        (e.transition, e.external_ref, e.amount.minor)
        for e in effects
        if isinstance(e, Effect) and not e.only_if_open
    ]
    assert summary == [
        (Transition.PAID, "1325896547", 5000),
        (Transition.REFUNDED, "refund:2187654321", 2000),
        (Transition.REFUNDED, "refund:2187654399", 3000),
    ]


def test_mercadopago_chargeback_adds_a_dispute() -> None:
    effects = read("mercadopago", NOTIFICATION, mercadopago_payment(status="charged_back"))

    assert [e.transition for e in effects if isinstance(e, Effect)] == [
        Transition.PAID,
        Transition.DISPUTED,
    ]


def test_mercadopago_dispute_without_the_refunded_total_holds_what_approved_refunds_left() -> None:
    # Given a payment of 50.00 with refunds approved (10.00), rejected (15.00) and in process
    # (5.00), charged back, read without `transaction_amount_refunded`
    payment = mercadopago_payment("payment.refunds_mixed", status="charged_back")
    del payment["transaction_amount_refunded"]

    # When it is read
    effects = read("mercadopago", NOTIFICATION, payment)

    # Then the dispute holds the 40.00 the approved refund left: the others moved no money
    [disputed] = [
        e for e in effects if isinstance(e, Effect) and e.transition is Transition.DISPUTED
    ]
    assert disputed.amount == Money(4000, "brl")


@pytest.mark.parametrize("status", ["pending", "rejected", "cancelled"])
def test_mercadopago_payment_that_moved_no_money_is_ignored(status: str) -> None:
    payment = mercadopago_payment(status=status, date_approved=None)

    [reading] = read("mercadopago", NOTIFICATION, payment)

    assert isinstance(reading, NoEffect)
    assert status in reading.reason


def test_mercadopago_other_topics_are_ignored_without_calling_the_api() -> None:
    body = json.dumps({**json.loads(NOTIFICATION), "type": "merchant_order", "action": None})

    [reading] = Interpreters.build(mercadopago_payments=lambda _: pytest.fail("called"))(
        "mercadopago", body
    )

    assert isinstance(reading, NoEffect)


def test_asaas_refund_event_listing_no_refund_is_malformed_never_guessed() -> None:
    event = json.loads(asaas_event("PAYMENT_REFUNDED"))
    event["payment"]["refunds"] = None

    with pytest.raises(MalformedEventError, match="lists no refund"):
        read("asaas", json.dumps(event))


def mercadopago_effects(**changes: Any) -> list[Effect]:
    readings = read("mercadopago", NOTIFICATION, mercadopago_payment(**changes))
    return [reading for reading in readings if isinstance(reading, Effect)]


def test_mercadopago_numeric_order_id_in_metadata_is_read_as_its_digits() -> None:
    [paid, _] = mercadopago_effects(external_reference=None, metadata={"order_id": 1042})

    assert paid.order_id == "1042"


def test_mercadopago_boolean_order_id_in_metadata_is_refused_naming_it() -> None:
    with pytest.raises(InvalidOrderIdError) as refused:
        mercadopago_effects(external_reference=None, metadata={"order_id": True})

    assert refused.value.field == "payment.metadata.order_id"


@pytest.mark.parametrize("date_approved", [None, "", "29/11/2026", "2026-11-29T18:00:01"])
def test_mercadopago_approved_payment_without_a_usable_approval_is_stamped_at_its_creation(
    date_approved: str | None,
) -> None:
    # A stamp without an offset is no moment: it would be read in the machine's zone
    [paid, _] = mercadopago_effects(date_approved=date_approved)

    created = datetime.fromisoformat(mercadopago_payment()["date_created"])
    assert paid.delivery.created == int(created.timestamp())
    assert paid.note is not None
    assert paid.note.startswith("stamped at date_created")


def test_mercadopago_approved_payment_with_no_usable_date_at_all_is_refused() -> None:
    with pytest.raises(InvalidFieldError) as refused:
        mercadopago_effects(date_approved=None, date_created="never")

    assert "date_approved" in str(refused.value)
    assert refused.value.field == "payment.date_created"


def chargeback_of(**payment_changes: Any) -> list[Effect]:
    """The entries of a PAYMENT_CHARGEBACK_REQUESTED whose payment has `payment_changes`."""
    event = json.loads(asaas_event("PAYMENT_CHARGEBACK_REQUESTED"))
    event["payment"].update(payment_changes)
    return [e for e in read("asaas", json.dumps(event)) if isinstance(e, Effect)]


def test_asaas_chargeback_withdraws_its_own_value_not_the_payments() -> None:
    # Given a payment of 50.00 whose chargeback disputes 30.00 (after a refund of 20.00)
    chargeback = json.loads(asaas_event("PAYMENT_CHARGEBACK_REQUESTED"))["payment"]["chargeback"]

    # When its chargeback is read
    [opened] = chargeback_of(value=50, chargeback={**chargeback, "value": 30})

    # Then the dispute withdraws the chargeback's 30.00
    assert (opened.transition, opened.amount) == (Transition.DISPUTED, Money(3000, "brl"))


def test_asaas_chargeback_without_its_object_withdraws_what_the_refunds_left() -> None:
    # Given a payment of 50.00 with a DONE refund of 20.00 and one still pending, whose event
    # carries no chargeback object
    refunds = [
        {"dateCreated": "2026-11-30 09:12:40", "status": "DONE", "value": 20},
        {"dateCreated": "2026-11-30 10:00:00", "status": "PENDING", "value": 5},
    ]

    # When its chargeback is read
    [opened] = chargeback_of(value=50, chargeback=None, refunds=refunds)

    # Then the dispute withdraws the 30.00 the DONE refund left
    assert opened.amount == Money(3000, "brl")


def test_asaas_chargeback_verdict_settles_the_value_it_withdrew() -> None:
    chargeback = json.loads(asaas_event("PAYMENT_CHARGEBACK_REQUESTED"))["payment"]["chargeback"]

    effects = chargeback_of(value=50, chargeback={**chargeback, "value": 12.5, "status": "DONE"})

    assert [(e.transition, e.amount) for e in effects] == [
        (Transition.DISPUTED, Money(1250, "brl")),
        (Transition.DISPUTE_LOST, Money(1250, "brl")),
    ]


def test_a_chargeback_with_nothing_left_is_said_never_refused() -> None:
    # Given payments refunded in full before their cardholder disputed them
    mercadopago = read(
        "mercadopago",
        NOTIFICATION,
        mercadopago_payment(
            status="charged_back",
            status_detail="in_process",
            transaction_amount=50,
            transaction_amount_refunded=50,
        ),
    )
    refunds = [{"dateCreated": "2026-11-30 09:12:40", "status": "DONE", "value": 50}]
    event = json.loads(asaas_event("PAYMENT_CHARGEBACK_REQUESTED"))
    event["payment"].update(value=50, chargeback=None, refunds=refunds)
    asaas = read("asaas", json.dumps(event))

    # Then no dispute of zero is booked, nor is the notification refused (a refusal would
    # fail every later notification of the payment): the reading says why
    assert not any(
        isinstance(r, Effect) and r.transition is Transition.DISPUTED for r in mercadopago
    )
    assert any(isinstance(r, NoEffect) and "nothing left" in r.reason for r in mercadopago)
    [said] = asaas
    assert isinstance(said, NoEffect)
    assert "nothing left" in said.reason
