"""What each notification says and who gets it: the order's financial status as of sending,
the recipient learned at payment time, the late-movement e-mail policy, every currency."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import boto3
import pytest
from botocore.exceptions import ClientError

from fixtures import stripe
from functions.outbox.channels import Channel, EventBridgeChannel, SesEmailChannel
from functions.outbox.revive import OutboxReviver, ReviveResult
from functions.outbox.sender import OutboxSender, SendPolicy, SendResult
from functions.outbox.sweeper import Sweeper
from functions.process.service import EffectProcessor
from functions.reconcile.service import Reconciler
from functions.shared.domain import RoutedEffect
from functions.shared.outbox import OutboxItem, outbox_id_for
from functions.store.reads import Known, LedgerReads
from tests.support.clock import FakeClock
from tests.support.histories import RecordedChannel, RecordedEmail
from tests.support.sinks import EMAIL_SENDER, Sinks
from tests.support.world import TABLES, World

T0 = 1_764_460_800
CUSTOMER = "cliente@example.com"  # the receipt_email of the fixture's PaymentIntent
POLICY = SendPolicy(lease_seconds=60, backoff_base_seconds=30)


@pytest.fixture
def sinks(world: World) -> Sinks:
    return Sinks()


def channels(sinks: Sinks) -> list[Channel]:
    return [
        EventBridgeChannel(boto3.client("events"), sinks.bus_name),
        SesEmailChannel(boto3.client("sesv2"), EMAIL_SENDER),
    ]


def send_all(world: World, clock: FakeClock, via: Sequence[Channel]) -> None:
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, via, clock, POLICY, ledger_table=TABLES.ledger
    )
    for item in world.outbox():
        assert sender.deliver(item["outbox_id"], only_if_due=False).result is SendResult.SENT


def payment_with_receipt(
    order: str, intent: str, amount: int, at: int, currency: str = "brl"
) -> str:
    body = stripe.payment_intent_succeeded(order, intent, amount, at, currency=currency)
    assert CUSTOMER in body
    return body


def key_of(world: World, order: str, transition: str) -> str:
    [effect] = [e for e in world.effects(order) if e.transition == transition]
    return outbox_id_for(effect.effect_key)


def test_refund_reaches_the_customer_learned_at_payment_with_the_status_as_of_sending(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a payment that named its customer, then a partial refund that names nobody
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    world.deliver(payment_with_receipt(order, intent, 10000, T0))
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 2500, T0 + 60))

    # When the outbox sends both
    send_all(world, clock, channels(sinks))

    # Then the refund e-mail reached the customer, and every sink says what the order is now
    refund_key = key_of(world, order, "order.refunded")
    sinks.events_by_key()
    to, body = sinks.emails()[refund_key]
    assert to == [CUSTOMER]
    assert "BRL 25.00" in body
    assert "Order status: partially refunded" in body
    assert sinks.details[refund_key]["financial_status"] == "partially_refunded"
    assert sinks.details[refund_key]["late"] is False


def test_late_payment_is_announced_but_not_emailed_and_a_late_refund_is_both(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a refund delivered before its older payment (both carry the order)
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(
        stripe.refund_created(intent, stripe.unique("re"), 5000, T0 + 60, charge, order_id=order)
    )
    world.deliver(payment_with_receipt(order, intent, 5000, T0))
    # and a second refund of an earlier second, which arrives last
    world.deliver(
        stripe.refund_created(intent, stripe.unique("re"), 1, T0 + 30, charge, order_id=order)
    )

    # When everything is sent
    send_all(world, clock, channels(sinks))

    # Then EventBridge heard of all three, the late ones flagged; the late payment e-mailed
    # nobody (it would contradict "refund issued"), the late refund reached the customer
    events = sinks.events_by_key()
    late = {key for key, detail in sinks.details.items() if detail["late"]}
    payment_key = key_of(world, order, "order.paid")
    assert len(events) == 3
    assert payment_key in late
    assert len(late) == 2
    emailed = set(sinks.emails())
    assert payment_key not in emailed
    assert late - {payment_key} <= emailed


def test_zero_decimal_amounts_are_written_as_they_are(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    order = stripe.unique("ord")
    world.deliver(payment_with_receipt(order, stripe.unique("pi"), 1234, T0, currency="jpy"))

    send_all(world, clock, channels(sinks))

    [(to, body)] = sinks.emails().values()
    assert to == [CUSTOMER]
    assert "JPY 1234" in body


def test_sender_whose_lease_ran_out_cannot_change_the_item_afterwards(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given a sender so slow in its send that its lease runs out and another takes over
    order = stripe.unique("ord")
    world.deliver(payment_with_receipt(order, stripe.unique("pi"), 5000, T0))
    [item] = world.outbox(order)
    fast = OutboxSender(world.dynamodb, TABLES.outbox, channels(sinks), clock, POLICY)
    taken_over: list[SendResult] = []

    class SlowChannel:
        name = "slow"

        def applies_to(self, item: OutboxItem) -> bool:
            return True

        def send(self, item: OutboxItem) -> None:
            clock.advance(POLICY.lease_seconds + 1)
            taken_over.append(fast.deliver(item.outbox_id, only_if_due=True).result)

    slow = OutboxSender(world.dynamodb, TABLES.outbox, [SlowChannel()], clock, POLICY)

    # When the slow sender comes back from its send
    result = slow.deliver(item["outbox_id"], only_if_due=False)

    # Then it changed nothing: the item is as the second sender left it, sent once by it
    [after] = world.outbox(order)
    assert (result.result, taken_over) == (SendResult.SKIPPED, [SendResult.SENT])
    assert (after["status"], after["attempts"]) == ("sent", 2)
    assert "slow" not in after.get("channels_sent", set())
    assert sinks.events_by_key() == {item["outbox_id"]: 1}


def test_customer_named_only_by_the_duplicate_charge_event_is_still_learned(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given payment_intent.succeeded naming no e-mail, then its charge.succeeded naming one
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    silent = stripe.payment_intent_succeeded(order, intent, 5000, T0, charge).replace(
        f'"receipt_email": "{CUSTOMER}"', '"receipt_email": null'
    )
    assert CUSTOMER not in silent
    world.deliver(silent)
    duplicate = world.deliver(stripe.charge_succeeded(order, intent, charge, 5000, T0))

    # When a refund is announced
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, charge))
    send_all(world, clock, channels(sinks))

    # Then the refund e-mail reaches the address the charge named
    refund_key = key_of(world, order, "order.refunded")
    assert duplicate.outcome.value == "duplicate"
    assert world.order(order).recipient == CUSTOMER
    assert sinks.emails()[refund_key][0] == [CUSTOMER]


def test_a_payment_applied_before_its_charge_names_the_customer_is_emailed_once(
    world: World, clock: FakeClock
) -> None:
    # Given payment_intent.succeeded (no receipt e-mail) applied and its notification sent at
    # once, to EventBridge only: nobody to e-mail yet
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    payment = json.loads(stripe.payment_intent_succeeded(order, intent, 5000, T0, charge))
    payment["data"]["object"]["receipt_email"] = None
    processed = world.deliver(json.dumps(payment))
    assert processed.effect_key
    outbox_id = outbox_id_for(processed.effect_key)
    email, events = RecordedEmail(), RecordedChannel("eventbridge")
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, [events, email], clock, SendPolicy(), TABLES.ledger
    )
    assert sender.first_try(outbox_id, order).result.value == "sent"
    assert email.sent == Counter()

    # When charge.succeeded, which names the customer, arrives (a duplicate of the payment),
    # twice, and the sweeper runs once the item is due, twice
    charged = json.loads(stripe.charge_succeeded(order, intent, charge, 5000, T0))
    charged["data"]["object"]["billing_details"] = {"email": "cliente@example.com"}
    charged["data"]["object"]["receipt_email"] = None
    for _ in range(2):
        world.deliver(json.dumps(charged))
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the customer got the payment e-mail exactly once, and EventBridge nothing more
    assert email.sent == Counter({outbox_id: 1})
    assert events.sent == Counter({outbox_id: 1})
    [item] = [i for i in world.outbox(order) if i["outbox_id"] == outbox_id]
    assert item["status"] == "sent"
    assert item["channels_sent"] == {"eventbridge", "email"}


def test_a_late_payment_of_another_payment_of_the_order_is_emailed(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given an order paid in two PaymentIntents, a deposit and a balance, whose balance is
    # processed first
    order, deposit, balance = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("pi")
    world.deliver(payment_with_receipt(order, balance, 7000, T0 + 3600))
    late = world.deliver(payment_with_receipt(order, deposit, 3000, T0))

    # When everything is sent
    send_all(world, clock, channels(sinks))

    # Then the deposit counted late (the order's status kept) and both payments were
    # e-mailed: the deposit contradicts nothing the customer was told of the balance
    assert late.outcome.value == "stale"
    assert world.order(order).paid_total == 10000
    sinks.events_by_key()
    assert sinks.details[key_of_payment(world, order, deposit)]["late"] is True
    assert set(sinks.emails()) == {
        key_of_payment(world, order, deposit),
        key_of_payment(world, order, balance),
    }


def test_a_payment_late_against_its_own_refund_is_not_emailed_beside_another_payment(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given an order with two payments: the first refunded before its own payment event is
    # processed, the second paid later still
    order, first, second = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("pi")
    world.deliver(stripe.refund_created(first, stripe.unique("re"), 3000, T0 + 60, order_id=order))
    world.deliver(payment_with_receipt(order, second, 7000, T0 + 3600))
    world.deliver(payment_with_receipt(order, first, 3000, T0))

    # When everything is sent
    send_all(world, clock, channels(sinks))

    # Then the first payment's e-mail is not sent after its refund's; the second's is
    emailed = set(sinks.emails())
    assert key_of_payment(world, order, first) not in emailed
    assert key_of_payment(world, order, second) in emailed


def key_of_payment(world: World, order: str, payment: str) -> str:
    [effect] = [
        e for e in world.effects(order) if e.transition == "order.paid" and e.payment == payment
    ]
    return outbox_id_for(effect.effect_key)


def test_a_customer_learned_while_the_payments_first_try_is_sending_is_emailed_once(
    world: World, clock: FakeClock
) -> None:
    # Given payment_intent.succeeded (no receipt e-mail) applied, and its charge.succeeded,
    # which names the customer, processed while the payment's first try is sending to
    # EventBridge (the try read the order before the address was learnt)
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    applied = world.deliver(payment_naming_nobody(order, intent, charge))
    outbox_id = outbox_id_for(str(applied.effect_key))
    charged = charge_naming_the_customer(order, intent, charge)

    class LearnsMidSend(RecordedChannel):
        def send(self, item: OutboxItem) -> None:
            super().send(item)
            world.deliver(json.dumps(charged))

    email, events = RecordedEmail(), LearnsMidSend("eventbridge")
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, [events, email], clock, SendPolicy(), TABLES.ledger
    )

    # When the first try ends, and the sweeper runs once the item is due, twice
    assert sender.first_try(outbox_id, order).result is SendResult.SENT
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the customer got the payment e-mail exactly once, and EventBridge it once
    assert email.sent == Counter({outbox_id: 1})
    assert events.sent == Counter({outbox_id: 1})
    [item] = [i for i in world.outbox(order) if i["outbox_id"] == outbox_id]
    assert item["channels_sent"] == {"eventbridge", "email"}


def test_a_payment_sent_before_any_address_is_emailed_once_another_payment_named_one(
    world: World, clock: FakeClock
) -> None:
    # Given a deposit's payment_intent.succeeded (no receipt e-mail) applied and sent to
    # EventBridge only, then the balance's payment naming the customer (the order learns them)
    order, deposit, balance = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("pi")
    deposit_charge = stripe.unique("ch")
    silent = payment_naming_nobody(order, deposit, deposit_charge, 3000)
    outbox_id = outbox_id_for(str(world.deliver(silent).effect_key))
    email, events = RecordedEmail(), RecordedChannel("eventbridge")
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, [events, email], clock, SendPolicy(), TABLES.ledger
    )
    assert sender.first_try(outbox_id, order).result is SendResult.SENT
    world.deliver(payment_with_receipt(order, balance, 7000, T0 + 3600))

    # When the deposit's charge.succeeded, naming the customer too, arrives (a duplicate), and
    # the sweeper runs once the item is due, twice
    world.deliver(json.dumps(charge_naming_the_customer(order, deposit, deposit_charge, 3000)))
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the deposit's payment e-mail reached the customer once
    assert email.sent[outbox_id] == 1
    assert events.sent[outbox_id] == 1


def test_a_payment_sent_before_any_address_is_emailed_once_a_later_payment_teaches_the_order(
    world: World, clock: FakeClock
) -> None:
    # Given a payment naming nobody (its charge events lost for good), applied and sent to
    # EventBridge only: its e-mail is owed
    order, second = stripe.unique("ord"), stripe.unique("pi")
    outbox_id, sender, email, events = sent_without_its_email(world, clock, order)
    assert email.sent[outbox_id] == 0

    # When another payment of the order, naming the customer, is applied (no duplicate of the
    # first ever arrives), and the sweeper runs once the item is due, twice
    taught = world.deliver(payment_with_receipt(order, second, 2500, T0 + 3600))
    assert taught.outcome.value == "applied"
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the first payment's notification reached the customer once, and EventBridge once
    assert world.order(order).recipient == CUSTOMER
    assert email.sent[outbox_id] == 1
    assert events.sent[outbox_id] == 1


class _ReopenThrottled:
    """The ledger's client, but for the first Query paged after a committed transaction: throttled,
    as DynamoDB may answer the re-open that follows a commit."""

    def __init__(self, client: Any) -> None:
        self._client, self._armed = client, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def transact_write_items(self, **request: Any) -> Any:
        answer = self._client.transact_write_items(**request)
        self._armed = True
        return answer

    def get_paginator(self, operation: str) -> Any:
        if operation != "query" or not self._armed:
            return self._client.get_paginator(operation)
        self._armed = False
        return self

    def paginate(self, **request: Any) -> Any:
        code = "ProvisionedThroughputExceededException"
        raise ClientError({"Error": {"Code": code, "Message": "throttled"}}, "Query")


def test_a_reopen_that_failed_after_the_teaching_commit_runs_when_the_entry_is_redelivered(
    world: World, clock: FakeClock
) -> None:
    # Given a payment naming nobody, sent to EventBridge only (its e-mail owed), and a second
    # payment naming the customer whose commit taught the order, then whose re-open of the
    # order's owed e-mails was throttled: the delivery fails, back to the queue
    order = stripe.unique("ord")
    outbox_id, sender, email, events = sent_without_its_email(world, clock, order)
    teaching = payment_with_receipt(order, stripe.unique("pi"), 2500, T0 + 3600)
    with pytest.raises(ClientError, match="throttled"):
        world.deliver(teaching, client=cast(Any, _ReopenThrottled(world.dynamodb)))
    assert world.order(order).recipient == CUSTOMER

    # When SQS delivers it again (a duplicate now), and the sweeper runs once due, twice
    again = world.deliver(teaching)
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the first payment's notification reached the customer once, and EventBridge once
    assert again.outcome.value == "duplicate"
    assert email.sent[outbox_id] == 1
    assert events.sent[outbox_id] == 1


def capture(order: str, intent: str, charge: str, captured: int, *, naming: str | None) -> str:
    """charge.captured of a charge authorized for 5000, `captured` of it so far, naming the
    customer in its billing details only, or nobody."""
    event = json.loads(stripe.charge_captured(order, intent, charge, 5000, captured, T0))
    event["data"]["object"]["billing_details"] = {"email": naming}
    event["data"]["object"]["receipt_email"] = None
    return json.dumps(event)


def test_a_capture_sent_before_any_address_is_emailed_once_its_next_capture_names_one(
    world: World, clock: FakeClock
) -> None:
    # Given a first capture of 2000 naming nobody, applied and sent to EventBridge only
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    first = world.deliver(capture(order, intent, charge, 2000, naming=None))
    outbox_id = outbox_id_for(str(first.effect_key))
    email, events = RecordedEmail(), RecordedChannel("eventbridge")
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, [events, email], clock, SendPolicy(), TABLES.ledger
    )
    assert sender.first_try(outbox_id, order).result is SendResult.SENT

    # When the same charge's next capture, 5000 so far, names the customer (a top-up of
    # 3000 under its own key), and the sweeper runs once the item is due, twice
    topped = world.deliver(capture(order, intent, charge, 5000, naming=CUSTOMER))
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the first capture's notification reached the customer once: the re-open skipped
    # the top-up's own new notification, not the first capture's
    assert (topped.outcome.value, topped.effect_key != first.effect_key) == ("applied", True)
    assert world.order(order).paid_total == 5000
    assert email.sent[outbox_id] == 1
    assert events.sent[outbox_id] == 1


def sent_without_its_email(
    world: World, clock: FakeClock, order: str
) -> tuple[str, OutboxSender, RecordedEmail, RecordedChannel]:
    """A payment of 2500 naming nobody, applied and sent on its first try to EventBridge
    only: its notification's id, the sender, and what each channel took."""
    silent = payment_naming_nobody(order, stripe.unique("pi"), stripe.unique("ch"), 2500)
    outbox_id = outbox_id_for(str(world.deliver(silent).effect_key))
    email, events = RecordedEmail(), RecordedChannel("eventbridge")
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, [events, email], clock, SendPolicy(), TABLES.ledger
    )
    assert sender.first_try(outbox_id, order).result is SendResult.SENT
    return outbox_id, sender, email, events


