"""Which order a payment belongs to, the way real integrations say it: Checkout Sessions and
subscription invoices bind their payments; first writer wins; a conflict is recorded, never a
second credit."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from fixtures import stripe
from functions.shared.domain import Outcome
from functions.shared.errors import OrderNotYetKnownError
from tests.support.clients import intercepted
from tests.support.world import World

T0 = 1_764_460_800
AMOUNT = 5000
CARD = "checkout.session.completed.card"


def ids() -> tuple[str, str, str]:
    return stripe.unique("ord"), stripe.unique("pi"), stripe.unique("cs")


def test_checkout_paid_is_the_payment_and_its_intent_events_find_the_order(world: World) -> None:
    # Given a card Checkout Session completed and paid; the order is on the session only
    order, intent, session = ids()
    completed = stripe.checkout_session(
        "checkout.session.completed.card", order, intent, session, T0
    )

    # When the session, then its PaymentIntent (no order metadata) arrive
    paid = world.deliver(completed)
    by_intent = world.deliver(stripe.payment_intent_succeeded(None, intent, AMOUNT, T0))

    # Then one payment, on the session's order, announced once
    state = world.order(order)
    assert (paid.outcome, by_intent.outcome) == (Outcome.APPLIED, Outcome.DUPLICATE)
    assert (state.paid_total, state.financial_status) == (AMOUNT, "paid")
    assert len(world.outbox(order)) == 1
    assert world.mismatches(order) == []


def test_payment_intent_before_its_checkout_session_is_applied_once_the_session_arrives(
    world: World,
) -> None:
    order, intent, session = ids()
    early = stripe.payment_intent_succeeded(None, intent, AMOUNT, T0)
    with pytest.raises(OrderNotYetKnownError):
        world.deliver(early)

    world.deliver(stripe.checkout_session(CARD, order, intent, session, T0))
    redelivered = world.deliver(early)

    assert redelivered.outcome is Outcome.DUPLICATE
    assert world.order(order).paid_total == AMOUNT


def test_boleto_checkout_binds_unpaid_then_pays_when_the_payment_succeeds(world: World) -> None:
    # Given a boleto Checkout completed unpaid
    order, intent, session = ids()
    unpaid = world.deliver(
        stripe.checkout_session("checkout.session.completed.boleto", order, intent, session, T0)
    )
    assert unpaid.outcome is Outcome.BOUND
    assert world.find_order(order) is None

    # When the boleto is paid days later: the session says so, and so does the PaymentIntent
    succeeded = stripe.checkout_session(
        "checkout.session.async_payment_succeeded", order, intent, session, T0 + 172_800
    )
    paid = world.deliver(succeeded)
    by_intent = world.deliver(stripe.payment_intent_succeeded(None, intent, AMOUNT, T0 + 172_800))

    # Then the order is paid once
    state = world.order(order)
    assert (paid.outcome, by_intent.outcome) == (Outcome.APPLIED, Outcome.DUPLICATE)
    assert (state.paid_total, state.financial_status) == (AMOUNT, "paid")


def test_failed_or_expired_checkout_is_recorded_and_never_paid(world: World) -> None:
    order, intent, session = ids()
    failed = world.deliver(
        stripe.checkout_session(
            "checkout.session.async_payment_failed", order, intent, session, T0 + 172_800
        )
    )
    expired = world.deliver(
        stripe.checkout_session("checkout.session.expired", order, None, stripe.unique("cs"), T0)
    )

    assert (failed.outcome, expired.outcome) == (Outcome.BOUND, Outcome.IGNORED)
    assert world.find_order(order) is None
    assert {d.outcome for d in world.deliveries()} == {"bound", "ignored"}


def test_subscription_invoice_binds_its_payment_to_the_order_on_the_invoice(world: World) -> None:
    # Given a basil subscription invoice whose order sits in parent.subscription_details
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    invoice, subscription = stripe.unique("in"), stripe.unique("sub")
    bound = world.deliver(stripe.subscription_invoice_paid(order, invoice, subscription, T0))

    # When its invoice_payment.paid and its PaymentIntent (no metadata) arrive
    paid = world.deliver(stripe.subscription_invoice_payment_paid(invoice, intent, AMOUNT, T0))
    by_intent = world.deliver(stripe.payment_intent_succeeded(None, intent, AMOUNT, T0))

    # Then the invoice's order is paid once
    assert (bound.outcome, paid.outcome, by_intent.outcome) == (
        Outcome.BOUND,
        Outcome.APPLIED,
        Outcome.DUPLICATE,
    )
    assert world.order(order).paid_total == AMOUNT


@pytest.mark.parametrize("first", ["intent", "charge"])
def test_one_payment_named_for_two_orders_credits_the_first_and_records_the_conflict(
    world: World, first: str
) -> None:
    # Given a PaymentIntent whose metadata changed after its charge copied it
    bound_order, other_order = stripe.unique("ord"), stripe.unique("ord")
    intent, charge = stripe.unique("pi"), stripe.unique("ch")
    events = {
        "intent": stripe.payment_intent_succeeded(bound_order, intent, AMOUNT, T0, charge),
        "charge": stripe.charge_succeeded(other_order, intent, charge, AMOUNT, T0),
    }
    if first == "charge":
        events = {
            "charge": stripe.charge_succeeded(bound_order, intent, charge, AMOUNT, T0),
            "intent": stripe.payment_intent_succeeded(other_order, intent, AMOUNT, T0, charge),
        }

    # When both announce the payment, in either order
    applied = world.deliver(events[first])
    conflict = world.deliver(events["charge" if first == "intent" else "intent"])

    # Then it is credited once, on the order that bound it; the other is a recorded conflict
    assert (applied.outcome, conflict.outcome) == (Outcome.APPLIED, Outcome.CONFLICT)
    assert world.order(bound_order).paid_total == AMOUNT
    assert world.find_order(other_order) is None
    assert world.outbox(other_order) == []
    [record] = [d for d in world.deliveries() if d.outcome == "conflict"]
    assert (record.order_id, record.bound_order_id) == (other_order, bound_order)


def test_one_payment_named_for_two_orders_in_parallel_is_credited_once(world: World) -> None:
    # Given four deliveries naming one payment for four orders, each of which reads before
    # writing and waits until all four have read (none sees another's binding: only the
    # transaction's condition can tell them apart)
    orders = [stripe.unique("ord") for _ in range(4)]
    intent = stripe.unique("pi")
    all_read = threading.Barrier(len(orders))

    def after_reading(operation: str, call: Callable[[], Any]) -> Any:
        result = call()
        if operation == "batch_get_item":
            all_read.wait(timeout=30)
        return result

    processor = world.processor(intercepted(world.dynamodb, after_reading))
    start = threading.Barrier(len(orders))
    outcomes: list[Outcome] = []

    def deliver(order: str) -> None:
        body = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)
        start.wait()
        outcomes.extend(p.outcome for p in processor.process("stripe", body))

    threads = [threading.Thread(target=deliver, args=(order,)) for order in orders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == sorted([Outcome.APPLIED] + [Outcome.CONFLICT] * 3)
    assert sum(world.order(order).paid_total for order in orders) == AMOUNT


def test_a_reversal_whose_payment_another_order_bound_meanwhile_is_a_conflict_not_a_void(
    world: World,
) -> None:
    # Given a refund's failure naming order A for a payment not bound yet (its refund never
    # counted), and the payment paid on order B between the read and the transaction
    named, holder, intent = stripe.unique("ord"), stripe.unique("ord"), stripe.unique("pi")
    refund, charge = stripe.unique("re"), stripe.unique("ch")
    reads = 0

    def pay_b_after_the_read(operation: str, call: Callable[[], Any]) -> Any:
        nonlocal reads
        result = call()
        reads += operation == "batch_get_item"
        if operation == "batch_get_item" and reads == 2:  # the lookup, then the read
            world.deliver(stripe.payment_intent_succeeded(holder, intent, AMOUNT, T0, charge))
        return result

    failed = stripe.refund_event("refund.failed", intent, refund, 1000, T0 + 60, charge, named)

    # When it is processed (its transaction refused on the binding and on the reversed entry)
    [processed] = world.processor(intercepted(world.dynamodb, pay_b_after_the_read)).process(
        "stripe", failed
    )

    # Then it is a recorded conflict naming both orders, not a void of the refund's keys
    assert processed.outcome is Outcome.CONFLICT
    [record] = [d for d in world.deliveries() if d.outcome == "conflict"]
    assert (record.order_id, record.bound_order_id) == (named, holder)
    assert not [e for e in world.effects(named) if e.outcome == "voided"]
    assert world.order(holder).paid_total == AMOUNT


def test_checkout_naming_another_order_for_a_bound_payment_is_a_conflict(world: World) -> None:
    order, intent, session = ids()
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))

    other = stripe.unique("ord")
    late = world.deliver(
        stripe.checkout_session("checkout.session.completed.boleto", other, intent, session, T0)
    )

    assert late.outcome is Outcome.CONFLICT
    assert world.find_order(other) is None


def test_subscription_renewal_naming_no_order_is_paid_on_the_subscriptions_order(
    world: World,
) -> None:
    # Given a subscription whose first invoice carried the order
    order, subscription = stripe.unique("ord"), stripe.unique("sub")
    first, renewal = stripe.unique("in"), stripe.unique("in")
    world.deliver(stripe.subscription_invoice_paid(order, first, subscription, T0))
    world.deliver(stripe.subscription_invoice_payment_paid(first, stripe.unique("pi"), AMOUNT, T0))

    # When a renewal invoice names no order (Checkout's client_reference_id is not copied)
    month = T0 + 2_592_000
    renewal_paid = stripe.subscription_invoice_paid(order, renewal, subscription, month)
    renewal_paid = renewal_paid.replace(f'"order_id": "{order}"', '"plan": "monthly"')
    bound = world.deliver(renewal_paid)
    paid = world.deliver(
        stripe.subscription_invoice_payment_paid(
            renewal, stripe.unique("pi"), AMOUNT, T0 + 2_592_000
        )
    )

    # Then the renewal is bound through the subscription and paid on the same order
    assert (bound.outcome, bound.order_id, paid.outcome) == (Outcome.BOUND, order, Outcome.APPLIED)
    assert world.order(order).paid_total == 2 * AMOUNT


def test_checkout_prefers_the_order_in_metadata_over_a_cart_reference(world: World) -> None:
    order, intent, session = ids()
    body = stripe.checkout_session(CARD, order, intent, session, T0).replace(
        f'"client_reference_id": "{order}"', '"client_reference_id": "cart_77"'
    )

    paid = world.deliver(body)

    assert (paid.outcome, paid.order_id) == (Outcome.APPLIED, order)


def test_binding_and_conflict_deliveries_resent_change_nothing(world: World) -> None:
    order, intent, session = ids()
    unpaid = stripe.checkout_session(
        "checkout.session.completed.boleto", order, intent, session, T0
    )
    other = stripe.checkout_session(
        "checkout.session.completed.boleto", stripe.unique("ord"), intent, stripe.unique("cs"), T0
    )
    first = (world.deliver(unpaid).outcome, world.deliver(other).outcome)
    before = world.snapshot()

    again = (world.deliver(unpaid).outcome, world.deliver(other).outcome)

    assert first == again == (Outcome.BOUND, Outcome.CONFLICT)
    assert world.snapshot() == before


def test_binding_resent_after_an_older_version_ignored_it_binds_now(world: World) -> None:
    # Given a basil invoice.paid that an older version recorded as ignored
    order, invoice, subscription = stripe.unique("ord"), stripe.unique("in"), stripe.unique("sub")
    body = stripe.subscription_invoice_paid(order, invoice, subscription, T0)
    world.dynamodb.put_item(
        TableName=world.tables.ledger,
        Item={
            "pk": {"S": f"DELIVERY#stripe#{json.loads(body)['id']}"},
            "sk": {"S": "DELIVERY"},
            "outcome": {"S": "ignored"},
        },
    )

    # When it is resent from the dashboard, and its payment arrives
    bound = world.deliver(body)
    paid = world.deliver(
        stripe.subscription_invoice_payment_paid(invoice, stripe.unique("pi"), AMOUNT, T0)
    )

    # Then the invoice is bound now and its payment applied
    assert (bound.outcome, paid.outcome) == (Outcome.BOUND, Outcome.APPLIED)
    assert world.order(order).paid_total == AMOUNT
