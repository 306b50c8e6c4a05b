"""Stripe's money lifecycle on real payload shapes: refunds on every API version, reversals,
disputes and inquiries, nullability, and zero-decimal currencies."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from fixtures.shapes import EVENTS_DIR
from fixtures.stripe import fixture_text
from functions.shared.domain import Effect, Interpretation, Money, NoEffect, Transition, effect_key
from functions.stripe.events import Interpreter
from functions.stripe.models import StripeApiNotConfiguredError

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
    *_, created = read("charge.dispute.funds_withdrawn")
    *_, withdrawn = read("charge.dispute.created", id="du_1QrC8dJz8fEoYh0NtT4uV5wX")

    assert isinstance(created, Effect)
    assert isinstance(withdrawn, Effect)
    assert created.transition is withdrawn.transition is Transition.DISPUTED
    assert effect_key(created, "o") == effect_key(withdrawn, "o")


def test_a_dispute_past_the_inquiry_stage_closes_the_inquiry_it_may_have_been() -> None:
    # Given a dispute seen withdrawing funds (Stripe escalates an inquiry in place)
    readings = read("charge.dispute.funds_withdrawn")

    # Then it closes the inquiry of the same dispute before the funds go: counted after the
    # inquiry's opening, that closes it; before it, the pair is voided and never counts
    assert [(r.transition, r.external_ref) for r in readings if isinstance(r, Effect)] == [
        (Transition.INQUIRY_CLOSED, "du_1QrC8dJz8fEoYh0NtT4uV5wX"),
        (Transition.DISPUTED, "du_1QrC8dJz8fEoYh0NtT4uV5wX"),
    ]


@pytest.mark.parametrize(
    ("fixture", "verdict"),
    [
        ("charge.dispute.closed.won", Transition.DISPUTE_WON),
        ("charge.dispute.funds_reinstated", Transition.DISPUTE_WON),
        ("charge.dispute.closed.lost", Transition.DISPUTE_LOST),
    ],
)
def test_a_verdict_carries_the_opening_it_settles(fixture: str, verdict: Transition) -> None:
    inquiry_closed, opening, closing = read(fixture)

    assert isinstance(inquiry_closed, Effect)
    assert isinstance(opening, Effect)
    assert isinstance(closing, Effect)
    assert (inquiry_closed.transition, opening.transition, closing.transition) == (
        Transition.INQUIRY_CLOSED,
        Transition.DISPUTED,
        verdict,
    )
    assert opening.external_ref == closing.external_ref
    assert opening.delivery.created < closing.delivery.created  # the dispute's own creation


def test_closed_won_and_funds_reinstated_are_one_verdict() -> None:
    keys = {
        effect_key(reading, "o")
        for fixture in ("charge.dispute.closed.won", "charge.dispute.funds_reinstated")
        for reading in read(fixture)
        if isinstance(reading, Effect)
    }

    # The inquiry it may have been, the opening and the verdict, whichever event announces them
    assert len(keys) == 3


def dispute_readings(fixture: str, **fields: Any) -> list[Effect]:
    readings = read(fixture, **fields)
    assert all(isinstance(r, Effect) for r in readings)
    return [r for r in readings if isinstance(r, Effect)]


def withdrawal(amount: int) -> dict[str, Any]:
    return {"amount": -amount, "reporting_category": "dispute", "type": "adjustment"}


def reversal(amount: int) -> dict[str, Any]:
    return {"amount": amount, "reporting_category": "dispute_reversal", "type": "adjustment"}


def test_a_reinstatement_of_a_lost_dispute_is_no_win() -> None:
    # Given funds_reinstated for a dispute Stripe decided against the merchant on a partially
    # refunded charge: 5000 withdrawn, the 2000 refunded before it given back
    readings = dispute_readings(
        "charge.dispute.funds_reinstated",
        status="lost",
        balance_transactions=[withdrawal(5000), reversal(2000)],
    )

    # Then the verdict is the dispute's status (lost, of all it withdrew), and what was given
    # back is its own entry, of what the balance transactions reinstated
    assert [(r.transition, r.amount.minor) for r in readings[1:]] == [
        (Transition.DISPUTED, 5000),
        (Transition.DISPUTE_LOST, 5000),
        (Transition.FUNDS_REINSTATED, 2000),
    ]


def test_what_a_dispute_withdrew_is_what_its_balance_transactions_say() -> None:
    # Given a dispute of 1000 whose withdrawal was 900 (the rest already refunded)
    opened = dispute_readings(
        "charge.dispute.funds_withdrawn", amount=1000, balance_transactions=[withdrawal(900)]
    )
    won = dispute_readings(
        "charge.dispute.closed.won",
        amount=1000,
        balance_transactions=[withdrawal(900), reversal(900)],
    )

    assert opened[-1].amount.minor == 900
    assert [(r.transition, r.amount.minor) for r in won[1:]] == [
        (Transition.DISPUTED, 900),
        (Transition.DISPUTE_WON, 900),
    ]


def test_what_a_dispute_withdrew_counts_only_its_own_currencys_balance_transactions() -> None:
    # Given a dispute of 1000 reais whose withdrawal of 900 came with a withdrawal and a
    # reversal in the account's other currency (dollars: not the order's money)
    in_dollars = [{**withdrawal(5400), "currency": "usd"}, {**reversal(5400), "currency": "usd"}]
    opened = dispute_readings(
        "charge.dispute.funds_withdrawn",
        amount=1000,
        balance_transactions=[{**withdrawal(900), "currency": "brl"}, in_dollars[0]],
    )
    won = dispute_readings(
        "charge.dispute.closed.won",
        amount=1000,
        balance_transactions=[withdrawal(900), reversal(900), *in_dollars],
    )

    # Then only the reais count: 900 withdrawn, and 900 given back
    assert opened[-1].amount == Money(900, "brl")
    assert [(r.transition, r.amount.minor) for r in won[1:]] == [
        (Transition.DISPUTED, 900),
        (Transition.DISPUTE_WON, 900),
    ]


@pytest.mark.parametrize(
    ("fixture", "event_type"),
    [
        ("charge.dispute.created", "charge.dispute.created"),
        ("charge.dispute.closed.won", "charge.dispute.closed"),
        ("charge.dispute.created", "charge.dispute.updated"),
    ],
)
def test_a_prevented_dispute_withdraws_nothing(fixture: str, event_type: str) -> None:
    # Given a dispute Stripe stopped before it was filed (Visa RDR, Order Insight)
    event = json.loads(fixture_text(fixture))
    event["type"] = event_type
    event["data"]["object"].update({"status": "prevented", "balance_transactions": []})

    # Then whichever event says so, no money is counted as withdrawn or open
    [reading] = Interpreter()(json.dumps(event))
    assert isinstance(reading, NoEffect)
    assert "prevented" in reading.reason


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
    *_, dispute = read("charge.dispute.created", metadata=None)

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