class _LaggingOrderRead(LedgerReads):
    """A read before writing that lags behind the order's row: it finds no order."""

    def before_writing(self, routed: RoutedEffect, objects: tuple[str, ...]) -> Known:
        return replace(super().before_writing(routed, objects), order=None)


def test_an_email_owed_that_a_lagging_read_left_unopened_is_reported_and_revived_once(
    world: World, clock: FakeClock
) -> None:
    # Given a payment naming nobody, sent to EventBridge only (its e-mail owed), and a second
    # payment naming the customer processed through a read that lagged behind the order's
    # row: the order learns its customer, and nothing re-opens the first notification
    order, second = stripe.unique("ord"), stripe.unique("pi")
    outbox_id, sender, email, events = sent_without_its_email(world, clock, order)
    lagging = EffectProcessor(
        world.dynamodb, TABLES, clock, reads=_LaggingOrderRead(world.dynamodb, TABLES.ledger)
    )
    [taught] = lagging.process("stripe", payment_with_receipt(order, second, 2500, T0 + 3600))
    assert sender.first_try(outbox_id_for(str(taught.effect_key)), order).result is SendResult.SENT
    clock.advance(2 * 3600)

    # When the reconciliation runs, the operator revives what it names, the sweeper runs
    # twice, and the reconciliation runs again
    found = Reconciler(world.dynamodb, TABLES, clock).run().mismatches
    revived = OutboxReviver(world.dynamodb, TABLES.outbox, clock).revive(outbox_id)
    for _ in range(2):
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()
    clock.advance(2 * 3600)
    again = Reconciler(world.dynamodb, TABLES, clock).run().mismatches

    # Then the first run named that notification, the revive handed it back for its e-mail,
    # the customer got it once (EventBridge nothing more), and the books are clean after
    assert [(m.kind, m.order_id) for m in found] == [("email_owed_outbox_item", order)]
    assert outbox_id in found[0].detail
    assert revived.result is ReviveResult.REOPENED
    assert (email.sent[outbox_id], events.sent[outbox_id]) == (1, 1)
    assert again == []


