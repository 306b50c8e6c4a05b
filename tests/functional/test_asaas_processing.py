"""Asaas deliveries booked as Asaas's payments API answers them, on moto; the API is the HTTP
fake on loopback (devstack/provider_apis.py), read with the key as Asaas reads it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.provider_apis import FakeProviderApis
from fixtures.shapes import EVENTS_DIR
from functions.asaas.api import (
    AsaasApi,
    AsaasApiNotConfiguredError,
    ProviderApiRefusedError,
    ProviderApiUnavailableError,
)
from functions.outbox.sender import OutboxSender, SendPolicy
from functions.process.asaas_cash import LedgerCash
from functions.process.interpreters import Interpreters
from functions.process.service import EffectProcessor, Processed
from functions.shared.domain import COUNTED_OUTCOMES, Outcome
from functions.shared.errors import MalformedEventError
from tests.support.clock import FakeClock
from tests.support.histories import RecordedChannel, RecordedEmail
from tests.support.world import World

KEY = "aact_test_key_not_real"
PAYMENT = "pay_fake00cash1042"
ORDER = "ord_1042"


@pytest.fixture
def asaas() -> Iterator[FakeProviderApis]:
    api = FakeProviderApis(asaas_key=KEY).start()
    yield api
    api.stop()


def processor_with(world: World, base_url: str, key: str = KEY) -> EffectProcessor:
    """Wired as the process Lambda is: the payments API, and the ledger for a payment's cash."""
    api = AsaasApi(lambda: key, base_url=base_url, timeout_seconds=2)
    return EffectProcessor(
        world.dynamodb,
        world.tables,
        FakeClock(),
        Interpreters.build(
            asaas_payments=api.payment,
            asaas_cash=LedgerCash(world.dynamodb, world.tables.ledger),
        ),
    )


def captured(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS_DIR / "asaas" / f"{name}.json").read_text())
    return loaded


def webhook(name: str, event_id: str, created: str, **claimed: Any) -> str:
    """A captured event of the cash payment, renamed and restamped; `claimed` overrides what
    its body says of the payment (what a forger could write)."""
    event = captured(name)
    event.update({"id": event_id, "dateCreated": created})
    event["payment"].update(claimed)
    return json.dumps(event)


def payment_now(**changes: Any) -> dict[str, Any]:
    """The cash payment as Asaas's API answers it now."""
    payment: dict[str, Any] = {**captured("PAYMENT_RECEIVED.in_cash")["payment"], **changes}
    return payment


def counted(world: World) -> list[tuple[str, str, int]]:
    return sorted(
        (str(e.transition), str(e.external_ref), e.amount or 0)
        for e in world.effects(ORDER)
        if e.outcome in COUNTED_OUTCOMES
    )


def announced(world: World) -> tuple[RecordedChannel, RecordedEmail]:
    """Every outbox item's first send, to an event channel and the e-mail channel."""
    events, email = RecordedChannel("eventbridge"), RecordedEmail()
    sender = OutboxSender(
        world.dynamodb,
        world.tables.outbox,
        [events, email],
        FakeClock(),
        SendPolicy(),
        ledger_table=world.tables.ledger,
    )
    for item in world.outbox(ORDER):
        sender.first_try(str(item["outbox_id"]), ORDER)
    return events, email


def test_the_value_booked_is_the_one_asaas_answers_not_the_one_the_body_claims(
    world: World, asaas: FakeProviderApis
) -> None:
    # Given a payment of 50.00 at Asaas, received in cash
    asaas.asaas_payments[PAYMENT] = payment_now()

    # When a webhook naming it claims 9,999.00 and another order
    claimed = webhook(
        "PAYMENT_RECEIVED.in_cash",
        "evt_forged&1",
        "2026-11-30 14:20:03",
        value=9999,
        externalReference="ord_someone_else",
        status="RECEIVED",
    )
    [processed] = processor_with(world, asaas.url).process("asaas", claimed)

    # Then the order Asaas names holds Asaas's 50.00, as a cash receipt; the claim moved nothing
    assert processed.outcome is Outcome.APPLIED
    assert counted(world) == [("order.paid", f"{PAYMENT}:cash", 5000)]
    assert world.find_order("ord_someone_else") is None
    assert world.mismatches(ORDER) == []
    assert asaas.requests == [f"/v3/payments/{PAYMENT}"]


