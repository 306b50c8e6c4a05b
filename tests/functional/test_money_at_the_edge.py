"""Money that is not money is never booked: each mangled field fails its own record, named,
while the rest of the batch applies (the process Lambda as SQS calls it, on moto)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from fixtures import stripe
from fixtures.lambda_events import sqs_record
from fixtures.shapes import shape
from tests.support.batches import BatchRun, invalid_money, run_batch
from tests.support.pipeline import Pipeline, pipeline_on_moto

T0 = 1_764_460_800
PAYMENT_IDS = itertools.count(7_100_000_001)


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    with pipeline_on_moto(monkeypatch) as running:
        yield running


def record(provider: str, body: str) -> dict[str, Any]:
    return sqs_record(body, {"provider": provider, "event_id": str(json.loads(body)["id"])})


def stripe_payment(order: str, amount: int = 5000, currency: str = "brl") -> str:
    return stripe.payment_intent_succeeded(order, stripe.unique("pi"), amount, T0, None, currency)


def changed(body: str, **fields: Any) -> str:
    """A Stripe event whose object has these fields set as they arrived (any JSON type)."""
    event = json.loads(body)
    event["data"]["object"].update(fields)
    return json.dumps(event)


def mercadopago(pipeline: Pipeline, order: str, **changes: Any) -> dict[str, Any]:
    """A notification of a payment Mercado Pago's API answers with these fields changed."""
    payment = shape("mercadopago/payment.json")
    payment_id = next(PAYMENT_IDS)
    payment.update({"id": payment_id, "external_reference": order, "metadata": {}, **changes})
    pipeline.apis.payments[str(payment_id)] = payment
    notification = shape("mercadopago/payment.updated.json")
    notification.update({"id": payment_id * 10, "data": {"id": str(payment_id)}})
    return record("mercadopago", json.dumps(notification))


def asaas(pipeline: Pipeline, order: str, **changes: Any) -> dict[str, Any]:
    """An Asaas payment webhook; Asaas's API answers the payment as it carries it."""
    event = shape("asaas/PAYMENT_RECEIVED.json")
    event["id"] = stripe.unique("evt_asaas")
    event["payment"].update({"id": stripe.unique("pay"), "externalReference": order, **changes})
    pipeline.apis.asaas_payments[event["payment"]["id"]] = event["payment"]
    return record("asaas", json.dumps(event))


def good_payments() -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    first, last = stripe.unique("ord"), stripe.unique("ord")
    return (first, record("stripe", stripe_payment(first))), (
        last,
        record("stripe", stripe_payment(last)),
    )


def between_good_payments(pipeline: Pipeline, bad: dict[str, Any]) -> BatchRun:
    """The bad record in the middle of a batch of good ones; returns the run after checking
    that the good ones applied, whatever became of the bad one."""
    (first, before), (last, after) = good_payments()
    run = run_batch(before, bad, after)
    assert [pipeline.world.order(order).paid_total for order in (first, last)] == [
        5000,
        5000,
    ]
    assert before["messageId"] not in run.failed
    assert after["messageId"] not in run.failed
    return run


def assert_failed_alone_naming(run: BatchRun, bad: dict[str, Any], field: str) -> None:
    assert run.failed == {bad["messageId"]}
    failure = run.failure(bad["messageId"])
    assert failure["field"] == field
    assert failure["reason"].startswith(f"{field}: ")


# -- Stripe sends integers of minor units, nothing else -------------------------------------


@pytest.mark.parametrize(
    "amount",
    ["20.00", "2000", True, 20.0, 2**63, 10**15, 0, -2000],
    ids=["decimal-text", "integer-text", "true", "float", "2^63", "10^15", "zero", "negative"],
)
def test_a_stripe_payment_whose_amount_is_not_minor_units_fails_alone_naming_it(
    pipeline: Pipeline, amount: object
) -> None:
    # Given a batch of payments, one of which carries an amount that is no integer of minor
    # units within the bound (a string, a boolean, a float, an absurd magnitude, zero)
    order = stripe.unique("ord")
    bad = record("stripe", changed(stripe_payment(order), amount_received=amount))

    # When the process Lambda receives the batch
    run = between_good_payments(pipeline, bad)

    # Then only that record fails, its reason naming the field, and nothing of it is booked
    assert_failed_alone_naming(run, bad, "data.object.amount_received")
    assert pipeline.world.find_order(order) is None
    assert invalid_money(pipeline.world) == []


