"""Mercado Pago and Asaas deliveries through the same transaction, on moto; the payments API
is a real HTTP server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from functions.process.mercadopago_api import (
    MercadoPagoApi,
    ProviderApiRefusedError,
    ProviderApiUnavailableError,
)
from functions.process.service import EffectProcessor
from functions.shared.domain import Outcome, financial_status
from functions.shared.errors import MalformedEventError
from functions.shared.providers import Interpreters
from local_stack.provider_apis import FakeProviderApis
from provider_events.shapes import EVENTS_DIR
from tests.support.clock import FakeClock
from tests.support.world import World

NOTIFICATION = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text()
TOKEN = "APP_USR-test-token-not-real"


@pytest.fixture
def payments_api() -> Iterator[FakeProviderApis]:
    api = FakeProviderApis(mercadopago_token=TOKEN).start()
    yield api
    api.stop()


def payment(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS_DIR / "mercadopago" / f"{name}.json").read_text())
    return loaded


def processor_with(world: World, base_url: str, token: str = TOKEN) -> EffectProcessor:
    api = MercadoPagoApi(lambda: token, base_url=base_url, timeout_seconds=2)
    return EffectProcessor(
        world.dynamodb,
        world.tables,
        FakeClock(),
        Interpreters.build(mercadopago_payments=api.payment),
    )


def test_mercadopago_payment_then_its_refunds_balance_and_replay_as_duplicates(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given Mercado Pago notifies the payment while it is approved
    api = payments_api
    processor = processor_with(world, payments_api.url)
    api.payments["1325896547"] = payment("payment")
    [paid, _no_hold_to_release] = processor.process("mercadopago", NOTIFICATION)

    # When it notifies again after two partial refunds, and then resends that notification
    api.payments["1325896547"] = payment("payment.refunded")
    after_refunds = processor.process("mercadopago", NOTIFICATION)
    snapshot = world.snapshot()
    replay = processor.process("mercadopago", NOTIFICATION)

    # Then the order holds the payment and both refunds once each
    state = world.order("ord_1042")
    assert (financial_status(state), state["paid_total"], state["refunded_total"]) == (
        "refunded",
        5000,
        5000,
    )
    assert len(world.outbox("ord_1042")) == 3
    assert world.mismatches("ord_1042") == []
    assert world.snapshot() == snapshot
    assert paid.outcome is Outcome.APPLIED
    assert [p.outcome for p in after_refunds] == [
        Outcome.DUPLICATE,
        Outcome.APPLIED,
        Outcome.APPLIED,
        Outcome.IGNORED,  # refunded, not in mediation: no hold was open to release
    ]
    assert {p.outcome for p in replay} == {Outcome.DUPLICATE, Outcome.IGNORED}


@pytest.mark.parametrize(
    ("status", "error"), [(404, ProviderApiUnavailableError), (503, ProviderApiUnavailableError)]
)
def test_mercadopago_api_unavailable_is_retried_and_writes_nothing(
    world: World,
    payments_api: FakeProviderApis,
    status: int,
    error: type[Exception],
) -> None:
    api = payments_api
    api.status_override = status
    before = world.snapshot()

    with pytest.raises(error):
        processor_with(world, payments_api.url).process("mercadopago", NOTIFICATION)

    assert world.snapshot() == before


def test_mercadopago_api_refusing_our_token_is_a_configuration_failure(
    world: World, payments_api: FakeProviderApis
) -> None:

    with pytest.raises(ProviderApiRefusedError):
        processor_with(world, payments_api.url, token="wrong").process("mercadopago", NOTIFICATION)


def test_mercadopago_api_unreachable_is_retried(world: World) -> None:
    with pytest.raises(ProviderApiUnavailableError):
        processor_with(world, "http://127.0.0.1:9").process("mercadopago", NOTIFICATION)


def test_mercadopago_notification_naming_a_strange_id_is_malformed(world: World) -> None:
    body = json.dumps({**json.loads(NOTIFICATION), "data": {"id": "../admin"}})

    with pytest.raises(MalformedEventError):
        processor_with(world, "http://127.0.0.1:9").process("mercadopago", body)


def test_asaas_confirmed_received_and_refunded_apply_one_payment_and_one_refund(
    world: World,
) -> None:
    received = (EVENTS_DIR / "asaas" / "PAYMENT_RECEIVED.json").read_text()
    confirmed = json.dumps({**json.loads(received), "event": "PAYMENT_CONFIRMED", "id": "evt_c&1"})
    refunded = (EVENTS_DIR / "asaas" / "PAYMENT_REFUNDED.json").read_text()
    processor = EffectProcessor(world.dynamodb, world.tables, FakeClock())

    outcomes = [
        p.outcome
        for body in (confirmed, received, refunded)
        for p in processor.process("asaas", body)
    ]

    state = world.order("ord_1042")
    assert (financial_status(state), state["paid_total"], state["refunded_total"]) == (
        "refunded",
        5000,
        5000,
    )
    assert world.mismatches("ord_1042") == []
    assert outcomes == [Outcome.APPLIED, Outcome.DUPLICATE, Outcome.APPLIED]