def test_an_event_whose_payment_asaas_does_not_know_is_recorded_ignored_with_the_reason(
    world: World, asaas: FakeProviderApis
) -> None:
    # Given Asaas knows no such payment
    body = webhook("PAYMENT_RECEIVED", "evt_unknown&1", "2026-11-30 14:20:03", id="pay_nobody")

    # When its webhook arrives, twice
    first = processor_with(world, asaas.url).process("asaas", body)
    again = processor_with(world, asaas.url).process("asaas", body)

    # Then nothing is booked; the delivery is recorded once, ignored, saying why
    assert [p.outcome for p in first + again] == [Outcome.IGNORED, Outcome.IGNORED]
    [record] = world.deliveries()
    assert (record.outcome, record.event_id) == ("ignored", "evt_unknown&1")
    assert "Asaas does not know payment pay_nobody" in record.reason
    assert world.outbox() == []
    assert [e for e in world.effects(ORDER)] == []


@pytest.mark.parametrize("status", [429, 500, 503])
def test_asaas_api_unavailable_is_retried_and_writes_nothing(
    world: World, asaas: FakeProviderApis, status: int
) -> None:
    asaas.asaas_payments[PAYMENT] = payment_now()
    asaas.status_override = status
    before = world.snapshot()

    with pytest.raises(ProviderApiUnavailableError):
        processor_with(world, asaas.url).process(
            "asaas", webhook("PAYMENT_RECEIVED.in_cash", "evt_1&1", "2026-11-30 14:20:03")
        )

    assert world.snapshot() == before


def test_asaas_api_unreachable_is_retried(world: World) -> None:
    body = webhook("PAYMENT_RECEIVED.in_cash", "evt_1&1", "2026-11-30 14:20:03")

    with pytest.raises(ProviderApiUnavailableError):
        processor_with(world, "http://127.0.0.1:9").process("asaas", body)


def test_asaas_api_refusing_our_key_or_no_key_at_all_is_a_configuration_failure(
    world: World, asaas: FakeProviderApis
) -> None:
    body = webhook("PAYMENT_RECEIVED.in_cash", "evt_1&1", "2026-11-30 14:20:03")
    asaas.asaas_payments[PAYMENT] = payment_now()
    before = world.snapshot()

    with pytest.raises(ProviderApiRefusedError):
        processor_with(world, asaas.url, key="wrong").process("asaas", body)
    with pytest.raises(AsaasApiNotConfiguredError):
        processor_with(world, asaas.url, key="set-me").process("asaas", body)
    assert world.snapshot() == before


def test_an_event_naming_a_strange_payment_id_is_malformed(world: World) -> None:
    body = webhook("PAYMENT_RECEIVED", "evt_1&1", "2026-11-30 14:20:03", id="pay_../admin")

    with pytest.raises(MalformedEventError):
        processor_with(world, "http://127.0.0.1:9").process("asaas", body)


def receive_undo_receive(
    world: World, asaas: FakeProviderApis
) -> tuple[list[Processed], list[str]]:
    """A charge received in cash, the receipt undone, the charge received in cash again: each
    webhook processed when it happens, Asaas's payment as it is then."""
    processor = processor_with(world, asaas.url)
    receipt = webhook("PAYMENT_RECEIVED.in_cash", "evt_cash&1", "2026-11-30 14:20:03")
    undo = webhook("PAYMENT_RECEIVED_IN_CASH_UNDONE", "evt_undo&2", "2026-12-01 09:15:27")
    again = webhook("PAYMENT_RECEIVED.in_cash", "evt_cash_again&3", "2026-12-01 10:02:11")
    results: list[Processed] = []
    asaas.asaas_payments[PAYMENT] = payment_now()
    results += processor.process("asaas", receipt)
    asaas.asaas_payments[PAYMENT] = payment_now(
        status="PENDING", paymentDate=None, clientPaymentDate=None
    )
    results += processor.process("asaas", undo)
    asaas.asaas_payments[PAYMENT] = payment_now(paymentDate="2026-12-01")
    results += processor.process("asaas", again)
    return results, [receipt, undo, again]


def test_a_charge_received_in_cash_again_after_an_undo_is_paid_again(
    world: World, asaas: FakeProviderApis
) -> None:
    # Given a charge received in cash, the receipt undone, and the charge received in cash again
    results, _ = receive_undo_receive(world, asaas)

    # Then the order is paid once more: the first receipt and its undo net to zero, the second
    # receipt is an entry of its own, keyed after the undo (2026-12-01 09:15:27 in Brazil)
    undo_at = 1_796_127_327
    state = world.order(ORDER)
    assert [p.outcome for p in results] == [Outcome.APPLIED] * 3
    assert (state.paid_total, state.financial_status) == (5000, "paid")
    assert counted(world) == [
        ("order.paid", f"{PAYMENT}:cash", 5000),
        ("order.paid", f"{PAYMENT}:cash:{undo_at}", 5000),
        ("order.payment_reversed", f"{PAYMENT}:cash", 5000),
    ]
    assert world.mismatches(ORDER) == []
    # And each movement is announced once, none late; no e-mail: Asaas names no customer
    events, email = announced(world)
    assert sorted(events.sent.values()) == [1, 1, 1]
    assert not any(item.get("late") for item in world.outbox(ORDER))
    assert sum(email.sent.values()) == 0


