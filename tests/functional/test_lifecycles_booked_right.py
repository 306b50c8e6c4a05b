"""Lifecycles that once booked money wrong or told a customer wrongly, each held to the state
of the tables afterwards: the order's totals, its entries, the deliveries' audit and what was
announced. Each test fails on the design it names."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from fixtures import stripe
from functions.shared.domain import Outcome
from functions.shared.errors import WriteContendedError
from ops.state import order_view
from tests.support.clients import RequestCounter, intercepted
from tests.support.world import World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800


@pytest.fixture
def counter(dynamodb: DynamoDBClient) -> RequestCounter:
    return RequestCounter(dynamodb)


def counted(world: World, order: str) -> list[tuple[str, int]]:
    return sorted(
        (str(e.transition), e.amount or 0)
        for e in world.effects(order)
        if e.outcome in {Outcome.APPLIED.value, Outcome.STALE.value}
    )


# -- a refund that failed never counts, whichever order its payment is bound to later ---------


def test_a_refund_voided_under_the_order_its_metadata_names_never_counts_on_another(
    world: World,
) -> None:
    # Given a refund whose metadata names order A, whose failure is processed before any event
    # of its payment (the pair is voided under A)
    order_a, order_b = stripe.unique("ord"), stripe.unique("ord")
    intent, charge, refund = stripe.unique("pi"), stripe.unique("ch"), stripe.unique("re")
    failed = stripe.refund_event("refund.failed", intent, refund, 3000, T0 + 120, charge, order_a)
    assert world.deliver(failed).outcome is Outcome.VOIDED

    # When the payment binds to order B, then the refund's earlier success arrives
    world.deliver(stripe.payment_intent_succeeded(order_b, intent, 10000, T0, charge))
    succeeded = world.deliver(
        stripe.refund_created(intent, refund, 3000, T0 + 60, charge, order_id=order_a)
    )

    # Then the refund counts nowhere: B is paid in full, and only its payment was announced
    assert succeeded.outcome is Outcome.DUPLICATE
    assert counted(world, order_b) == [("order.paid", 10000)]
    assert counted(world, order_a) == []
    assert world.order(order_b).refunded_total == 0
    assert [i["transition"] for i in world.outbox()] == ["order.paid"]


# -- a chargeback's delivery is audited as what it booked --------------------------------------


def test_a_chargeback_is_audited_as_booked_and_costs_no_cancelled_transaction(
    world: World, counter: RequestCounter
) -> None:
    # Given a paid order
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.payment_intent_succeeded(order, intent, 10000, T0, charge))
    dispute = stripe.unique("dp")

    # When a chargeback (not an inquiry) is created on it
    counter.reset()
    created = stripe.dispute_created(intent, dispute, 10000, T0 + 600)
    results = world.deliver_all(created)

    # Then it is booked disputed, nothing of the delivery is audited as voided, and the inquiry
    # it might have been is voided without a transaction cancelled first
    assert [r.outcome for r in results] == [Outcome.VOIDED, Outcome.APPLIED]
    assert world.order(order).disputed_total == 10000
    assert [d.outcome for d in world.deliveries() if d.event_id in created] == []
    assert counter.by_operation["TransactWriteItems"] == 2


# -- a payment captured several times counts what it captured in all ---------------------------


def multicaptured(order: str, intent: str, charge: str) -> list[str]:
    """One PaymentIntent authorized for 10000, captured 4000 then 6000 more (final)."""
    return [
        stripe.charge_captured(order, intent, charge, 10000, 4000, T0 + 60),
        stripe.charge_captured(order, intent, charge, 10000, 10000, T0 + 120),
        stripe.payment_intent_captured(order, intent, charge, 10000, 10000, T0 + 120),
    ]


@pytest.mark.parametrize("arrival", [(0, 1, 2), (2, 1, 0), (1, 0, 2), (0, 2, 1)])
def test_a_payment_captured_twice_counts_both_captures_once_in_any_order(
    world: World, arrival: tuple[int, int, int]
) -> None:
    # Given a PaymentIntent captured twice (multicapture): 4000, then 6000 more
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    events = multicaptured(order, intent, charge)

    # When its events arrive in this order, each delivered twice
    processed = []
    for n in arrival:
        processed.append(world.deliver(events[n]))
        processed.append(world.deliver(stripe.with_new_event_id(events[n])))

    # Then the order counts what was captured in all, each capture announced once, and no
    # earlier capture's total is taken for a mis-map (the amount-disagreement flag stays down)
    assert [p.detail for p in processed if p.amount_disagrees] == []
    state = world.order(order)
    assert state.paid_total == 10000
    assert sum(amount for _, amount in counted(world, order)) == 10000
    announced = [int(i["amount"]) for i in world.outbox(order)]
    assert sum(announced) == 10000
    assert len(announced) == len(counted(world, order))


def test_a_middle_capture_announced_last_is_a_duplicate_the_capture_mark_covers(
    world: World,
) -> None:
    # Given a PaymentIntent captured three times, 4000, 7000 and 10000 in all, whose first
    # and last captures were counted
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.charge_captured(order, intent, charge, 10000, 4000, T0 + 60))
    world.deliver(stripe.charge_captured(order, intent, charge, 10000, 10000, T0 + 180))

    # When the middle capture's charge.captured (7000 so far) arrives last
    middle = world.deliver(stripe.charge_captured(order, intent, charge, 10000, 7000, T0 + 120))

    # Then it is a duplicate, not flagged as amounts disagreeing, and the books hold 10000
    assert (middle.outcome, middle.amount_disagrees) == (Outcome.DUPLICATE, False)
    assert "earlier capture" in middle.detail
    assert world.order(order).paid_total == 10000


def test_an_order_shown_after_two_captures_lists_its_entries_each_with_its_notification(
    world: World,
) -> None:
    # Given a payment captured twice: its order's partition also holds the capture mark,
    # which names the top-up that moved it last
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.charge_captured(order, intent, charge, 10000, 4000, T0 + 60))
    world.deliver(stripe.charge_captured(order, intent, charge, 10000, 10000, T0 + 120))

    # When the order is read as `umavez show order` and trace read it
    view = order_view(world.dynamodb, world.tables, order)

    # Then it lists the two entries, not the mark, and each entry's notification once
    assert [e.effect_key for e in view.effects] == [e.effect_key for e in world.effects(order)]
    assert len(view.effects) == 2
    assert sorted(i["outbox_id"] for i in view.outbox) == sorted(
        i["outbox_id"] for i in world.outbox(order)
    )


def test_a_one_capture_payment_read_with_two_amounts_is_still_flagged(world: World) -> None:
    # Given a payment captured once, in full, for 5000
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.payment_intent_succeeded(order, intent, 5000, T0, charge))

    # When its charge is read as fully captured for 4000 (a mis-map, or a forged body)
    other = world.deliver(stripe.charge_captured(order, intent, charge, 4000, 4000, T0 + 60))

    # Then the disagreement is flagged, and the books keep what counted first
    assert (other.outcome, other.amount_disagrees) == (Outcome.DUPLICATE, True)
    assert world.order(order).paid_total == 5000


def test_two_captures_counted_at_once_top_the_payment_up_once(world: World) -> None:
    # Given a payment whose first capture (4000) counted
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.charge_captured(order, intent, charge, 10000, 4000, T0 + 60))

    # When its two later captures' events (7000 and 10000 in all) are processed at once, and
    # what a moved mark refused is delivered again (as SQS does)
    later = [
        stripe.charge_captured(order, intent, charge, 10000, 7000, T0 + 90),
        stripe.charge_captured(order, intent, charge, 10000, 10000, T0 + 120),
    ]
    both_read = threading.Barrier(len(later), timeout=10)

    waited: set[int] = set()

    def after_both_read(operation: str, call: Callable[[], Any]) -> Any:
        if operation == "transact_write_items" and threading.get_ident() not in waited:
            waited.add(threading.get_ident())
            both_read.wait()  # each has read the payment's mark before either writes
        return call()

    racing = intercepted(world.dynamodb, after_both_read)
    refused: list[str] = []

    def deliver(body: str) -> None:
        try:
            world.deliver(body, racing)
        except WriteContendedError:
            refused.append(body)

    threads = [threading.Thread(target=deliver, args=(body,)) for body in later]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for body in refused:
        world.deliver(body)

    # Then the payment counts 10000, never more, each entry announced once
    assert world.order(order).paid_total == 10000
    assert sum(int(i["amount"]) for i in world.outbox(order)) == 10000


def test_a_partial_capture_counts_what_was_captured_and_an_over_capture_all_of_it(
    world: World,
) -> None:
    # Given a payment authorized for 10000 and captured for 4000 (the rest released), and one
    # authorized for 10000 and captured for 12000 (over-capture)
    partial, over = stripe.unique("ord"), stripe.unique("ord")
    p_intent, p_charge = stripe.unique("pi"), stripe.unique("ch")
    o_intent, o_charge = stripe.unique("pi"), stripe.unique("ch")

    # When their captures and PaymentIntents' successes arrive
    world.deliver(stripe.charge_captured(partial, p_intent, p_charge, 10000, 4000, T0))
    world.deliver(stripe.payment_intent_captured(partial, p_intent, p_charge, 10000, 4000, T0))
    world.deliver(stripe.payment_intent_captured(over, o_intent, o_charge, 10000, 12000, T0))
    world.deliver(stripe.charge_captured(over, o_intent, o_charge, 10000, 12000, T0))

    # Then each order counts what was captured, once
    assert world.order(partial).paid_total == 4000
    assert world.order(over).paid_total == 12000
    assert len(world.outbox(partial)) == len(world.outbox(over)) == 1
