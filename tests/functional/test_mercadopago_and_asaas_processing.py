"""Mercado Pago and Asaas deliveries through the same transaction, on moto; the payments API
is a real HTTP server on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from devstack.provider_apis import FakeProviderApis
from fixtures.shapes import EVENTS_DIR
from functions.mercadopago.api import (
    MercadoPagoApi,
    ProviderApiRefusedError,
    ProviderApiUnavailableError,
)
from functions.process.interpreters import Interpreters
from functions.process.mercadopago_disputes import LedgerDisputes
from functions.process.service import EffectProcessor
from functions.shared.domain import (
    COUNTED_OUTCOMES,
    Delivery,
    Effect,
    Money,
    Outcome,
    Transition,
)
from functions.shared.errors import MalformedEventError
from functions.shared.items import Order
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
    """Wired as the process Lambda is: the payments API, and the ledger for what a payment's
    dispute already booked."""
    api = MercadoPagoApi(lambda: token, base_url=base_url, timeout_seconds=2)
    return EffectProcessor(
        world.dynamodb,
        world.tables,
        FakeClock(),
        Interpreters.build(
            mercadopago_payments=api.payment,
            mercadopago_disputes=LedgerDisputes(world.dynamodb, world.tables.ledger),
        ),
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
    assert (state.financial_status, state.paid_total, state.refunded_total) == (
        "refunded",
        5000,
        5000,
    )
    assert len(world.outbox("ord_1042")) == 3
    assert world.mismatches("ord_1042") == []
    assert world.snapshot() == snapshot
    assert paid.outcome is Outcome.APPLIED
    # Refunded in full and never disputed: nothing is left that a hold could release
    assert [p.outcome for p in after_refunds] == [
        Outcome.DUPLICATE,
        Outcome.APPLIED,
        Outcome.APPLIED,
    ]
    assert {p.outcome for p in replay} == {Outcome.DUPLICATE}


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

    outcomes = [
        p.outcome
        for body in (confirmed, received, refunded)
        for p in world.deliver_all(body, "asaas")
    ]

    state = world.order("ord_1042")
    assert (state.financial_status, state.paid_total, state.refunded_total) == (
        "refunded",
        5000,
        5000,
    )
    assert world.mismatches("ord_1042") == []
    assert outcomes == [Outcome.APPLIED, Outcome.DUPLICATE, Outcome.APPLIED]


PAYMENT_ID = "1325896547"


def payment_now(name: str, **changes: Any) -> dict[str, Any]:
    """A captured payment shape, as the payment the notification names is answered now."""
    return {**payment(name), "id": int(PAYMENT_ID), "external_reference": "ord_1042", **changes}


def counted(world: World, order_id: str) -> list[tuple[str, str, int]]:
    """The order's counted entries: (transition, external ref, amount), sorted."""
    return sorted(
        (str(e.transition), str(e.external_ref), e.amount or 0)
        for e in world.effects(order_id)
        if e.outcome in COUNTED_OUTCOMES
    )


def dispute_totals(state: Order) -> tuple[int, int, int]:
    return (state.disputed_total, state.dispute_won_total, state.dispute_lost_total)