def test_a_cash_receipt_delivered_again_or_its_undo_resent_is_still_one_effect(
    world: World, asaas: FakeProviderApis
) -> None:
    # Given a charge received in cash, undone and received in cash again
    _, (receipt, undo, again) = receive_undo_receive(world, asaas)
    before = world.snapshot()

    # When every webhook is delivered again, the receipts under new event ids too
    processor = processor_with(world, asaas.url)
    resent = [
        p.outcome
        for body in (
            receipt,
            undo,
            again,
            again.replace("evt_cash_again&3", "evt_cash_again&4"),
            receipt.replace("evt_cash&1", "evt_cash&5"),
        )
        for p in processor.process("asaas", body)
    ]

    # Then nothing changes: the undo reverses the receipt it reversed, and the receipt Asaas
    # shows is the one already booked
    assert set(resent) == {Outcome.DUPLICATE}
    assert world.snapshot() == before
    assert world.order(ORDER).paid_total == 5000


def test_an_undo_read_after_the_charge_was_received_in_cash_again_books_the_new_receipt(
    world: World, asaas: FakeProviderApis
) -> None:
    # Given a cash receipt booked, then undone and received again before either webhook is read
    processor = processor_with(world, asaas.url)
    asaas.asaas_payments[PAYMENT] = payment_now()
    processor.process(
        "asaas", webhook("PAYMENT_RECEIVED.in_cash", "evt_cash&1", "2026-11-30 14:20:03")
    )
    asaas.asaas_payments[PAYMENT] = payment_now(paymentDate="2026-12-01")
    again = webhook("PAYMENT_RECEIVED.in_cash", "evt_cash_again&3", "2026-12-01 10:02:11")
    undo = webhook("PAYMENT_RECEIVED_IN_CASH_UNDONE", "evt_undo&2", "2026-12-01 09:15:27")

    # When the second receipt's webhook is read first (it looks like the booked one), then the
    # undo's
    first = processor.process("asaas", again)
    then = processor.process("asaas", undo)

    # Then the undo reverses the first receipt and books the one Asaas shows: paid once
    assert [p.outcome for p in first] == [Outcome.DUPLICATE]
    assert [p.outcome for p in then] == [Outcome.APPLIED, Outcome.APPLIED]
    assert world.order(ORDER).paid_total == 5000
    assert counted(world) == [
        ("order.paid", f"{PAYMENT}:cash", 5000),
        ("order.paid", f"{PAYMENT}:cash:1796127327", 5000),
        ("order.payment_reversed", f"{PAYMENT}:cash", 5000),
    ]
    assert world.mismatches(ORDER) == []


def test_an_undo_read_after_the_charge_was_deleted_still_reverses_its_receipt(
    world: World, asaas: FakeProviderApis
) -> None:
    # Given a cash receipt booked, then undone, then the charge deleted (it was unpaid again)
    processor = processor_with(world, asaas.url)
    asaas.asaas_payments[PAYMENT] = payment_now()
    processor.process(
        "asaas", webhook("PAYMENT_RECEIVED.in_cash", "evt_cash&1", "2026-11-30 14:20:03")
    )
    asaas.asaas_payments[PAYMENT] = payment_now(status="PENDING", paymentDate=None, deleted=True)

    # When the undo's webhook is read, then the deletion's
    undone = processor.process(
        "asaas", webhook("PAYMENT_RECEIVED_IN_CASH_UNDONE", "evt_undo&2", "2026-12-01 09:15:27")
    )
    deleted = processor.process(
        "asaas",
        webhook("PAYMENT_RECEIVED", "evt_del&3", "2026-12-01 09:20:00", deleted=True).replace(
            '"PAYMENT_RECEIVED"', '"PAYMENT_DELETED"'
        ),
    )

    # Then the receipt is reversed (the order unpaid), and the deletion recorded as ignored
    assert [p.outcome for p in undone + deleted] == [Outcome.APPLIED, Outcome.IGNORED]
    assert world.order(ORDER).paid_total == 0
    assert counted(world) == [
        ("order.paid", f"{PAYMENT}:cash", 5000),
        ("order.payment_reversed", f"{PAYMENT}:cash", 5000),
    ]
    [record] = world.deliveries()
    assert "deleted charge was never paid" in record.reason
