"""Waiting is not failing: a delivery whose order is not bound yet is parked, re-driven once its
binding exists, kept as unmatched after the providers' retry window, and attachable by an
operator exactly once. Time is the injected clock; SQS and DynamoDB are moto."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import ClientError

from fixtures import stripe
from fixtures.lambda_events import sqs_record
from functions.process.handler import handle_message
from functions.process.waiting import (
    PARK_AFTER_RECEIVES,
    WAIT_LIMIT_SECONDS,
    NothingWaitsError,
    Waiting,
)
from functions.reconcile.service import Reconciler
from functions.shared import tables
from functions.shared.domain import Outcome
from functions.shared.dynamo import to_attributes
from functions.shared.errors import BindingConflictError, OrderNotYetKnownError
from tests.support.clients import (
    RequestCounter,
    SimulatedCrashError,
    conflicting_once,
    crashing_at,
    refusing,
)
from tests.support.clock import FakeClock
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

T0 = 1_764_460_800
AMOUNT = 5000


def record(body: str, receives: int) -> SQSRecord:
    event_id = json.loads(body)["id"]
    return SQSRecord(
        sqs_record(body, {"provider": "stripe", "event_id": event_id, "event_type": "x"}, receives)
    )


def process_queue(world: World, queue: tuple[SQSClient, str]) -> list[Outcome]:
    """What the process Lambda does with what was re-driven onto the queue."""
    sqs, url = queue
    outcomes = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            outcomes += [p.outcome for p in world.processor().process("stripe", message["Body"])]
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return outcomes


def refund_before_its_payment() -> tuple[str, str, str]:
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    return order, intent, stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60)


def test_short_race_is_left_to_sqs_and_a_longer_wait_is_parked_not_dead_lettered(
    world: World, room: Waiting
) -> None:
    _, intent, refund = refund_before_its_payment()

    # When its first receives find no binding, SQS redelivers (the record fails)
    with pytest.raises(OrderNotYetKnownError):
        handle_message(record(refund, 1), world.processor(), room)

    # When it is still waiting on a later receive, it is parked and the record succeeds
    results = handle_message(record(refund, PARK_AFTER_RECEIVES), world.processor(), room)

    [parked] = list(room.waiting())
    assert results == []
    assert (parked.objects[0], parked.amount) == (intent, 1000)


def test_parked_delivery_is_applied_once_its_payment_arrives_days_later(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given a refund parked long before its payment
    order, intent, refund = refund_before_its_payment()
    handle_message(record(refund, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(2 * 86_400)
    assert room.redrive()["still_waiting"] == 1

    # When the payment arrives (it binds the PaymentIntent) and the re-drive runs
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    counts = room.redrive()
    outcomes = process_queue(world, queue)

    # Then the refund is applied once, and nothing waits
    assert (counts["redriven"], outcomes) == (1, [Outcome.APPLIED])
    assert world.order(order).refunded_total == 1000
    assert list(room.waiting()) == []
    assert world.mismatches(order) == []


def test_waiting_past_the_providers_retry_window_is_unmatched_listed_and_reconciled(
    world: World, room: Waiting, clock: FakeClock
) -> None:
    # Given a payment that names no order, parked
    intent = stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(None, intent, AMOUNT, T0)
    handle_message(record(payment, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(3600 + 1)
    over_an_hour = room.redrive()["waiting_over_an_hour"]

    # When three days pass with no binding
    clock.advance(WAIT_LIMIT_SECONDS)
    counts = room.redrive()

    # Then it is unmatched: kept with its raw event and amount, and the books check reports it
    [unmatched] = list(room.unmatched())
    assert (over_an_hour, counts["unmatched"]) == (1, 1)
    assert (unmatched.external_ref, unmatched.amount, unmatched.body) == (
        intent,
        AMOUNT,
        payment,
    )
    kinds = [m.kind for m in Reconciler(world.dynamodb, TABLES, clock).run().mismatches]
    assert kinds == ["unmatched_payment"]


def test_attaching_an_unmatched_payment_applies_it_exactly_once(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given an unmatched payment
    intent, order = stripe.unique("pi"), stripe.unique("ord")
    payment = stripe.payment_intent_succeeded(None, intent, AMOUNT, T0)
    handle_message(record(payment, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(WAIT_LIMIT_SECONDS + 1)
    room.redrive()

    # When an operator attaches it to its order, twice
    first = room.attach("stripe", intent, order)
    outcomes = process_queue(world, queue)
    second = room.attach("stripe", intent, order)
    outcomes += process_queue(world, queue)

    # Then it is applied once, announced once, and no longer unmatched
    assert (first, second, outcomes) == (1, 0, [Outcome.APPLIED])
    assert world.order(order).paid_total == AMOUNT
    assert len(world.outbox(order)) == 1
    assert list(room.unmatched()) == []

    # And attaching it to another order is refused
    with pytest.raises(BindingConflictError, match=order):
        room.attach("stripe", intent, stripe.unique("ord"))


def test_attach_refuses_an_object_nothing_waits_for(world: World, room: Waiting) -> None:
    with pytest.raises(NothingWaitsError, match="pi_typo"):
        room.attach("stripe", "pi_typo", stripe.unique("ord"))

    assert room.attach("stripe", "pi_typo", stripe.unique("ord"), force=True) == 0


def test_attach_contended_by_a_transaction_conflict_is_retried(
    world: World, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    intent, order = stripe.unique("pi"), stripe.unique("ord")
    sqs, url = queue
    room = Waiting(conflicting_once(world.dynamodb), sqs, TABLES, url, clock)
    payment = stripe.payment_intent_succeeded(None, intent, AMOUNT, T0)
    handle_message(record(payment, PARK_AFTER_RECEIVES), world.processor(), room)

    assert room.attach("stripe", intent, order) == 1
    assert process_queue(world, queue) == [Outcome.APPLIED]


def test_unmatched_delivery_whose_binding_arrives_after_all_is_applied(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given a refund unmatched after waiting 3 days for its payment
    order, intent, refund = refund_before_its_payment()
    handle_message(record(refund, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(WAIT_LIMIT_SECONDS + 1)
    room.redrive()
    assert len(list(room.unmatched())) == 1

    # When the payment is resent from the dashboard weeks later and the re-drive runs
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    counts = room.redrive()

    # Then the refund is applied once and nothing stays unmatched
    assert (counts["redriven"], process_queue(world, queue)) == (1, [Outcome.APPLIED])
    assert world.order(order).refunded_total == 1000
    assert list(room.unmatched()) == []


def test_a_redrive_reads_the_bindings_of_every_parked_delivery_together(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given thirty refunds parked before their payments, two of them unmatched already, and
    # the payments of ten of the others delivered since
    parked = [refund_before_its_payment() for _ in range(30)]
    for _, _, refund in parked[:2]:
        handle_message(record(refund, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(WAIT_LIMIT_SECONDS + 1)
    room.redrive()
    for _, _, refund in parked[2:]:
        handle_message(record(refund, PARK_AFTER_RECEIVES), world.processor(), room)
    for order, intent, _ in parked[2:12]:
        world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    counter = RequestCounter(world.dynamodb)

    # When the re-drive runs
    counts = room.redrive()

    # Then one read told it which of the thirty are bound: the ten are re-driven and applied
    # once, the others still wait or stay unmatched
    assert counter.by_operation["BatchGetItem"] == 1
    assert (counts["redriven"], counts["still_waiting"]) == (10, 18)
    assert process_queue(world, queue) == [Outcome.APPLIED] * 10
    assert [world.order(order).refunded_total for order, _, _ in parked[2:12]] == [1000] * 10
    assert len(list(room.unmatched())) == 2


def queued(queue: tuple[SQSClient, str]) -> int:
    sqs, url = queue
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def parked_until_bound(world: World, room: Waiting) -> tuple[str, str]:
    """A refund parked before its payment, and the payment delivered since: due a re-drive."""
    order, intent, refund = refund_before_its_payment()
    handle_message(record(refund, PARK_AFTER_RECEIVES), world.processor(), room)
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    return order, intent


def test_a_redrive_the_queue_refuses_keeps_the_delivery_parked(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given a parked refund whose payment has arrived, and the queue refusing sends
    order, _ = parked_until_bound(world, room)
    sqs, url = queue
    refused = Waiting(world.dynamodb, refusing(sqs, "send_message"), TABLES, url, clock)

    # When the re-drive runs
    counts = refused.redrive()

    # Then the send failed and is counted, and the delivery still waits: nothing was lost
    assert (counts["redriven"], counts["redrive_failures"]) == (0, 1)
    assert queued(queue) == 0
    assert len(list(room.waiting())) == 1

    # When the next scheduled run finds the queue back
    again = room.redrive()

    # Then the refund is applied once and nothing waits
    assert (again["redriven"], process_queue(world, queue)) == (1, [Outcome.APPLIED])
    assert world.order(order).refunded_total == 1000
    assert list(room.waiting()) == []


def test_a_redrive_that_dies_between_the_send_and_the_delete_sends_again_harmlessly(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given a parked refund whose payment has arrived
    order, _ = parked_until_bound(world, room)
    sqs, url = queue
    dying = Waiting(crashing_at(world.dynamodb, "delete_item"), sqs, TABLES, url, clock)

    # When the re-drive dies after its send, before it deletes the parked delivery
    with pytest.raises(SimulatedCrashError):
        dying.redrive()

    # Then the delivery is on the queue and still parked
    assert queued(queue) == 1
    assert len(list(room.waiting())) == 1

    # When the next scheduled run re-drives it again and the queue is processed
    again = room.redrive()
    outcomes = process_queue(world, queue)

    # Then the second copy is a duplicate: the refund counts once, is announced once
    assert (again["redriven"], outcomes) == (1, [Outcome.APPLIED, Outcome.DUPLICATE])
    assert world.order(order).refunded_total == 1000
    assert len(world.outbox(order)) == 2  # the payment's and the refund's
    assert list(room.waiting()) == []


def unmatched_payment(world: World, room: Waiting, clock: FakeClock) -> str:
    """A payment no event bound to an order, unmatched after the wait limit."""
    intent = stripe.unique("pi")
    payment = stripe.payment_intent_succeeded(None, intent, AMOUNT, T0)
    handle_message(record(payment, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(WAIT_LIMIT_SECONDS + 1)
    room.redrive()
    assert len(list(room.unmatched())) == 1
    return intent


def test_an_attach_the_queue_refuses_keeps_the_delivery_and_the_redrive_applies_it(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given an unmatched payment, and the queue refusing sends
    intent, order = unmatched_payment(world, room, clock), stripe.unique("ord")
    sqs, url = queue
    refused = Waiting(world.dynamodb, refusing(sqs, "send_message"), TABLES, url, clock)

    # When an operator attaches it to its order
    with pytest.raises(ClientError, match="ServiceUnavailable"):
        refused.attach("stripe", intent, order)

    # Then the binding holds, nothing was sent, and the delivery is still kept
    assert queued(queue) == 0
    assert [item.external_ref for item in room.unmatched()] == [intent]

    # When the scheduled re-drive runs (its binding exists now)
    counts = room.redrive()

    # Then the payment is applied once, and no longer unmatched
    assert (counts["redriven"], process_queue(world, queue)) == (1, [Outcome.APPLIED])
    assert world.order(order).paid_total == AMOUNT
    assert list(room.unmatched()) == []


def test_an_attach_that_dies_between_the_send_and_the_delete_can_be_run_again(
    world: World, room: Waiting, queue: tuple[SQSClient, str], clock: FakeClock
) -> None:
    # Given an unmatched payment
    intent, order = unmatched_payment(world, room, clock), stripe.unique("ord")
    sqs, url = queue
    dying = Waiting(crashing_at(world.dynamodb, "delete_item"), sqs, TABLES, url, clock)

    # When the operator's attach dies after its send, before it deletes the kept delivery
    with pytest.raises(SimulatedCrashError):
        dying.attach("stripe", intent, order)

    # Then the delivery is on the queue and still kept
    assert queued(queue) == 1
    assert len(list(room.unmatched())) == 1

    # When the operator runs it again and the queue is processed
    redriven = room.attach("stripe", intent, order)
    outcomes = process_queue(world, queue)

    # Then the second copy is a duplicate: the payment counts once, is announced once
    assert (redriven, outcomes) == (1, [Outcome.APPLIED, Outcome.DUPLICATE])
    assert world.order(order).paid_total == AMOUNT
    assert len(world.outbox(order)) == 1
    assert list(room.unmatched()) == []


def renewal_naming_no_order(invoice: str, subscription: str) -> str:
    """A basil invoice.paid of a renewal: no payment on it, no order, only its subscription."""
    body = stripe.subscription_invoice_paid("placeholder", invoice, subscription, T0 + 60)
    return body.replace('"order_id": "placeholder"', '"plan": "monthly"')


def test_a_delivery_that_moves_no_money_is_recorded_ignored_past_the_wait_never_unmatched(
    world: World, room: Waiting, clock: FakeClock
) -> None:
    # Given a payment counted through its PaymentIntent, and its renewal invoice's invoice.paid
    # parked: it names no order, and no order was ever bound to its subscription
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    invoice, subscription = stripe.unique("in"), stripe.unique("sub")
    world.deliver(stripe.payment_intent_succeeded(order, intent, AMOUNT, T0))
    renewal = renewal_naming_no_order(invoice, subscription)
    handle_message(record(renewal, PARK_AFTER_RECEIVES), world.processor(), room)
    assert [item.objects for item in room.waiting()] == [[subscription]]

    # When three days pass with no binding and the re-drive runs
    clock.advance(WAIT_LIMIT_SECONDS)
    counts = room.redrive()

    # Then it is recorded as ignored, with why, and nothing waits or is unmatched: the only
    # unmatched entries are money nobody can route, and the books check reports none
    assert (counts["ignored"], counts["unmatched"], counts["waiting_over_an_hour"]) == (1, 0, 0)
    assert (list(room.waiting()), list(room.unmatched())) == ([], [])
    [recorded] = [d for d in world.deliveries() if d.event_id == json.loads(renewal)["id"]]
    assert (recorded.outcome, recorded.reason) == (
        Outcome.IGNORED,
        f"no order was ever bound to {subscription}; nothing to bind (moves no money)",
    )
    assert (recorded.expires_at or 0) > clock.now
    assert world.order(order).paid_total == AMOUNT
    kinds = [m.kind for m in Reconciler(world.dynamodb, TABLES, clock).run().mismatches]
    assert kinds == []


def test_a_delivery_moving_no_money_that_went_unmatched_before_leaves_the_list_recorded(
    world: World, room: Waiting, clock: FakeClock
) -> None:
    # Given a renewal's invoice.paid moved to unmatched by the rule before (it moves no money)
    invoice, subscription = stripe.unique("in"), stripe.unique("sub")
    renewal = renewal_naming_no_order(invoice, subscription)
    handle_message(record(renewal, PARK_AFTER_RECEIVES), world.processor(), room)
    [parked] = list(room.waiting())
    world.dynamodb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": TABLES.ledger,
                    "Item": to_attributes(
                        {
                            **parked.stored,
                            tables.PARTITION_KEY: tables.UNMATCHED_PK,
                            "unmatched_at": "2026-12-03T00:00:00+00:00",
                        }
                    ),
                }
            },
            {
                "Delete": {
                    "TableName": TABLES.ledger,
                    "Key": to_attributes(
                        {
                            tables.PARTITION_KEY: tables.WAITING_PK,
                            tables.SORT_KEY: parked.sk,
                        }
                    ),
                }
            },
        ]
    )
    clock.advance(WAIT_LIMIT_SECONDS)

    # When the re-drive runs
    counts = room.redrive()

    # Then it is no longer unmatched (nor counted by the alarm), but recorded as ignored
    assert (counts["ignored"], list(room.unmatched())) == (1, [])
    assert [d.outcome for d in world.deliveries()] == [Outcome.IGNORED]


def test_a_renewal_ignored_past_the_wait_binds_when_its_subscription_is_bound_late(
    world: World, room: Waiting, clock: FakeClock, queue: tuple[SQSClient, str]
) -> None:
    # Given a renewal's invoice.paid (naming only its subscription) and the renewal's
    # invoice_payment.paid (naming only that invoice) parked, and three days passing with no
    # order bound to the subscription: the invoice is recorded ignored, the payment unmatched
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    first, renewal, subscription = stripe.unique("in"), stripe.unique("in"), stripe.unique("sub")
    renewed = renewal_naming_no_order(renewal, subscription)
    payment = stripe.subscription_invoice_payment_paid(renewal, intent, AMOUNT, T0 + 61)
    for body in (renewed, payment):
        handle_message(record(body, PARK_AFTER_RECEIVES), world.processor(), room)
    clock.advance(WAIT_LIMIT_SECONDS)
    counts = room.redrive()
    assert (counts["ignored"], counts["unmatched"]) == (1, 1)

    # When the subscription's first invoice, naming the order, is delivered late (a resend),
    # and the re-drive runs as scheduled
    world.deliver(stripe.subscription_invoice_paid(order, first, subscription, T0))
    for _ in range(2):
        room.redrive()
        process_queue(world, queue)

    # Then the renewal bound its invoice, its payment counted once, and nothing is left waiting,
    # unmatched or dormant
    assert world.order(order).paid_total == AMOUNT
    assert (list(room.waiting()), list(room.unmatched()), list(room.dormant())) == ([], [], [])
