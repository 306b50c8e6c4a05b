"""Mercado Pago's payments search as the statement (functions/statement/mercadopago.py): a
payment whose notifications never came booked once, its refunds each their own line, fees and
net from the payment itself, every mismatch by kind. Held to the tables afterwards."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from fixtures.shapes import shape, unique
from functions.process.interpreters import Interpreters
from functions.process.mercadopago_disputes import LedgerDisputes
from functions.process.service import EffectProcessor, Processed
from functions.shared.domain import Outcome
from functions.statement.mercadopago import outside_payments_search, payment_lines
from functions.statement.report import (
    AMOUNT_DIFFERS,
    ENTRY_UNKNOWN,
    MOVEMENT_MISSING,
    StatementReport,
)
from functions.statement.service import StatementPass
from tests.support.clock import FakeClock
from tests.support.world import World

UPDATED = 1_795_989_604  # payment.json's date_last_updated, 2026-11-29T18:00:04-04:00
WINDOW = (UPDATED - 86_400, UPDATED + 86_400)


def payment(order: str, fixture: str = "payment", **fields: Any) -> dict[str, Any]:
    """A payment as Mercado Pago's API answers it, with what Mercado Pago kept of it (its Pix
    fee, the collector's), for `order`."""
    answered = shape(f"mercadopago/{fixture}.json")
    answered.update(
        {
            "id": int(unique("mp").removeprefix("mp_test")),
            "metadata": {"order_id": order},
            "external_reference": order,
            "fee_details": [{"amount": 0.5, "fee_payer": "collector", "type": "mercadopago_fee"}],
            "transaction_details": {"net_received_amount": 49.5, "total_paid_amount": 50},
        }
    )
    answered.update(fields)
    return answered


def processor(world: World, clock: FakeClock, answers: Mapping[str, Any]) -> EffectProcessor:
    """The process Lambda's, reading each payment as `answers` holds it."""
    interpreters = Interpreters.build(
        mercadopago_payments=lambda payment_id: answers[payment_id],
        mercadopago_disputes=LedgerDisputes(world.dynamodb, world.tables.ledger),
    )
    return EffectProcessor(world.dynamodb, world.tables, clock, interpreters)


def notification_of(answered: dict[str, Any]) -> str:
    """The notification Mercado Pago sends when the payment changes."""
    body: dict[str, Any] = {"action": "payment.updated", "type": "payment", "id": unique("n")}
    body |= {"data": {"id": str(answered["id"])}, "date_created": answered["date_last_updated"]}
    return json.dumps(body)


def notified(world: World, clock: FakeClock, answered: dict[str, Any]) -> list[Processed]:
    """Its notification delivered, the API answering the payment as `answered`."""
    answers = {str(answered["id"]): answered}
    return processor(world, clock, answers).process("mercadopago", notification_of(answered))


def statement(world: World, clock: FakeClock, *payments: dict[str, Any]) -> StatementReport:
    disputes = LedgerDisputes(world.dynamodb, world.tables.ledger)
    lines = payment_lines([json.loads(json.dumps(p)) for p in payments], disputes)
    passing = StatementPass(world.dynamodb, world.tables, processor(world, clock, {}), clock)
    return passing.run("mercadopago", lines, *WINDOW)


@pytest.fixture
def order(clock: FakeClock) -> str:
    clock.now = UPDATED + 600  # the payments' own time: the ledger records them then
    return unique("ord")


def test_a_payment_never_notified_is_booked_once_with_its_fee_and_net(
    world: World, clock: FakeClock, order: str
) -> None:
    # Given an approved payment whose notifications never arrived
    approved = payment(order)

    # When the payments search lists it, in two passes
    first, second = statement(world, clock, approved), statement(world, clock, approved)

    # Then it is booked once, found by the statement, with what Mercado Pago kept and paid out
    assert (first.booked, first.mismatches, second.booked, second.already_booked) == (1, [], 0, 1)
    state = world.order(order)
    assert (state.paid_total, state.fee_total, state.net_total) == (5000, 50, 4950)
    [announced] = world.outbox(order)
    assert announced["found_by_statement"] is True


