"""The guarantees of docs/design.md ("The guarantees"), asserted on the state of the tables.

Each test here is also run against deliberately broken processors
(test_broken_designs_are_caught.py): it must fail for the design it protects against.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from fixtures import stripe
from functions.shared.domain import Outcome
from functions.shared.errors import WriteContendedError
from tests.support.clients import (
    PauseAfterFirstRequest,
    SimulatedCrashError,
    conflicting_once,
    crashing_after,
    intercepted,
)
from tests.support.world import World

T0 = 1_764_460_800
AMOUNT = 5000


def test_same_event_redelivered_and_in_parallel_leaves_state_as_after_the_first(
    world: World,
) -> None:
    # Given a payment delivered once
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)
    assert world.deliver(payment).outcome is Outcome.APPLIED
    after_first = world.snapshot()

    # When the provider delivers it again, then three more times at the same instant
    again = world.deliver(payment)
    racing = world.deliver_in_parallel(payment, copies=3)

    # Then the world is exactly as after the first, and every redelivery was a duplicate
    assert world.snapshot() == after_first
    assert len(world.outbox(order)) == 1
    assert world.order(order).paid_total == AMOUNT
    assert [r.outcome for r in [again, *racing]] == [Outcome.DUPLICATE] * 4


def test_first_deliveries_racing_each_other_apply_once(world: World) -> None:
    # Given a payment nobody has seen yet
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)

    # When eight deliveries of it arrive at the same instant
    outcomes = sorted(r.outcome for r in world.deliver_in_parallel(payment, copies=8))

    # Then exactly one applied it
    assert world.order(order).paid_total == AMOUNT
    assert len(world.outbox(order)) == 1
    assert world.mismatches(order) == []
    assert outcomes == sorted([Outcome.APPLIED] + [Outcome.DUPLICATE] * 7)


def test_redelivery_while_the_first_is_in_flight_is_a_duplicate(world: World) -> None:
    # Given a first delivery that stops right after its first database request
    # (the provider timed out and retried while it was still running)
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)
    pause = PauseAfterFirstRequest()
    first_outcomes = []
    first = threading.Thread(
        target=lambda: first_outcomes.append(world.deliver(payment, pause.wrap(world.dynamodb)))
    )
    first.start()
    assert pause.paused.wait(timeout=10)

    # When the retry runs to the end, and then the first delivery finishes
    retry = world.deliver(payment)
    pause.resume()
    first.join(timeout=10)

    # Then the payment counts once, with one notification
    assert world.order(order).paid_total == AMOUNT
    assert len(world.outbox(order)) == 1
    assert world.mismatches(order) == []
    assert {first_outcomes[0].outcome, retry.outcome} == {Outcome.APPLIED, Outcome.DUPLICATE}


def test_one_payment_announced_by_three_event_types_is_one_effect(world: World) -> None:
    # Given a payment applied from payment_intent.succeeded
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    assert (
        world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0, charge)).outcome
        is Outcome.APPLIED
    )
    after_first = world.snapshot()

    # When charge.succeeded and (basil) invoice_payment.paid announce the same payment
    by_charge = world.deliver(stripe.charge_succeeded(order, intent, charge, AMOUNT, T0))
    by_invoice = world.deliver(stripe.invoice_payment_paid(intent, AMOUNT, T0 + 1))

    # Then nothing changed: both were duplicates of the same effect
    assert world.snapshot() == after_first
    assert (by_charge.outcome, by_invoice.outcome) == (Outcome.DUPLICATE, Outcome.DUPLICATE)
    assert by_charge.effect_key == by_invoice.effect_key


def test_refund_then_older_payment_keeps_the_order_refunded_and_counts_both(world: World) -> None:
    # Given a refund (carrying the order in its metadata) that arrives before its payment
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    refund = stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0 + 60, order_id=order)
    assert world.deliver(refund).outcome is Outcome.APPLIED

    # When the older payment arrives
    late = world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))

    # Then the lifecycle stays refunded, the money of both counts once each, and the late
    # payment is announced too, flagged late
    state = world.order(order)
    assert (state.lifecycle_status, state.financial_status) == ("refunded", "refunded")
    assert (state.paid_total, state.refunded_total) == (AMOUNT, AMOUNT)
    announced = sorted((item["transition"], item["late"]) for item in world.outbox(order))
    assert announced == [("order.paid", True), ("order.refunded", False)]
    assert world.mismatches(order) == []
    assert late.outcome is Outcome.STALE
    assert [d.outcome for d in world.deliveries() if d.order_id == order] == ["stale"]


def test_an_older_payment_that_read_the_order_before_a_newer_refund_landed_is_stale(
    world: World,
) -> None:
    # Given a payment whose read before writing finds no order, and a newer refund (naming the
    # order) that commits right after that read: only the write's guard can see it now
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    refund = stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0 + 60, order_id=order)
    landed: list[Outcome] = []

    def refund_lands_after_the_read(operation: str, call: Callable[[], Any]) -> Any:
        result = call()
        if operation == "batch_get_item" and not landed:
            landed.append(world.deliver(refund).outcome)
        return result

    racing = intercepted(world.dynamodb, refund_lands_after_the_read)

    # When the payment's transaction goes ahead
    late = world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0), racing)

    # Then the refund applied, the payment is stale: the order stays refunded, both count
    state = world.order(order)
    assert (landed, late.outcome) == ([Outcome.APPLIED], Outcome.STALE)
    assert (state.lifecycle_status, state.financial_status) == ("refunded", "refunded")
    assert (state.paid_total, state.refunded_total) == (AMOUNT, AMOUNT)
    assert world.mismatches(order) == []


def test_two_partial_refunds_of_one_charge_are_two_effects(world: World) -> None:
    # Given a paid order
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0, charge))

    # When two partial refunds of its charge arrive, the second in the same second as the first
    first = world.deliver(stripe.refund_created(intent, stripe.unique("re"), 2000, T0 + 60, charge))
    second = world.deliver(
        stripe.refund_created(intent, stripe.unique("re"), 3000, T0 + 60, charge)
    )

    # Then both are applied: two effects, two notifications, the whole amount refunded
    assert world.order(order).refunded_total == 5000
    assert len(world.outbox(order)) == 3
    assert world.mismatches(order) == []
    assert (first.outcome, second.outcome) == (Outcome.APPLIED, Outcome.APPLIED)


def test_second_payment_of_the_same_order_after_a_refund_is_applied(world: World) -> None:
    # Given an order paid and then refunded
    order, first_intent = stripe.unique("ord"), stripe.unique("pi")
    world.deliver(stripe.payment_intent_succeeded(order, first_intent, AMOUNT, T0))
    world.deliver(stripe.refund_created(first_intent, stripe.unique("re"), AMOUNT, T0 + 60))

    # When the customer pays again with a new PaymentIntent
    again = world.deliver(
        stripe.payment_intent_succeeded(order, stripe.unique("pi"), AMOUNT, T0 + 120)
    )

    # Then it is a new effect: the order is paid again and both payments count; of what was
    # paid, part went back
    state = world.order(order)
    assert (state.lifecycle_status, state.financial_status) == ("paid", "partially_refunded")
    assert (state.paid_total, state.refunded_total) == (2 * AMOUNT, AMOUNT)
    assert world.mismatches(order) == []
    assert again.outcome is Outcome.APPLIED


def test_crash_after_commit_before_the_queue_delete_redelivers_as_duplicate(world: World) -> None:
    # Given a delivery whose process dies right after its transaction (request 2, after the
    # read that spares a duplicate its transaction)
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)
    with pytest.raises(SimulatedCrashError):
        world.deliver(payment, crashing_after(world.dynamodb, requests=2))
    after_crash = world.snapshot()

    # When SQS redelivers the undeleted message
    redelivery = world.deliver(payment)

    # Then nothing changed, the effect has its notification, the redelivery was a duplicate
    assert world.snapshot() == after_crash
    assert world.order(order).paid_total == AMOUNT
    assert world.mismatches(order) == []
    assert redelivery.outcome is Outcome.DUPLICATE


def test_transaction_conflict_is_retried_and_applied_once(world: World) -> None:
    # Given a database that cancels the first transaction for a conflict
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)
    before = world.snapshot()
    with pytest.raises(WriteContendedError):
        world.deliver(payment, conflicting_once(world.dynamodb))
    assert world.snapshot() == before

    # When SQS redelivers the failed record, twice
    outcomes = [world.deliver(payment).outcome, world.deliver(payment).outcome]

    # Then it was applied exactly once
    assert world.order(order).paid_total == AMOUNT
    assert world.mismatches(order) == []
    assert outcomes == [Outcome.APPLIED, Outcome.DUPLICATE]