def test_a_stripe_refund_of_zero_fails_alone_naming_its_amount(pipeline: Pipeline) -> None:
    # Given a refund of nothing, naming its order
    order = stripe.unique("ord")
    body = stripe.refund_created(stripe.unique("pi"), stripe.unique("re"), 0, T0, order_id=order)
    bad = record("stripe", body)

    # When it arrives between good payments
    run = between_good_payments(pipeline, bad)

    # Then it fails alone, naming the amount, and no refund of zero is booked
    assert_failed_alone_naming(run, bad, "data.object.amount")
    assert pipeline.world.find_order(order) is None


def test_a_paid_invoice_of_zero_is_recorded_as_ignored_with_its_reason(
    pipeline: Pipeline,
) -> None:
    # Given a legacy invoice paid with nothing to pay (a trial, a full coupon)
    order = stripe.unique("ord")
    event = shape("stripe/invoice.payment_succeeded.2024-06-20.json")
    event["id"] = stripe.unique("evt")
    event["data"]["object"].update(
        {"amount_paid": 0, "metadata": {"order_id": order}, "payment_intent": stripe.unique("pi")}
    )
    zero = record("stripe", json.dumps(event))

    # When it arrives between good payments
    run = between_good_payments(pipeline, zero)

    # Then it is acknowledged as ignored, recorded with why, and books no entry
    assert zero["messageId"] not in run.failed
    [delivery] = [d for d in pipeline.world.deliveries() if d.event_id == event["id"]]
    assert delivery.outcome == "ignored"
    assert "nothing" in delivery.reason
    assert pipeline.world.find_order(order) is None


# -- currencies: ISO 4217, one case -----------------------------------------------------------


# "\u212aWD": a Kelvin sign, which lower-cases to "kwd" but is no ISO 4217 code
@pytest.mark.parametrize("currency", ["xxx", "XTS", "zzz", "", "us", "usd ", "\u212aWD"])
def test_a_currency_outside_iso_4217_fails_alone_naming_it(
    pipeline: Pipeline, currency: str
) -> None:
    # Given a payment in something that is no currency
    order = stripe.unique("ord")
    bad = record("stripe", changed(stripe_payment(order), currency=currency))

    # When it arrives between good payments
    run = between_good_payments(pipeline, bad)

    # Then it fails alone, naming the currency, and nothing of it is booked
    assert_failed_alone_naming(run, bad, "data.object.currency")
    assert pipeline.world.find_order(order) is None


def test_an_upper_case_currency_is_the_same_currency_as_the_ledgers(pipeline: Pipeline) -> None:
    # Given an order paid in "usd", then refunded by an event that says "USD"
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, T0, currency="usd")
    refund = changed(
        stripe.refund_created(intent, stripe.unique("re"), 2000, T0 + 60), currency="USD"
    )

    # When both arrive in one batch
    run = run_batch(record("stripe", paid), record("stripe", refund))

    # Then both count, in one currency, in the ledger's case
    assert run.failed == set()
    state = pipeline.world.order(order)
    assert (state.currency, state.paid_total, state.refunded_total) == ("usd", 5000, 2000)
    assert {entry.currency for entry in pipeline.world.effects(order)} == {"usd"}
    assert state.financial_status == "partially_refunded"