def payment_naming_nobody(order: str, intent: str, charge: str, amount: int = 5000) -> str:
    """payment_intent.succeeded without a receipt e-mail."""
    payment = json.loads(stripe.payment_intent_succeeded(order, intent, amount, T0, charge))
    payment["data"]["object"]["receipt_email"] = None
    return json.dumps(payment)


def charge_naming_the_customer(
    order: str, intent: str, charge: str, amount: int = 5000
) -> dict[str, Any]:
    """Its charge.succeeded, naming the customer in its billing details only."""
    charged: dict[str, Any] = json.loads(stripe.charge_succeeded(order, intent, charge, amount, T0))
    charged["data"]["object"]["billing_details"] = {"email": CUSTOMER}
    charged["data"]["object"]["receipt_email"] = None
    return charged


def test_a_notification_never_emailed_by_policy_stays_sent_when_a_resend_names_the_customer(
    world: World, clock: FakeClock
) -> None:
    # Given a payment processed after its own refund (not e-mailed: it would contradict the
    # refund's e-mail), naming nobody, and sent to EventBridge
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 3000, T0 + 60, order_id=order))
    late = world.deliver(payment_naming_nobody(order, intent, charge, 3000))
    assert late.outcome.value == "stale"
    outbox_id = outbox_id_for(str(late.effect_key))
    email, events = RecordedEmail(), RecordedChannel("eventbridge")
    sender = OutboxSender(
        world.dynamodb, TABLES.outbox, [events, email], clock, SendPolicy(), TABLES.ledger
    )
    assert sender.first_try(outbox_id, order).result is SendResult.SENT
    [before] = [i for i in world.outbox(order) if i["outbox_id"] == outbox_id]

    # When its charge.succeeded, naming the customer, is resent twice, and the sweeper runs
    for _ in range(2):
        world.deliver(json.dumps(charge_naming_the_customer(order, intent, charge, 3000)))
        clock.advance(600)
        Sweeper(world.dynamodb, TABLES.outbox, sender, clock, grace_seconds=0).sweep()

    # Then the order learned its customer, and the notification is as it was: not re-opened,
    # not sent again, not e-mailed
    assert world.order(order).recipient == CUSTOMER
    [after] = [i for i in world.outbox(order) if i["outbox_id"] == outbox_id]
    assert after == before
    assert events.sent == Counter({outbox_id: 1})
    assert email.sent == Counter()
