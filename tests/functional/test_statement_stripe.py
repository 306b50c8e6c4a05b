"""Stripe's balance transactions as a second way in and as the oracle of the ledger
(functions/statement/): each movement booked once whichever way came first, every mismatch
reported by kind, fees and net on the order. Held to the state of the tables afterwards."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import boto3
import pytest

from fixtures import stripe
from functions.outbox.channels import EventBridgeChannel
from functions.outbox.sender import OutboxSender, SendResult
from functions.shared.domain import Outcome
from functions.statement.report import (
    AMOUNT_DIFFERS,
    ENTRY_UNKNOWN,
    MOVEMENT_MISSING,
    StatementReport,
)
from functions.statement.service import StatementPass
from functions.statement.stripe import line_of
from functions.stripe.balance import ListedBalanceTransaction
from tests.support.clients import RequestCounter, conflicting_once
from tests.support.clock import FakeClock
from tests.support.sinks import Sinks
from tests.support.world import World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800
WINDOW = (T0 - 3600, T0 + 3600)
# DynamoDB requests a line costs (docs/statement.md, "Cost"): measured here, on moto.
STATEMENT_REQUESTS: dict[str, dict[str, int]] = {
    "already booked": {"BatchGetItem": 2, "Query": 2, "TransactWriteItems": 1, "PutItem": 1},
    "booked now": {"BatchGetItem": 2, "Query": 2, "TransactWriteItems": 2, "PutItem": 1},
}


def statement(world: World, clock: FakeClock, *lines: dict[str, Any]) -> StatementReport:
    """The window's statement read (through JSON, as the API answers it) and passed."""
    read = [
        line_of(ListedBalanceTransaction.model_validate(json.loads(json.dumps(t)))) for t in lines
    ]
    passed = StatementPass(world.dynamodb, world.tables, world.processor(), clock)
    return passed.run("stripe", read, *WINDOW)


def kinds(report: StatementReport) -> list[str]:
    return sorted(m.kind for m in report.mismatches)


@pytest.fixture
def ids() -> tuple[str, str, str]:
    return stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")