# -- Mercado Pago and Asaas send decimals of major units ------------------------------------


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"transaction_amount": 10**39}, "payment.transaction_amount"),
        ({"transaction_amount": 10**15}, "payment.transaction_amount"),
        ({"transaction_amount": 19.999}, "payment.transaction_amount"),
        ({"transaction_amount": "NaN"}, "payment.transaction_amount"),
        ({"transaction_amount": True}, "payment.transaction_amount"),
        ({"transaction_amount": 0}, "payment.transaction_amount"),
        ({"currency_id": "CLP", "transaction_amount": 5000.5}, "payment.transaction_amount"),
        ({"currency_id": "XXX"}, "payment.currency_id"),
    ],
    ids=["10^39", "10^15", "three-decimals", "nan", "true", "zero", "clp-decimals", "xxx"],
)
def test_a_mercadopago_amount_that_is_not_money_fails_alone_naming_it(
    pipeline: Pipeline, changes: dict[str, Any], field: str
) -> None:
    # Given Mercado Pago answers a notified payment with an amount or currency that is not
    # money (past DynamoDB's 38 digits too: refused before any rounding could happen)
    order = stripe.unique("ord")
    bad = mercadopago(pipeline, order, **changes)

    # When the notification arrives between good payments
    run = between_good_payments(pipeline, bad)

    # Then it fails alone, naming the field, and nothing of it is booked
    assert_failed_alone_naming(run, bad, field)
    assert pipeline.world.find_order(order) is None
    assert invalid_money(pipeline.world) == []


@pytest.mark.parametrize(
    "value", [10**15, "1e3", 50.001, False, 0], ids=["10^15", "exponent", "mills", "false", "zero"]
)
def test_an_asaas_value_that_is_not_money_fails_alone_naming_it(
    pipeline: Pipeline, value: object
) -> None:
    # Given an Asaas payment whose value is not an amount of reais
    order = stripe.unique("ord")
    bad = asaas(pipeline, order, value=value)

    # When it arrives between good payments
    run = between_good_payments(pipeline, bad)

    # Then it fails alone, naming the value, and nothing of it is booked
    assert_failed_alone_naming(run, bad, "payment.value")
    assert pipeline.world.find_order(order) is None


# -- order ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "order_id",
    ["   ", "ord\x00x", "ord\x1fx", "x" * 2000, "ORDER#x", " ord_1042"],
    ids=["blank", "nul", "unit-separator", "2000-chars", "key-prefix", "padded"],
)
def test_an_order_id_that_cannot_be_an_order_fails_alone_naming_it(
    pipeline: Pipeline, order_id: str
) -> None:
    # Given a payment naming an order id no order can have, from each provider
    stripe_bad = record("stripe", stripe_payment(order_id))
    mercadopago_bad = mercadopago(pipeline, order_id)
    asaas_bad = asaas(pipeline, order_id)

    # When they arrive between good payments
    runs = [
        between_good_payments(pipeline, bad) for bad in (stripe_bad, mercadopago_bad, asaas_bad)
    ]

    # Then each fails alone, naming the field, and no order holds them
    assert_failed_alone_naming(runs[0], stripe_bad, "data.object.metadata.order_id")
    assert_failed_alone_naming(runs[1], mercadopago_bad, "payment.external_reference")
    assert_failed_alone_naming(runs[2], asaas_bad, "payment.externalReference")
    assert pipeline.world.find_order(order_id) is None
    assert all(d.order_id != order_id for d in pipeline.world.deliveries())


# -- Mercado Pago: an approved payment is never acknowledged silently -----------------------


@pytest.mark.parametrize("date_approved", [None, "", "yesterday"], ids=["null", "empty", "garbage"])
def test_an_approved_payment_without_a_usable_approval_date_is_paid_at_its_creation(
    pipeline: Pipeline, date_approved: str | None
) -> None:
    # Given Mercado Pago answers an approved payment whose date_approved is unusable
    order = stripe.unique("ord")
    notified = mercadopago(pipeline, order, date_approved=date_approved)

    # When its notification arrives between good payments
    run = between_good_payments(pipeline, notified)

    # Then the payment is applied, stamped at date_created (which the approval cannot
    # precede), and the entry records which date it took and why
    assert notified["messageId"] not in run.failed
    assert pipeline.world.order(order).paid_total == 5000
    [entry] = pipeline.world.effects(order)
    created = datetime.fromisoformat(shape("mercadopago/payment.json")["date_created"])
    assert entry.event_created == int(created.timestamp())
    assert str(entry.note).startswith("stamped at date_created")
    assert "date_approved" in str(entry.note)
