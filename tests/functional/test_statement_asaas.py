"""Asaas's statement (functions/statement/asaas.py): its financial transactions read from the
fake Asaas API on loopback, each payment they name read back and booked once under its
webhooks' keys, fees and net from the payment, every mismatch by kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

from devstack.provider_apis import FakeProviderApis
from fixtures.shapes import shape, unique
from functions.asaas.api import AsaasApi
from functions.shared.domain import Outcome, Total
from functions.statement.asaas import AsaasStatement, known_to_asaas, statement_lines
from functions.statement.report import ENTRY_UNKNOWN, MOVEMENT_MISSING, StatementReport
from functions.statement.service import StatementPass
from tests.support.clock import FakeClock
from tests.support.world import World

KEY = "asaas_test_statement_key_fake"
DAY = "2026-11-29"
DAY_START = 1_795_921_200  # 2026-11-29T00:00:00-03:00
WINDOW = (DAY_START - 3600, DAY_START + 86_400)


@pytest.fixture
def asaas() -> Iterator[FakeProviderApis]:
    served = FakeProviderApis(asaas_key=KEY).start()
    yield served
    served.stop()


@pytest.fixture(autouse=True)
def at_the_payments_time(clock: FakeClock) -> None:
    clock.now = DAY_START + 86_400  # the ledger records them the next day


def event(name: str, payment: dict[str, Any]) -> str:
    """The webhook `name` for `payment` (the fixture's envelope, a fresh id)."""
    body = shape(f"asaas/{name}.json")
    body["id"] = unique("evt")
    body["payment"] = payment
    return json.dumps(body)


def received(order: str, **fields: Any) -> dict[str, Any]:
    """A Pix payment of R$ 50.00 received on DAY, R$ 0.99 kept by Asaas, for `order`."""
    payment: dict[str, Any] = shape("asaas/PAYMENT_RECEIVED.json")["payment"]
    payment.update({"id": unique("pay"), "externalReference": order}, **fields)
    return payment


def lines_of_day(payment: dict[str, Any]) -> list[dict[str, Any]]:
    """Its statement's lines that day: the receipt, and Asaas's fee on it."""

    def line(kind: str, value: float, description: str) -> dict[str, Any]:
        return {
            "object": "financialTransaction",
            "id": unique("ftn"),
            "value": value,
            "balance": 1000.0,
            "type": kind,
            "date": DAY,
            "description": description,
            "paymentId": payment["id"],
        }

    fee = round(float(payment["value"]) - float(payment["netValue"]), 2)
    return [
        line("PAYMENT_RECEIVED", float(payment["value"]), "Cobrança recebida"),
        line("PAYMENT_FEE", -fee, "Taxa do Pix"),
    ]


def books_hold(asaas: FakeProviderApis, *payments: dict[str, Any]) -> None:
    """Asaas's API knows each payment, and its statement holds each one's lines."""
    for payment in payments:
        asaas.asaas_payments[payment["id"]] = payment
        for line in lines_of_day(payment):
            asaas.asaas_transactions[line["id"]] = line


def statement(world: World, clock: FakeClock, asaas: FakeProviderApis) -> StatementReport:
    api = AsaasApi(lambda: KEY, asaas.url)
    read = AsaasStatement(api, lambda _: None, page_size=3)
    transactions = [
        t for page in read.pages(date(2026, 11, 28), date(2026, 12, 1)) for t in page.transactions
    ]
    lines = statement_lines(transactions, api.payment)
    passing = StatementPass(world.dynamodb, world.tables, world.processor(), clock)
    return passing.run("asaas", lines, *WINDOW, known=known_to_asaas(api.payment))


def test_a_payment_no_webhook_brought_is_booked_once_with_asaas_fee_and_net(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a received payment whose webhooks never came, on Asaas's statement with its fee,
    # and two more payments that fill the statement's pages
    order = unique("ord")
    missed = received(order)
    books_hold(asaas, missed, received(unique("ord")), received(unique("ord")))

    # When the statement is read (three lines a page) and passed, twice
    first, second = statement(world, clock, asaas), statement(world, clock, asaas)

    # Then each payment is booked once, found by the statement, with the fee Asaas kept
    assert (first.booked, first.mismatches) == (3, [])
    assert (second.booked, second.already_booked, second.mismatches) == (0, 3, [])
    state = world.order(order)
    assert (state.paid_total, state.fee_total, state.net_total) == (5000, 99, 4901)
    [announced] = world.outbox(order)
    assert announced["found_by_statement"] is True


def chargeback_lines(payment: dict[str, Any], *kinds: str) -> list[dict[str, Any]]:
    """The statement's lines of the payment's chargeback: the value blocked (`CHARGEBACK`),
    given back if reversed for the merchant (`CHARGEBACK_REVERSAL`)."""
    value = float(payment["chargeback"]["value"])
    signs = {"CHARGEBACK": -1, "CHARGEBACK_REVERSAL": 1}
    return [
        {
            "object": "financialTransaction",
            "id": unique("ftn"),
            "value": signs[kind] * value,
            "balance": 1000.0,
            "type": kind,
            "date": DAY,
            "description": "Bloqueio por chargeback",
            "paymentId": payment["id"],
        }
        for kind in kinds
    ]


def charged_back(order: str, status: str, chargeback: str) -> dict[str, Any]:
    """A payment received on DAY, then charged back for R$ 30.00 (what a refund left)."""
    payment = received(order, status=status)
    payment["chargeback"] = {
        **shape("asaas/PAYMENT_CHARGEBACK_REQUESTED.json")["payment"]["chargeback"],
        "payment": payment["id"],
        "status": chargeback,
        "value": 30,
    }
    return payment


@pytest.mark.parametrize(
    ("status", "chargeback", "lines", "net", "booked_as"),
    [
        ("CHARGEBACK_REQUESTED", "REQUESTED", ("CHARGEBACK",), 4901 - 3000, "disputed_total"),
        ("CHARGEBACK_DISPUTE", "DISPUTE_LOST", ("CHARGEBACK",), 4901 - 3000, "dispute_lost_total"),
        (
            "AWAITING_CHARGEBACK_REVERSAL",
            "REVERSED",
            ("CHARGEBACK", "CHARGEBACK_REVERSAL"),
            4901,
            "dispute_won_total",
        ),
    ],
)
def test_a_chargeback_moves_the_net_by_its_statement_lines_once(
    world: World,
    clock: FakeClock,
    asaas: FakeProviderApis,
    status: str,
    chargeback: str,
    lines: tuple[str, ...],
    net: int,
    booked_as: str,
) -> None:
    # Given a received payment charged back for R$ 30.00, its receipt delivered, and the
    # statement's lines of the chargeback (blocked; given back when reversed for the merchant)
    order = unique("ord")
    payment = charged_back(order, status, chargeback)
    world.deliver_all(event("PAYMENT_RECEIVED", received(order, id=payment["id"])), "asaas")
    books_hold(asaas, payment)
    for line in chargeback_lines(payment, *lines):
        asaas.asaas_transactions[line["id"]] = line

    # When the statement is passed twice
    first, second = statement(world, clock, asaas), statement(world, clock, asaas)

    # Then the net is what Asaas paid out less what the chargeback kept, recorded once
    assert (first.mismatches, second.mismatches) == ([], [])
    assert second.fees_recorded == 0
    state = world.order(order)
    assert (state.fee_total, state.net_total, state.total(Total(booked_as))) == (99, net, 3000)


def test_a_refund_the_webhooks_missed_is_booked_and_a_later_webhook_is_a_duplicate(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a payment whose receipt was delivered, then refunded in part (R$ 20.00) in silence
    order = unique("ord")
    payment = received(order)
    world.deliver_all(event("PAYMENT_RECEIVED", payment), "asaas")
    refunded = {**payment, "status": "RECEIVED"}
    refunded["refunds"] = [
        {"dateCreated": "2026-11-29 19:00:00", "status": "DONE", "value": 20, "description": None}
    ]
    books_hold(asaas, refunded)

    # When the statement is passed, and the refund's webhook arrives at last
    report = statement(world, clock, asaas)
    late = world.deliver_all(event("PAYMENT_PARTIALLY_REFUNDED", refunded), "asaas")

    # Then the refund counted once and the receipt was found booked
    assert (report.booked, report.already_booked, report.mismatches) == (1, 1, [])
    assert [p.outcome for p in late] == [Outcome.DUPLICATE]
    state = world.order(order)
    assert (state.paid_total, state.refunded_total, state.net_total) == (
        5000,
        2000,
        4901 - 2000,
    )


def test_a_card_payment_not_credited_yet_matches_and_a_payment_asaas_never_had_does_not(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a card payment confirmed today (credited in 30 days: no statement line yet), and
    # a payment booked from a webhook whose payment Asaas does not know (a forgery)
    card_order, forged_order = unique("ord"), unique("ord")
    card = received(card_order, billingType="CREDIT_CARD", status="CONFIRMED")
    asaas.asaas_payments[card["id"]] = card
    world.deliver_all(event("PAYMENT_RECEIVED", card), "asaas")
    world.deliver_all(event("PAYMENT_RECEIVED", received(forged_order)), "asaas")

    # When the day's statement (empty) is passed
    report = statement(world, clock, asaas)

    # Then the card payment is known to Asaas; the other is reported, and stays for a person
    assert [(m.kind, m.order_id) for m in report.mismatches] == [(ENTRY_UNKNOWN, forged_order)]
    assert world.order(forged_order).paid_total == 5000


def test_a_line_naming_a_payment_asaas_does_not_know_is_a_movement_missing(
    world: World, clock: FakeClock, asaas: FakeProviderApis
) -> None:
    # Given a statement line of a payment the payments API does not answer
    ghost = received(unique("ord"))
    for line in lines_of_day(ghost):
        asaas.asaas_transactions[line["id"]] = line

    # When the statement is passed
    report = statement(world, clock, asaas)

    # Then it is reported, and nothing is booked
    assert [m.kind for m in report.mismatches] == [MOVEMENT_MISSING]
    assert world.outbox() == []