def test_mercadopago_mediation_escalated_to_a_chargeback_is_one_dispute_closed_by_its_verdict(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given a payment read approved, then held by a mediation
    processor = processor_with(world, payments_api.url)
    for stage in ("payment", "payment.in_mediation"):
        payments_api.payments[PAYMENT_ID] = payment_now(stage)
        processor.process("mercadopago", NOTIFICATION)

    # When the mediation escalates to a chargeback, which is then settled against the seller
    for stage in ("payment.charged_back", "payment.charged_back_settled"):
        payments_api.payments[PAYMENT_ID] = payment_now(stage)
        processor.process("mercadopago", NOTIFICATION)

    # Then the claim withdrew the money once, and its verdict closed it: lost, nothing held
    state = world.order("ord_1042")
    assert (state.financial_status, state.paid_total) == ("dispute_lost", 5000)
    assert dispute_totals(state) == (0, 0, 5000)
    assert counted(world, "ord_1042") == [
        ("order.dispute_lost", f"{PAYMENT_ID}:dispute", 5000),
        ("order.disputed", f"{PAYMENT_ID}:dispute", 5000),
        ("order.paid", PAYMENT_ID, 5000),
    ]
    assert world.mismatches("ord_1042") == []


def test_mercadopago_dispute_lost_read_again_is_no_second_claim(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given a payment held by a mediation that escalated to a chargeback settled against the
    # seller: its dispute's verdict counted, lost (not a mediation's release)
    processor = processor_with(world, payments_api.url)
    for stage in ("payment", "payment.in_mediation", "payment.charged_back"):
        payments_api.payments[PAYMENT_ID] = payment_now(stage)
        processor.process("mercadopago", NOTIFICATION)
    payments_api.payments[PAYMENT_ID] = payment_now("payment.charged_back_settled")

    # When the payment, still charged back, is notified and read again, and again
    processor.process("mercadopago", NOTIFICATION)
    again = [processor.process("mercadopago", NOTIFICATION) for _ in range(2)]

    # Then it is the same one dispute: the settled verdict is no release, so no chargeback
    # filed afterwards is read into it, and nothing counts twice
    state = world.order("ord_1042")
    assert dispute_totals(state) == (0, 0, 5000)
    assert counted(world, "ord_1042") == [
        ("order.dispute_lost", f"{PAYMENT_ID}:dispute", 5000),
        ("order.disputed", f"{PAYMENT_ID}:dispute", 5000),
        ("order.paid", PAYMENT_ID, 5000),
    ]
    assert all(p.outcome.value == "duplicate" for run in again for p in run)
    assert world.mismatches("ord_1042") == []


def test_mercadopago_chargeback_after_a_mediation_the_seller_won_is_a_second_claim(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given a payment read approved, held by a mediation, then approved again (the seller won)
    processor = processor_with(world, payments_api.url)
    released = {"date_last_updated": "2026-12-05T09:00:00.000-04:00"}
    for stage, changes in (("payment", {}), ("payment.in_mediation", {}), ("payment", released)):
        payments_api.payments[PAYMENT_ID] = payment_now(stage, **changes)
        processor.process("mercadopago", NOTIFICATION)

    # When the buyer then files a chargeback with the card issuer, settled against the seller,
    # and every notification is delivered again afterwards
    for stage in ("payment.charged_back", "payment.charged_back_settled"):
        payments_api.payments[PAYMENT_ID] = payment_now(stage)
        processor.process("mercadopago", NOTIFICATION)
    again = [processor.process("mercadopago", NOTIFICATION) for _ in range(3)]

    # Then the mediation held and released the money, and the chargeback withdrew it again, for
    # good: two claims, each settled once, nothing counted twice
    state = world.order("ord_1042")
    assert (state.financial_status, state.paid_total) == ("dispute_lost", 5000)
    assert dispute_totals(state) == (0, 5000, 5000)
    assert counted(world, "ord_1042") == [
        ("order.dispute_lost", f"{PAYMENT_ID}:chargeback", 5000),
        ("order.dispute_won", f"{PAYMENT_ID}:dispute", 5000),
        ("order.disputed", f"{PAYMENT_ID}:chargeback", 5000),
        ("order.disputed", f"{PAYMENT_ID}:dispute", 5000),
        ("order.paid", PAYMENT_ID, 5000),
    ]
    assert all(p.outcome.value == "duplicate" for run in again for p in run)
    assert world.mismatches("ord_1042") == []


def test_mercadopago_dispute_after_a_partial_refund_holds_and_releases_what_was_left(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given a payment of 50.00 refunded 20.00, then held by a mediation
    processor = processor_with(world, payments_api.url)
    refunded = {**payment("payment.refunded")["refunds"][0], "payment_id": int(PAYMENT_ID)}
    after_refund = {"refunds": [refunded], "transaction_amount_refunded": 20}
    payments_api.payments[PAYMENT_ID] = payment_now(
        "payment", status_detail="partially_refunded", **after_refund
    )
    processor.process("mercadopago", NOTIFICATION)
    payments_api.payments[PAYMENT_ID] = payment_now("payment.in_mediation", **after_refund)
    processor.process("mercadopago", NOTIFICATION)
    held = world.order("ord_1042")

    # When the seller wins the mediation (the payment is approved again)
    payments_api.payments[PAYMENT_ID] = payment_now(
        "payment",
        status_detail="partially_refunded",
        date_last_updated="2026-12-20T10:00:00.000-04:00",
        **after_refund,
    )
    processor.process("mercadopago", NOTIFICATION)

    # Then the dispute held the 30.00 left, and gave back exactly that
    assert dispute_totals(held) == (3000, 0, 0)
    state = world.order("ord_1042")
    assert (state.paid_total, state.refunded_total) == (5000, 2000)
    assert dispute_totals(state) == (0, 3000, 0)
    assert state.financial_status == "partially_refunded"
    assert world.mismatches("ord_1042") == []


def test_mercadopago_mediation_closed_by_the_sellers_refund_releases_what_it_held(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given a payment held by a mediation
    processor = processor_with(world, payments_api.url)
    payments_api.payments[PAYMENT_ID] = payment_now("payment.in_mediation")
    processor.process("mercadopago", NOTIFICATION)

    # When the seller refunds the buyer in full to close it: nothing is left on the payment,
    # yet the hold it withdrew must come back before the refund takes the money
    payments_api.payments[PAYMENT_ID] = payment_now(
        "payment.refunded",
        refunds=[
            {**payment("payment.refunded")["refunds"][0], "amount": 50, "id": 2187650001},
        ],
        date_last_updated="2026-12-20T10:00:00.000-04:00",
    )
    processor.process("mercadopago", NOTIFICATION)

    # Then the hold closes for what it withdrew, neither won nor lost, the seller's refund
    # counts, nothing is left, and no one is told the merchant won
    state = world.order("ord_1042")
    assert (state.paid_total, state.refunded_total) == (5000, 5000)
    assert dispute_totals(state) == (0, 0, 0)
    assert state.financial_status == "refunded"
    assert world.mismatches("ord_1042") == []
    assert sorted(i["transition"] for i in world.outbox("ord_1042")) == [
        "order.dispute_refunded",
        "order.disputed",
        "order.paid",
        "order.refunded",
    ]


def refunded_by_buyer_protection(amount: float) -> dict[str, Any]:
    """The payment after Mercado Pago's buyer protection resolved a claim for the buyer."""
    refund = {
        **payment("payment.refunded")["refunds"][0],
        "id": 2900000001,
        "amount": amount,
        "source": {"id": "1", "name": "Mercado Pago", "type": "bpp"},
    }
    return payment_now(
        "payment.refunded",
        status_detail="bpp_refunded",
        refunds=[refund],
        transaction_amount_refunded=amount,
        date_last_updated="2026-12-20T10:00:00.000-04:00",
    )


@pytest.mark.parametrize("mediation_read", [True, False])
def test_mercadopago_mediation_lost_by_buyer_protection_is_a_dispute_lost_not_a_refund(
    world: World, payments_api: FakeProviderApis, mediation_read: bool
) -> None:
    # Given a payment read approved, and held by a mediation (read, or never read)
    processor = processor_with(world, payments_api.url)
    stages = ("payment", "payment.in_mediation") if mediation_read else ("payment",)
    for stage in stages:
        payments_api.payments[PAYMENT_ID] = payment_now(stage)
        processor.process("mercadopago", NOTIFICATION)

    # When the buyer wins: buyer protection refunds the 50.00 from the seller's money, and the
    # notification is delivered again afterwards
    payments_api.payments[PAYMENT_ID] = refunded_by_buyer_protection(50)
    processor.process("mercadopago", NOTIFICATION)
    again = processor.process("mercadopago", NOTIFICATION)

    # Then the claim is lost once, nothing is booked as refunded by the seller or won, and the
    # buyer is told the dispute went their way
    state = world.order("ord_1042")
    assert (state.paid_total, state.refunded_total) == (5000, 0)
    assert dispute_totals(state) == (0, 0, 5000)
    assert state.financial_status == "dispute_lost"
    assert counted(world, "ord_1042") == [
        ("order.dispute_lost", f"{PAYMENT_ID}:dispute", 5000),
        ("order.disputed", f"{PAYMENT_ID}:dispute", 5000),
        ("order.paid", PAYMENT_ID, 5000),
    ]
    assert all(p.outcome.value == "duplicate" for p in again)
    assert world.mismatches("ord_1042") == []


def booked_before_one_dispute(world: World, ref: str, transition: Transition, stage: str) -> None:
    """An entry the map booked before one dispute per payment (`{id}:mediation`,
    `{id}:chargeback`) when it read the payment at `stage`, through the same transaction."""
    at = datetime.fromisoformat(payment(stage)["date_last_updated"])
    old_map = Effect(
        delivery=Delivery("mercadopago", f"before:{ref}:{transition}", "payment.updated", 0),
        transition=transition,
        external_ref=ref,
        amount=Money(5000, "brl"),
        order_id="ord_1042",
        order_lookup=(PAYMENT_ID,),
        payment=PAYMENT_ID,
    )
    old_map = replace(old_map, delivery=replace(old_map.delivery, created=int(at.timestamp())))
    before = EffectProcessor(
        world.dynamodb,
        world.tables,
        FakeClock(),
        Interpreters({"mercadopago": lambda _: [old_map]}),
    )
    [booked] = before.process("mercadopago", "{}")
    assert booked.outcome is Outcome.APPLIED


@pytest.mark.parametrize(
    ("resolution", "totals", "status", "verdict"),
    [
        # Escalated after the deploy, then settled: the old mediation is the dispute it closes
        (
            ("payment.charged_back", "payment.charged_back_settled"),
            (0, 0, 5000),
            "dispute_lost",
            "order.dispute_lost",
        ),
        # Released after the deploy
        (("payment",), (0, 5000, 0), "dispute_won", "order.dispute_won"),
    ],
)
def test_mercadopago_mediation_booked_under_its_old_key_is_the_dispute_its_resolution_settles(
    world: World,
    payments_api: FakeProviderApis,
    resolution: tuple[str, ...],
    totals: tuple[int, int, int],
    status: str,
    verdict: str,
) -> None:
    # Given a payment whose mediation was booked as `{id}:mediation` before the deploy
    processor = processor_with(world, payments_api.url)
    payments_api.payments[PAYMENT_ID] = payment_now("payment")
    processor.process("mercadopago", NOTIFICATION)
    booked_before_one_dispute(
        world, f"{PAYMENT_ID}:mediation", Transition.DISPUTED, "payment.in_mediation"
    )

    # When the mediation is read again, then resolved, after the deploy
    for stage in ("payment.in_mediation", *resolution):
        payments_api.payments[PAYMENT_ID] = payment_now(stage)
        processor.process("mercadopago", NOTIFICATION)

    # Then it withdrew once, and its resolution closed it, under the key it was booked under
    state = world.order("ord_1042")
    assert (dispute_totals(state), state.financial_status) == (totals, status)
    assert counted(world, "ord_1042") == sorted(
        [
            ("order.disputed", f"{PAYMENT_ID}:mediation", 5000),
            (verdict, f"{PAYMENT_ID}:mediation", 5000),
            ("order.paid", PAYMENT_ID, 5000),
        ]
    )
    assert world.mismatches("ord_1042") == []


def test_mercadopago_chargeback_settled_under_its_old_key_and_resent_books_nothing_again(
    world: World, payments_api: FakeProviderApis
) -> None:
    # Given a payment whose chargeback was opened and lost as `{id}:chargeback` before the
    # deploy
    processor = processor_with(world, payments_api.url)
    payments_api.payments[PAYMENT_ID] = payment_now("payment")
    processor.process("mercadopago", NOTIFICATION)
    for transition in (Transition.DISPUTED, Transition.DISPUTE_LOST):
        booked_before_one_dispute(
            world, f"{PAYMENT_ID}:chargeback", transition, "payment.charged_back_settled"
        )
    before = world.snapshot()

    # When its notification is resent (or replayed) after the deploy
    payments_api.payments[PAYMENT_ID] = payment_now("payment.charged_back_settled")
    resent = processor.process("mercadopago", NOTIFICATION)

    # Then it is the chargeback already booked: nothing is withdrawn or lost a second time
    assert [p.outcome for p in resent] == [Outcome.DUPLICATE] * 3
    assert world.snapshot() == before
    assert dispute_totals(world.order("ord_1042")) == (0, 0, 5000)


def asaas_event(name: str, event_id: str, **payment_changes: Any) -> str:
    """A captured Asaas event of one payment (the same id and order whatever the shape)."""
    event: dict[str, Any] = json.loads((EVENTS_DIR / "asaas" / f"{name}.json").read_text())
    event["id"] = event_id
    event["payment"].update(
        {"id": "pay_080225913252", "externalReference": "ord_1042", **payment_changes}
    )
    return json.dumps(event)


def test_asaas_chargeback_after_a_partial_refund_withdraws_and_loses_only_its_own_value(
    world: World,
) -> None:
    # Given a payment of 50.00, refunded 20.00
    refund = {"dateCreated": "2026-11-30 09:12:40", "status": "DONE", "value": 20}
    world.deliver_all(asaas_event("PAYMENT_RECEIVED", "evt_paid&1"), "asaas")
    world.deliver_all(
        asaas_event("PAYMENT_PARTIALLY_REFUNDED", "evt_refund&2", refunds=[refund]), "asaas"
    )

    # When the cardholder charges back the 30.00 left, and the merchant loses the dispute
    chargeback = json.loads((EVENTS_DIR / "asaas" / "PAYMENT_CHARGEBACK_DISPUTE.json").read_text())
    disputed = {**chargeback["payment"]["chargeback"], "value": 30}
    for n, (name, status) in enumerate(
        [("PAYMENT_CHARGEBACK_REQUESTED", "REQUESTED"), ("PAYMENT_CHARGEBACK_DISPUTE", "DONE")]
    ):
        body = asaas_event(
            name, f"evt_cb&{3 + n}", refunds=[refund], chargeback={**disputed, "status": status}
        )
        world.deliver_all(body, "asaas")

    # Then the books hold the payment, the refund, and the 30.00 lost, nothing still withdrawn
    state = world.order("ord_1042")
    assert (state.paid_total, state.refunded_total) == (5000, 2000)
    assert dispute_totals(state) == (0, 0, 3000)
    assert state.financial_status == "dispute_lost"
    assert counted(world, "ord_1042") == sorted(
        [
            ("order.paid", "pay_080225913252", 5000),
            ("order.refunded", "pay_080225913252:refund:2026-11-30 09:12:40:2000#1", 2000),
            ("order.disputed", "pay_080225913252:chargeback", 3000),
            ("order.dispute_lost", "pay_080225913252:chargeback", 3000),
        ]
    )
    assert world.mismatches("ord_1042") == []