def test_refunds_no_notification_brought_are_booked_each_once_and_net_falls_by_them(
    world: World, clock: FakeClock, order: str
) -> None:
    # Given a payment notified while approved, then refunded twice (20 and 30) in silence
    approved = payment(order)
    notified(world, clock, approved)
    refunded = payment(order, "payment.refunded", id=approved["id"])
    refunded.update({k: approved[k] for k in ("fee_details", "transaction_details")})

    # When the search lists it as it is now
    report = statement(world, clock, refunded)

    # Then the two refunds are booked, the payment matched, and net is what is left
    assert (report.booked, report.already_booked, report.mismatches) == (2, 1, [])
    state = world.order(order)
    assert (state.paid_total, state.refunded_total) == (5000, 5000)
    assert (state.fee_total, state.net_total) == (50, 4950 - 5000)
    refund = next(e for e in world.effects(order) if e.transition == "order.refunded")
    assert refund.via == "statement"
    # and their notification, arriving at last, is a duplicate of each
    again = [p.outcome for p in notified(world, clock, refunded)]
    assert Outcome.APPLIED not in again
    assert again.count(Outcome.DUPLICATE) == 3


def test_an_amount_read_wrong_is_reported_and_a_payment_the_search_does_not_know_too(
    world: World, clock: FakeClock, order: str
) -> None:
    # Given a payment booked at 25.00 (read wrong) that Mercado Pago moved at 50.00, and a
    # payment booked that Mercado Pago's search does not list at all
    approved = payment(order)
    notified(world, clock, {**approved, "transaction_amount": 25})
    unknown_order = unique("ord")
    notified(world, clock, payment(unknown_order))

    # When the search lists the first only
    report = statement(world, clock, approved)

    # Then each is reported by its kind; neither order's books are changed
    assert sorted(m.kind for m in report.mismatches) == [AMOUNT_DIFFERS, ENTRY_UNKNOWN]
    assert {m.order_id for m in report.mismatches} == {order, unknown_order}
    assert world.order(order).paid_total == 2500


def test_a_payment_that_cannot_be_read_is_a_movement_missing_and_books_nothing(
    world: World, clock: FakeClock, order: str
) -> None:
    # Given a payment whose amount is no amount, and a rejected one (no money moved)
    broken = payment(order, transaction_amount="fifty")
    rejected = payment(unique("ord"), status="rejected", status_detail="cc_rejected_other_reason")

    # When the search lists both
    report = statement(world, clock, broken, rejected)

    # Then the unreadable one is reported, the rejected one is no movement, nothing is booked
    assert [m.kind for m in report.mismatches] == [MOVEMENT_MISSING]
    assert (report.movements, report.booked) == (1, 0)
    assert world.outbox() == []


def order_booked(world: World, clock: FakeClock, order: dict[str, Any]) -> None:
    """Its `order` notification delivered, the Orders API answering it as `order`."""
    interpreters = Interpreters.build(
        mercadopago_payments=lambda _: pytest.fail("an order is not a payment"),
        mercadopago_orders=lambda _: order,
    )
    note = shape("mercadopago/order.notification.json")
    note["data"]["id"] = order["id"]
    EffectProcessor(world.dynamodb, world.tables, clock, interpreters).process(
        "mercadopago", json.dumps(note)
    )


def test_an_order_is_matched_through_the_payments_api_objects_it_names(
    world: World, clock: FakeClock, order: str
) -> None:
    # Given an order booked through `order`, its payment naming its Payments API object
    ordered = shape("mercadopago/order.processed.json")
    ordered["external_reference"] = order
    order_booked(world, clock, ordered)
    reference = ordered["transactions"]["payments"][0]["reference"]["id"]

    # When the payments search lists that payment
    listed = payment(order, id=int(reference), transaction_amount=200)
    report = statement(world, clock, listed)

    # Then it is the order's payment, matched: booked once, no mismatch
    assert (report.booked, report.already_booked, report.mismatches) == (0, 1, [])
    assert world.order(order).paid_total == 20000


def test_an_order_payment_the_search_cannot_list_is_left_to_its_own_api(
    world: World, clock: FakeClock, order: str
) -> None:
    # Given an order booked whose payment names no Payments API object, and one that names an
    # object the search does not list
    unnamed = shape("mercadopago/order.retried.json")
    unnamed["external_reference"] = order
    order_booked(world, clock, unnamed)
    named_elsewhere = shape("mercadopago/order.processed.json")
    other = unique("ord")
    named_elsewhere["external_reference"] = other
    order_booked(world, clock, named_elsewhere)

    # When the search lists neither (the scheduled pass asks what it cannot list)
    disputes = LedgerDisputes(world.dynamodb, world.tables.ledger)
    passing = StatementPass(world.dynamodb, world.tables, processor(world, clock, {}), clock)
    report = passing.run(
        "mercadopago", payment_lines([], disputes), *WINDOW, outside_payments_search
    )

    # Then only the payment the search should have listed is unknown to Mercado Pago
    assert [(m.kind, m.order_id) for m in report.mismatches] == [(ENTRY_UNKNOWN, other)]