def test_a_payment_no_webhook_brought_is_booked_once_by_the_statement_with_its_fee(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a payment Stripe moved (5000, fee 245) whose webhooks never arrived
    order, intent, charge = ids
    paid = stripe.charge_succeeded(order, intent, charge, 5000, T0)
    line = stripe.balance_transaction(paid, "charge", 5000, fee=245)

    # When the window's statement is passed, twice
    first = statement(world, clock, line)
    second = statement(world, clock, line)

    # Then the payment is booked once, announced once as found by the statement, with Stripe's
    # fee and net on the order; the second pass finds it booked and matches
    assert (first.booked, first.mismatches) == (1, [])
    assert (second.booked, second.already_booked, second.mismatches) == (0, 1, [])
    state = world.order(order)
    assert (state.paid_total, state.fee_total, state.net_total) == (5000, 245, 4755)
    assert state.settlement_currency == "brl"
    [announced] = world.outbox(order)
    assert announced["found_by_statement"] is True
    [entry] = world.effects(order)
    assert (entry.via, entry.event_id) == ("statement", line["id"])


def test_a_payment_the_webhook_booked_is_a_duplicate_and_a_late_webhook_changes_nothing(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a payment booked by its webhook
    order, intent, charge = ids
    paid = stripe.charge_succeeded(order, intent, charge, 5000, T0)
    world.deliver(paid)

    # When the statement holds its line, and the webhook is delivered again afterwards
    report = statement(world, clock, stripe.balance_transaction(paid, "charge", 5000, fee=245))
    again = world.deliver(stripe.with_new_event_id(paid))

    # Then nothing is booked twice; the fee is on the order; one announcement, not flagged
    assert (report.booked, report.already_booked, report.mismatches) == (0, 1, [])
    assert again.outcome is Outcome.DUPLICATE
    state = world.order(order)
    assert (state.paid_total, state.fee_total, state.net_total) == (5000, 245, 4755)
    [announced] = world.outbox(order)
    assert announced["found_by_statement"] is False


def test_a_webhook_booked_after_the_statement_is_a_duplicate(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a refund the statement booked first (its payment booked by its webhook)
    order, intent, charge = ids
    world.deliver(stripe.charge_succeeded(order, intent, charge, 5000, T0))
    refund = stripe.unique("re")
    refunded = stripe.refund_created(intent, refund, 2000, T0 + 60, charge)
    report = statement(world, clock, stripe.balance_transaction(refunded, "refund", 2000))

    # When the refund's webhook arrives at last
    late = world.deliver(refunded)

    # Then the refund counted once
    assert report.booked == 1
    assert late.outcome is Outcome.DUPLICATE
    assert world.order(order).refunded_total == 2000
    assert world.order(order).net_total == -2000


def test_captures_the_webhooks_missed_are_booked_and_a_halved_amount_is_reported_not_topped_up(
    world: World, clock: FakeClock
) -> None:
    # Given a payment captured twice (4000, then 6000 more) whose second capture's webhooks
    # were lost, and another payment booked at half what Stripe moved (a mis-map)
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.charge_captured(order, intent, charge, 10000, 4000, T0))
    captured = stripe.charge_captured(order, intent, charge, 10000, 10000, T0 + 60)
    halved_order, halved_intent, halved_charge = (stripe.unique(p) for p in ("ord", "pi", "ch"))
    moved = stripe.charge_succeeded(halved_order, halved_intent, halved_charge, 5000, T0)
    misread = json.loads(moved)
    misread["data"]["object"]["amount_captured"] = misread["data"]["object"]["amount"] = 2500
    world.deliver(json.dumps(misread))

    # When the statement lists each capture's line and the other payment's
    report = statement(
        world,
        clock,
        stripe.balance_transaction(captured, "charge", 4000, created=T0),
        stripe.balance_transaction(captured, "charge", 6000, created=T0 + 60),
        stripe.balance_transaction(moved, "charge", 5000, fee=200),
    )

    # Then the missed capture is booked (10000 in all), and the halved payment is reported
    # as amounts differing, its books left as they were for a person to look at
    assert world.order(order).paid_total == 10000
    assert kinds(report) == [AMOUNT_DIFFERS]
    assert report.mismatches[0].order_id == halved_order
    assert world.order(halved_order).paid_total == 2500


def test_a_forged_delivery_is_an_entry_unknown_to_the_provider(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a genuine payment, and a payment Stripe never moved booked by a forged delivery
    order, intent, charge = ids
    paid = stripe.charge_succeeded(order, intent, charge, 5000, T0)
    world.deliver(paid)
    forged_order = stripe.unique("ord")
    world.deliver(stripe.payment_intent_succeeded(forged_order, stripe.unique("pi"), 9900, T0 + 30))

    # When the window's statement (holding only the genuine one) is passed
    report = statement(world, clock, stripe.balance_transaction(paid, "charge", 5000))

    # Then the forged entry alone is reported, by kind, and left booked for a person
    assert kinds(report) == [ENTRY_UNKNOWN]
    assert report.mismatches[0].order_id == forged_order
    assert report.entries_checked == 2


def test_a_movement_the_statement_cannot_book_is_reported_missing(
    world: World, clock: FakeClock
) -> None:
    # Given a refund of a payment bound to no order (no metadata, no webhook ever bound it),
    # and a line listed without its source expanded
    refunded = stripe.refund_created(stripe.unique("pi"), stripe.unique("re"), 1500, T0)
    unexpanded = stripe.balance_transaction(refunded, "refund", 1500)
    unexpanded["source"] = stripe.unique("re")

    # When the statement is passed
    report = statement(
        world, clock, stripe.balance_transaction(refunded, "refund", 1500), unexpanded
    )

    # Then both are reported as movements missing from the ledger, and nothing was booked
    assert kinds(report) == [MOVEMENT_MISSING, MOVEMENT_MISSING]
    assert report.booked == 0
    assert world.outbox() == []


def test_a_pending_refund_and_a_payout_book_nothing_and_report_nothing(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a booked payment, a refund of it still pending, and a payout
    order, intent, charge = ids
    paid = stripe.charge_succeeded(order, intent, charge, 5000, T0)
    world.deliver(paid)
    pending = json.loads(stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, charge))
    pending["data"]["object"]["status"] = "pending"
    payout = stripe.balance_transaction(paid, "charge", 5000)
    payout.update({"reporting_category": "payout", "type": "payout", "source": stripe.unique("po")})

    # When the statement is passed
    report = statement(
        world,
        clock,
        stripe.balance_transaction(paid, "charge", 5000),
        stripe.balance_transaction(json.dumps(pending), "refund", 1000),
        payout,
    )

    # Then the refund waits for its success and the payout is no order's: nothing reported
    assert (report.pending, report.movements, report.mismatches) == (1, 2, [])
    assert world.order(order).refunded_total == 0


def test_the_eventbridge_detail_of_a_movement_found_by_the_statement_carries_fee_and_net(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a payment only the statement booked (5000, fee 245)
    order, intent, charge = ids
    paid = stripe.charge_succeeded(order, intent, charge, 5000, T0)
    statement(world, clock, stripe.balance_transaction(paid, "charge", 5000, fee=245))
    [item] = world.outbox(order)
    sinks = Sinks()

    # When its notification is sent to EventBridge
    sent = OutboxSender(
        world.dynamodb,
        world.tables.outbox,
        [EventBridgeChannel(boto3.client("events"), sinks.bus_name)],
        clock,
        ledger_table=world.tables.ledger,
    ).first_try(item["outbox_id"], order)

    # Then the merchant reads that no webhook brought it, and what Stripe kept and paid out
    assert sent.result is SendResult.SENT
    assert sinks.events_by_key() == {item["outbox_id"]: 1}
    detail = sinks.details[item["outbox_id"]]
    assert (detail["found_by_statement"], detail["fee_total"], detail["net_total"]) == (
        True,
        245,
        4755,
    )
    assert detail["settlement_currency"] == "brl"


def test_a_payment_whose_charge_names_another_order_is_found_on_its_bound_order_and_reported(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a payment bound to its order, whose charge copied another order's id (the
    # conflict its deliveries reported)
    order, intent, charge = ids
    world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0, charge))
    other = stripe.unique("ord")
    copied = stripe.charge_succeeded(other, intent, charge, 5000, T0)

    # When the statement lists the charge as Stripe expands it (naming the other order)
    report = statement(world, clock, stripe.balance_transaction(copied, "charge", 5000, fee=245))

    # Then the movement is found booked on the bound order, with its fee; the other order
    # is never credited, and the statement says the movement is missing from it (whether the
    # charge or the binding is right, a person decides)
    assert (report.already_booked, kinds(report)) == (1, [MOVEMENT_MISSING])
    assert report.mismatches[0].order_id == other
    assert world.order(order).fee_total == 245
    assert world.find_order(other) is None


def test_a_fee_whose_recording_meets_a_conflict_is_recorded_once_on_the_retry(
    world: World, clock: FakeClock, ids: tuple[str, str, str]
) -> None:
    # Given a payment its webhook booked, and a ledger whose next transaction is cancelled by
    # a conflict (as under contention)
    order, intent, charge = ids
    paid = stripe.charge_succeeded(order, intent, charge, 5000, T0)
    world.deliver(paid)
    line = line_of(
        ListedBalanceTransaction.model_validate(
            stripe.balance_transaction(paid, "charge", 5000, fee=245)
        )
    )
    contended = conflicting_once(world.dynamodb)

    # When the statement records its fee through it, then runs again
    StatementPass(contended, world.tables, world.processor(), clock).run("stripe", [line], *WINDOW)
    once = world.order(order).fee_total
    StatementPass(world.dynamodb, world.tables, world.processor(), clock).run(
        "stripe", [line], *WINDOW
    )

    # Then the fee counted at once (the conflict retried, not taken for "recorded before"),
    # and only once
    assert once == 245
    assert (world.order(order).fee_total, world.order(order).net_total) == (245, 4755)


def test_a_line_costs_a_few_requests_whether_the_webhooks_booked_it_or_not(
    world: World, clock: FakeClock, dynamodb: DynamoDBClient
) -> None:
    # Given two payments, one booked by its webhook, and a client that counts requests
    booked, missed = (
        (stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")),
        (
            stripe.unique("ord"),
            stripe.unique("pi"),
            stripe.unique("ch"),
        ),
    )
    paid = {ids: stripe.charge_succeeded(*ids, 5000, T0) for ids in (booked, missed)}
    world.deliver(paid[booked])
    counter = RequestCounter(dynamodb)
    processor = world.make_processor(dynamodb, world.tables)

    # When each payment's line is passed on its own, checking its order only
    def requests_of(ids: tuple[str, str, str]) -> dict[str, int]:
        line = line_of(
            ListedBalanceTransaction.model_validate(
                stripe.balance_transaction(paid[ids], "charge", 5000, fee=245)
            )
        )
        counter.reset()
        StatementPass(dynamodb, world.tables, processor, clock).run(
            "stripe", [line], *WINDOW, orders=[ids[0]]
        )
        return dict(counter.by_operation)

    # Then a line already booked costs its binding read, the processor's read, the payment's
    # entries (its captures), the fee's transaction; and, once a pass, the order's entries
    # (the match) and the run's record. One booked now: the effect's transaction too
    assert requests_of(booked) == STATEMENT_REQUESTS["already booked"]
    assert requests_of(missed) == STATEMENT_REQUESTS["booked now"]


def test_payments_booked_side_by_side_leave_the_books_one_worker_leaves(
    world: World, clock: FakeClock
) -> None:
    # Given twelve payments no webhook brought, each refunded in part, and a forged one booked
    lines, orders = [], []
    for n in range(12):
        order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
        paid = stripe.charge_succeeded(order, intent, charge, 5000 + n, T0 + n)
        refund = stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60 + n, charge)
        lines += [
            stripe.balance_transaction(paid, "charge", 5000 + n, fee=245),
            stripe.balance_transaction(refund, "refund", 1000),
        ]
        orders.append(order)
    forged_order = stripe.unique("ord")
    world.deliver(
        stripe.charge_succeeded(forged_order, stripe.unique("pi"), stripe.unique("ch"), 700, T0)
    )
    read = [
        line_of(ListedBalanceTransaction.model_validate(json.loads(json.dumps(t)))) for t in lines
    ]

    # When the window is passed by eight workers at once, then again by one
    side_by_side = StatementPass(world.dynamodb, world.tables, world.processor(), clock, workers=8)
    first = side_by_side.run("stripe", read, *WINDOW)
    again = StatementPass(world.dynamodb, world.tables, world.processor(), clock).run(
        "stripe", read, *WINDOW
    )

    # Then each payment and refund was booked once with its fee, the forgery reported once, and
    # the second pass (one at a time) finds everything booked
    assert (first.booked, first.lines_read, first.fees_recorded) == (24, 24, 24)
    assert [(m.kind, m.order_id) for m in first.mismatches] == [(ENTRY_UNKNOWN, forged_order)]
    assert (again.booked, again.already_booked, again.fees_recorded) == (0, 24, 0)
    for n, order in enumerate(orders):
        state = world.order(order)
        assert (state.paid_total, state.refunded_total) == (5000 + n, 1000)
        assert state.fee_total == 245
        assert len(world.outbox(order)) == 2
