"""Stripe's money lifecycle on real payload shapes: refunds on every API version, reversals,
disputes and inquiries, nullability, and zero-decimal currencies."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from functions.shared.domain import Effect, Interpretation, Money, NoEffect, Transition, effect_key
from functions.shared.providers.stripe import Interpreter, StripeApiNotConfiguredError
from provider_events.shapes import EVENTS_DIR
from provider_events.stripe import fixture_text

CHARGE = "ch_3QpLqRJz8fEoYh0N1Yt9sLq2"
INTENT = "pi_3QpLqRJz8fEoYh0N1kWc2DxT"


def listed_refunds(charge_id: str) -> Sequence[Mapping[str, Any]]:
    assert charge_id == CHARGE
    page: dict[str, Any] = json.loads((EVENTS_DIR / "stripe" / "api.refunds.list.json").read_text())
    return list(page["data"])


def read(name: str, interpreter: Interpreter | None = None, **changes: Any) -> list[Interpretation]:
    event = json.loads(fixture_text(name))
    event["data"]["object"].update(changes)
    return list((interpreter or Interpreter())(json.dumps(event)))


def entries(readings: list[Interpretation]) -> list[tuple[Transition, str, int]]:
    return [
        (r.transition, r.external_ref, r.amount.minor) for r in readings if isinstance(r, Effect)
    ]


def test_legacy_charge_refunded_names_each_embedded_refund() -> None:
    # Given charge.refunded on API 2022-08-01, with its refunds embedded
    readings = read("charge.refunded.2022-08-01")

    # Then each succeeded refund is its own entry, keyed by its re_ id, on the charge's order
    assert [(t, amount) for t, _, amount in entries(readings)] == [
        (Transition.REFUNDED, 2000),
        (Transition.REFUNDED, 1000),
    ]
    assert all(isinstance(r, Effect) and r.order_id == "ord_1042" for r in readings)
    assert all(ref.startswith("re_") for _, ref, _ in entries(readings))


def test_charge_refunded_between_2022_11_15_and_acacia_reads_the_refunds_from_the_api() -> None:
    readings = read("charge.refunded.2023-10-16", Interpreter(refunds=listed_refunds))

    assert entries(readings) == entries(read("charge.refunded.2022-08-01"))


def test_a_refund_announced_both_ways_is_one_entry() -> None:
    [by_event] = read("refund.created")
    by_charge = read("charge.refunded.2023-10-16", Interpreter(refunds=listed_refunds))

    assert isinstance(by_event, Effect)
    keys = {effect_key(r, "ord_1042") for r in by_charge if isinstance(r, Effect)}
    assert effect_key(by_event, "ord_1042") in keys


def test_charge_refunded_naming_no_refund_without_an_api_key_is_never_silently_dropped() -> None:
    with pytest.raises(StripeApiNotConfiguredError, match="api-key"):
        read("charge.refunded.2023-10-16")


def test_refund_that_failed_or_was_canceled_is_a_reversal_of_that_refund() -> None:
    [failed] = read("refund.failed")
    [canceled] = read("refund.updated.canceled")

    assert isinstance(failed, Effect)
    assert isinstance(canceled, Effect)
    assert (failed.transition, failed.external_ref) == (
        Transition.REFUND_REVERSED,
        "re_3QpLqRJz8fEoYh0N1cD5eF6g",
    )
    assert canceled.transition is Transition.REFUND_REVERSED


@pytest.mark.parametrize("status", ["pending", "requires_action", None])
def test_refund_not_yet_succeeded_moves_no_money(status: str | None) -> None:
    [reading] = read("refund.created", status=status)

    assert isinstance(reading, NoEffect)


def test_dispute_opening_and_funds_withdrawn_are_one_entry() -> None:
    [created] = read("charge.dispute.funds_withdrawn")
    [withdrawn] = read("charge.dispute.created", id="du_1QrC8dJz8fEoYh0NtT4uV5wX")

    assert isinstance(created, Effect)
    assert isinstance(withdrawn, Effect)
    assert created.transition is withdrawn.transition is Transition.DISPUTED
    assert effect_key(created, "o") == effect_key(withdrawn, "o")


@pytest.mark.parametrize(
    ("fixture", "verdict"),
    [
        ("charge.dispute.closed.won", Transition.DISPUTE_WON),
        ("charge.dispute.funds_reinstated", Transition.DISPUTE_WON),
        ("charge.dispute.closed.lost", Transition.DISPUTE_LOST),
    ],
)
def test_a_verdict_carries_the_opening_it_settles(fixture: str, verdict: Transition) -> None:
    opening, closing = read(fixture)

    assert isinstance(opening, Effect)
    assert isinstance(closing, Effect)
    assert (opening.transition, closing.transition) == (Transition.DISPUTED, verdict)
    assert opening.external_ref == closing.external_ref
    assert opening.delivery.created < closing.delivery.created  # the dispute's own creation


def test_closed_won_and_funds_reinstated_are_one_verdict() -> None:
    keys = {
        effect_key(reading, "o")
        for fixture in ("charge.dispute.closed.won", "charge.dispute.funds_reinstated")
        for reading in read(fixture)
        if isinstance(reading, Effect)
    }

    assert len(keys) == 2  # the opening and the verdict, whichever event announces them


def test_an_inquiry_is_visible_but_not_disputed_money() -> None:
    [opened] = read("charge.dispute.created.inquiry")
    inquiry_opened, closed = read("charge.dispute.closed.warning_closed")

    assert isinstance(opened, Effect)
    assert opened.transition is Transition.INQUIRY_OPENED
    assert isinstance(closed, Effect)
    assert closed.transition is Transition.INQUIRY_CLOSED
    assert isinstance(inquiry_opened, Effect)
    assert effect_key(inquiry_opened, "o") == effect_key(opened, "o")


def test_an_inquiry_escalating_closes_it_and_withdraws_the_funds() -> None:
    event = json.loads(fixture_text("charge.dispute.created"))
    event["type"] = "charge.dispute.updated"
    event["data"]["previous_attributes"] = {"status": "warning_under_review"}

    readings = Interpreter()(json.dumps(event))

    assert [r.transition for r in readings if isinstance(r, Effect)] == [
        Transition.INQUIRY_OPENED,
        Transition.INQUIRY_CLOSED,
        Transition.DISPUTED,
    ]


def test_null_metadata_and_status_never_make_a_valid_event_malformed() -> None:
    [refund] = read("refund.created", metadata=None, status=None)
    [payment] = read("payment_intent.succeeded", metadata=None, status=None)
    [dispute] = read("charge.dispute.created", metadata=None)

    assert isinstance(refund, NoEffect)
    assert isinstance(payment, Effect)
    assert payment.order_id is None
    assert isinstance(dispute, Effect)


def test_captured_charge_reporting_zero_captured_is_not_a_zero_payment() -> None:
    [payment] = read("charge.succeeded", amount_captured=0, amount=5000, captured=True)

    assert isinstance(payment, Effect)
    assert payment.amount == Money(5000, "brl")


def test_zero_decimal_currency_keeps_stripe_minor_units() -> None:
    [payment] = read("payment_intent.succeeded.jpy")

    assert isinstance(payment, Effect)
    assert payment.amount == Money(1234, "jpy")
