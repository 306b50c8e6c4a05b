"""The money lifecycle on moto: every movement a signed entry, counted once, announced once
(late ones too), and the order's financial status what its totals say."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.provider_apis import FakeProviderApis
from fixtures import stripe
from fixtures.shapes import EVENTS_DIR
from functions.process.interpreters import Interpreters
from functions.process.service import EffectProcessor
from functions.shared.domain import Outcome, Total
from functions.stripe.api import StripeApi
from tests.functional.test_mercadopago_and_asaas_processing import NOTIFICATION, processor_with
from tests.support.clients import RequestCounter
from tests.support.clock import FakeClock
from tests.support.world import World

T0 = 1_764_460_800
AMOUNT = 5000
STRIPE_KEY = "rk_test_not_a_real_key"
MP_TOKEN = "APP_USR-test-token-not-real"


def counted(world: World, order: str) -> list[tuple[str, str]]:
    return sorted(
        (str(e.transition), e.outcome)
        for e in world.effects(order)
        if e.outcome in ("applied", "stale")
    )


def announced(world: World, order: str) -> list[tuple[str, bool]]:
    return sorted((i["transition"], bool(i["late"])) for i in world.outbox(order))


def paid(world: World, amount: int = AMOUNT) -> tuple[str, str, str]:
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    world.deliver(stripe.payment_intent_succeeded(order, intent, amount, T0, charge))
    return order, intent, charge


# -- refunds and their reversals ------------------------------------------------------------


def test_partial_refund_leaves_the_order_partially_refunded(world: World) -> None:
    order, intent, charge = paid(world, 10000)

    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, charge))

    state = world.order(order)
    assert state.financial_status == "partially_refunded"
    assert (state.paid_total, state.refunded_total) == (10000, 1000)


def test_refund_failing_after_it_succeeded_takes_its_money_back_and_is_announced(
    world: World,
) -> None:
    # Given a paid order with a succeeded partial refund
    order, intent, charge = paid(world)
    refund = stripe.unique("re")
    world.deliver(stripe.refund_created(intent, refund, 2000, T0 + 60, charge))

    # When the refund fails, announced twice
    first = world.deliver(stripe.refund_failed(intent, refund, 2000, T0 + 3600, charge))
    again = world.deliver(stripe.refund_failed(intent, refund, 2000, T0 + 3700, charge))

    # Then its amount is out of the refunded total once, and the reversal is announced once
    state = world.order(order)
    assert (state.refunded_total, state.financial_status) == (0, "paid")
    assert ("order.refund_reversed", False) in announced(world, order)
    assert len(world.outbox(order)) == 3
    assert world.mismatches(order) == []
    assert (first.outcome, again.outcome) == (Outcome.APPLIED, Outcome.DUPLICATE)


def test_refund_that_never_succeeded_never_counts_even_if_its_success_arrives_late(
    world: World,
) -> None:
    # Given a paid order whose refund's failure arrives before any success of it
    order, intent, charge = paid(world)
    refund = stripe.unique("re")
    voided = world.deliver(stripe.refund_failed(intent, refund, 2000, T0 + 3600, charge))

    # When an older "succeeded" of that refund arrives afterwards
    late = world.deliver(stripe.refund_created(intent, refund, 2000, T0 + 60, charge))

    # Then neither counts: nothing refunded, nothing announced but the payment
    state = world.order(order)
    assert (state.refunded_total, state.financial_status) == (0, "paid")
    assert announced(world, order) == [("order.paid", False)]
    assert world.mismatches(order) == []
    assert (voided.outcome, late.outcome) == (Outcome.VOIDED, Outcome.DUPLICATE)


def test_a_refund_counted_stale_that_fails_takes_its_money_back(world: World) -> None:
    # Given a paid order refunded 1000 late (after a later refund of 500 had landed): the
    # earlier refund counted stale
    order, intent, charge = paid(world)
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 500, T0 + 7200, charge))
    refund = stripe.unique("re")
    late = world.deliver(stripe.refund_created(intent, refund, 1000, T0 + 60, charge))
    assert late.outcome is Outcome.STALE

    # When that refund fails
    failed = world.deliver(stripe.refund_failed(intent, refund, 1000, T0 + 9000, charge))

    # Then its failure reverses what it counted: only the other refund stays refunded
    assert failed.outcome is Outcome.APPLIED
    state = world.order(order)
    assert state.refunded_total == 500
    assert ("order.refund_reversed", False) in announced(world, order)
    assert world.mismatches(order) == []


def test_canceled_refund_that_never_succeeded_is_voided(world: World) -> None:
    order, intent, charge = paid(world)
    body = json.loads(stripe.fixture_text("refund.updated.canceled"))
    body["data"]["object"].update({"payment_intent": intent, "charge": charge, "metadata": {}})

    processed = world.deliver(json.dumps(body))

    assert processed.outcome is Outcome.VOIDED
    assert world.order(order).refunded_total == 0
    assert world.mismatches(order) == []


def test_earlier_partial_refund_arriving_last_is_counted_and_announced_late(world: World) -> None:
    # Given two partial refunds, the later delivered first
    order, intent, charge = paid(world, 10000)
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 2000, T0 + 120, charge))

    # When the earlier one arrives
    late = world.deliver(stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, charge))

    # Then it counts, and EventBridge consumers hear of it once, flagged late
    assert late.outcome is Outcome.STALE
    assert world.order(order).refunded_total == 3000
    assert announced(world, order) == [
        ("order.paid", False),
        ("order.refunded", False),
        ("order.refunded", True),
    ]
    [late_item] = [i for i in world.outbox(order) if i["late"]]
    assert late_item["provider_time"] == T0 + 60
    assert world.mismatches(order) == []


def test_stale_delivery_redelivered_while_the_first_is_in_flight_counts_once(world: World) -> None:
    # Given a refund applied, and its older payment then delivered four times at once
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    world.deliver(
        stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0 + 60, order_id=order)
    )
    payment = stripe.payment_intent_succeeded(order, intent, AMOUNT, T0)

    results = world.deliver_in_parallel(payment, 4)

    # Then one is stale and counted, the rest duplicates
    assert sorted(r.outcome for r in results) == [Outcome.DUPLICATE] * 3 + [Outcome.STALE]
    assert world.order(order).paid_total == AMOUNT
    assert world.mismatches(order) == []


def test_second_payment_in_the_same_second_as_a_refund_is_applied_and_announced(
    world: World,
) -> None:
    # Given an order paid, then refunded at second T0 + 60
    order, intent, charge = paid(world)
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), AMOUNT, T0 + 60, charge))

    # When a new payment of the same order is stamped with that same second
    again = world.deliver(
        stripe.payment_intent_succeeded(order, stripe.unique("pi"), AMOUNT, T0 + 60)
    )

    # Then it applies (it is another payment's lifecycle) and is announced on time
    state = world.order(order)
    assert again.outcome is Outcome.APPLIED
    assert (state.lifecycle_status, state.paid_total) == ("paid", 2 * AMOUNT)
    assert announced(world, order).count(("order.paid", False)) == 2


def test_two_event_types_naming_one_payment_with_different_amounts_are_flagged(
    world: World,
) -> None:
    order, intent, charge = paid(world)

    other = world.deliver(stripe.charge_succeeded(order, intent, charge, 4000, T0))

    assert other.outcome is Outcome.DUPLICATE
    assert other.amount_disagrees
    assert "4000" in other.detail
    assert world.order(order).paid_total == AMOUNT  # the first counted, the other flagged


def test_order_lookup_reads_the_payment_binding_consistently(world: World) -> None:
    order, intent, charge = paid(world)
    requests: list[dict[str, Any]] = []
    original = world.dynamodb.batch_get_item

    def recording(**kwargs: Any) -> Any:
        requests.append(kwargs)
        return original(**kwargs)

    world.dynamodb.batch_get_item = recording  # type: ignore[method-assign]
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, charge))

    # The lookup is consistent (a binding it missed would make the refund wait); the read
    # before the transaction need not be (what it misses, the transaction decides)
    lookup, before_writing = (
        [table["ConsistentRead"] for table in r["RequestItems"].values()] for r in requests
    )
    assert (lookup, before_writing) == ([True], [False])
    assert world.order(order).refunded_total == 1000


def test_a_refunds_failure_reads_the_refund_it_reverses_consistently(world: World) -> None:
    # Given a paid order with a succeeded refund
    order, intent, charge = paid(world)
    refund = stripe.unique("re")
    world.deliver(stripe.refund_created(intent, refund, 1000, T0 + 60, charge))
    requests: list[dict[str, Any]] = []
    original = world.dynamodb.batch_get_item

    def recording(**kwargs: Any) -> Any:
        requests.append(kwargs)
        return original(**kwargs)

    world.dynamodb.batch_get_item = recording  # type: ignore[method-assign]

    # When the refund fails
    world.deliver(stripe.refund_failed(intent, refund, 1000, T0 + 3600, charge))

    # Then the read before the transaction, which reads the refund it settles, is consistent
    # (what the reversal posts is what that refund counted: a lagging read could miss it)
    lookup, before_writing = (
        [table["ConsistentRead"] for table in r["RequestItems"].values()] for r in requests
    )
    assert (lookup, before_writing) == ([True], [True])
    assert world.order(order).refunded_total == 0


# -- disputes and inquiries -----------------------------------------------------------------


def dispute(template: str, intent: str, dispute_id: str, at: int) -> str:
    return stripe.dispute_event(template, intent, dispute_id, AMOUNT, at, T0 + 3600)


def test_won_dispute_puts_the_money_back_once_whichever_events_say_so(world: World) -> None:
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    world.deliver_all(dispute("charge.dispute.created", intent, case, T0 + 3600))
    assert world.order(order).financial_status == "disputed"

    world.deliver_all(dispute("charge.dispute.closed.won", intent, case, T0 + 90_000))
    world.deliver_all(dispute("charge.dispute.funds_reinstated", intent, case, T0 + 90_001))

    state = world.order(order)
    assert state.financial_status == "dispute_won"
    assert (state.disputed_total, state.dispute_won_total) == (0, AMOUNT)
    assert counted(world, order) == [
        ("order.dispute_won", "applied"),
        ("order.disputed", "applied"),
        ("order.paid", "applied"),
    ]
    assert len(world.outbox(order)) == 3
    assert world.mismatches(order) == []


def test_lost_dispute_arriving_before_its_opening_counts_the_money_out_once(world: World) -> None:
    # Given a paid order whose dispute's verdict arrives before the dispute's own events
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    world.deliver_all(dispute("charge.dispute.closed.lost", intent, case, T0 + 90_000))

    # When the opening arrives late, twice
    world.deliver_all(dispute("charge.dispute.created", intent, case, T0 + 3600))
    world.deliver_all(dispute("charge.dispute.funds_withdrawn", intent, case, T0 + 3600))

    # Then the money is out once, for good
    state = world.order(order)
    assert state.financial_status == "dispute_lost"
    assert (state.disputed_total, state.dispute_lost_total) == (0, AMOUNT)
    assert world.mismatches(order) == []


def test_inquiry_is_visible_but_is_not_disputed_money(world: World) -> None:
    order, intent, _ = paid(world)
    case = stripe.unique("du")

    world.deliver_all(dispute("charge.dispute.created.inquiry", intent, case, T0 + 3600))
    opened = world.order(order)
    world.deliver_all(dispute("charge.dispute.closed.warning_closed", intent, case, T0 + 9000))

    assert (
        opened.financial_status,
        opened.inquiry_total,
        opened.disputed_total,
    ) == (
        "inquiry",
        AMOUNT,
        0,
    )
    assert world.order(order).financial_status == "paid"
    assert world.mismatches(order) == []


# -- Stripe's charge.refunded on older API versions, through its refunds API -----------------


@pytest.fixture
def provider_apis() -> Iterator[FakeProviderApis]:
    apis = FakeProviderApis(mercadopago_token=MP_TOKEN, stripe_key=STRIPE_KEY).start()
    yield apis
    apis.stop()


def charge_refunded_2023(order: str, intent: str, charge: str) -> str:
    event = json.loads(stripe.fixture_text("charge.refunded.2023-10-16"))
    event["id"] = stripe.unique("evt")
    event["data"]["object"].update({"id": charge, "payment_intent": intent})
    event["data"]["object"]["metadata"] = {"order_id": order}
    return json.dumps(event)


def refund_object(refund: str, intent: str, charge: str, amount: int, at: int) -> dict[str, Any]:
    listed: dict[str, Any] = json.loads(
        (EVENTS_DIR / "stripe" / "api.refunds.list.json").read_text()
    )
    return {
        **listed["data"][0],
        "id": refund,
        "amount": amount,
        "created": at,
        "charge": charge,
        "payment_intent": intent,
        "status": "succeeded",
    }


def stripe_processor(world: World, apis: FakeProviderApis) -> EffectProcessor:
    api = StripeApi(lambda: STRIPE_KEY, base_url=apis.url, timeout_seconds=2, page_size=2)
    return EffectProcessor(
        world.dynamodb,
        world.tables,
        FakeClock(),
        Interpreters.build(stripe_refunds=api.refunds_of_charge),
    )


def test_charge_refunded_on_2023_10_16_reads_every_refund_page_and_counts_each_once(
    world: World, provider_apis: FakeProviderApis
) -> None:
    # Given a paid order whose charge has five refunds, listed by the API two per page
    order, intent, charge = paid(world, 10000)
    refunds = [stripe.unique("re") for _ in range(5)]
    provider_apis.refunds[charge] = [
        refund_object(r, intent, charge, 1000, T0 + 100 - n) for n, r in enumerate(refunds)
    ]
    processor = stripe_processor(world, provider_apis)

    # When charge.refunded arrives, then one refund also announces itself by refund.created
    results = processor.process("stripe", charge_refunded_2023(order, intent, charge))
    again = world.deliver(stripe.refund_created(intent, refunds[0], 1000, T0 + 100, charge))

    # Then each refund counts once, keyed by its re_ id, read across three pages
    assert [r.outcome for r in results] == [Outcome.APPLIED] * 5
    assert again.outcome is Outcome.DUPLICATE
    assert world.order(order).refunded_total == 5000
    assert sum(path.startswith("/v1/refunds") for path in provider_apis.requests) == 3
    assert world.mismatches(order) == []


def test_refunds_api_failing_mid_way_writes_nothing_and_the_retry_counts_once(
    world: World, provider_apis: FakeProviderApis
) -> None:
    order, intent, charge = paid(world)
    provider_apis.refunds[charge] = [refund_object(stripe.unique("re"), intent, charge, 500, T0)]
    processor = stripe_processor(world, provider_apis)
    body = charge_refunded_2023(order, intent, charge)
    before = world.snapshot()

    provider_apis.status_override = 503
    with pytest.raises(Exception, match="503"):
        processor.process("stripe", body)
    assert world.snapshot() == before

    provider_apis.status_override = None
    processor.process("stripe", body)
    processor.process("stripe", body)
    assert world.order(order).refunded_total == 500


# -- Asaas and Mercado Pago -----------------------------------------------------------------


def asaas_event(name: str, refunds: list[tuple[str, float, str]]) -> str:
    event = json.loads((EVENTS_DIR / "asaas" / "PAYMENT_PARTIALLY_REFUNDED.json").read_text())
    event["event"] = name
    template = event["payment"]["refunds"][0]
    event["payment"]["refunds"] = [
        {**template, "dateCreated": at, "value": value, "status": status}
        for at, value, status in refunds
    ]
    return json.dumps(event)


def test_asaas_partial_refunds_delivered_again_or_grown_add_only_the_new_ones(
    world: World,
) -> None:
    received = asaas_event("PAYMENT_RECEIVED", [])
    first = ("2026-11-30 09:12:40", 19.99, "DONE")
    second = ("2026-11-30 11:04:58", 0.29, "DONE")
    pending = ("2026-11-30 11:05:30", 5.0, "PENDING")

    world.deliver_all(received, "asaas")
    world.deliver_all(asaas_event("PAYMENT_PARTIALLY_REFUNDED", [first]), "asaas")
    world.deliver_all(asaas_event("PAYMENT_PARTIALLY_REFUNDED", [first]), "asaas")
    world.deliver_all(asaas_event("PAYMENT_PARTIALLY_REFUNDED", [first, second, pending]), "asaas")

    state = world.order("ord_1042")
    assert (state.paid_total, state.refunded_total) == (10000, 1999 + 29)
    assert state.financial_status == "partially_refunded"
    assert world.mismatches("ord_1042") == []


def test_asaas_two_identical_refunds_are_two_entries(world: World) -> None:
    same = ("2026-11-30 09:12:40", 10, "DONE")
    world.deliver_all(asaas_event("PAYMENT_RECEIVED", []), "asaas")

    world.deliver_all(asaas_event("PAYMENT_PARTIALLY_REFUNDED", [same, same]), "asaas")

    assert world.order("ord_1042").refunded_total == 2000


def test_asaas_chargeback_requested_then_won(world: World) -> None:
    events = EVENTS_DIR / "asaas"
    for name in (
        "PAYMENT_RECEIVED.in_cash",
        "PAYMENT_CHARGEBACK_REQUESTED",
        "PAYMENT_CHARGEBACK_DISPUTE",
        "PAYMENT_AWAITING_CHARGEBACK_REVERSAL",
    ):
        body = json.loads((events / f"{name}.json").read_text())
        body["payment"]["id"] = "pay_fake00card1042"
        body["payment"]["value"] = 50
        world.deliver_all(json.dumps(body), "asaas")

    state = world.order("ord_1042")
    assert (state.disputed_total, state.dispute_won_total) == (0, 5000)
    assert world.mismatches("ord_1042") == []


def test_asaas_cash_receipt_undone_reverses_it(world: World) -> None:
    events = EVENTS_DIR / "asaas"
    for name in ("PAYMENT_RECEIVED.in_cash", "PAYMENT_RECEIVED_IN_CASH_UNDONE"):
        world.deliver_all((events / f"{name}.json").read_text(), "asaas")

    state = world.order("ord_1042")
    assert (state.paid_total, state.financial_status) == (0, "unpaid")
    assert counted(world, "ord_1042") == [
        ("order.paid", "applied"),
        ("order.payment_reversed", "applied"),
    ]


def mercadopago_processor(world: World, apis: FakeProviderApis) -> EffectProcessor:
    return processor_with(world, apis.url, MP_TOKEN)


def mercadopago(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS_DIR / "mercadopago" / f"{name}.json").read_text())
    return {**loaded, "id": 1325896547, "external_reference": "ord_1042"}


def test_mercadopago_counts_only_approved_refunds(
    world: World, provider_apis: FakeProviderApis
) -> None:
    provider_apis.payments["1325896547"] = mercadopago("payment.refunds_mixed")

    mercadopago_processor(world, provider_apis).process("mercadopago", NOTIFICATION)

    state = world.order("ord_1042")
    assert (state.paid_total, state.refunded_total) == (5000, 1000)


@pytest.mark.parametrize(
    ("resource", "status", "totals"),
    [
        ("payment.charged_back", "disputed", (5000, 0, 0)),
        ("payment.charged_back_settled", "dispute_lost", (0, 0, 5000)),
        ("payment.mediation_won", "dispute_won", (0, 5000, 0)),
    ],
)
def test_mercadopago_chargebacks_map_to_the_dispute_entries(
    world: World,
    provider_apis: FakeProviderApis,
    resource: str,
    status: str,
    totals: tuple[int, int, int],
) -> None:
    provider_apis.payments["1325896547"] = mercadopago(resource)

    mercadopago_processor(world, provider_apis).process("mercadopago", NOTIFICATION)

    state = world.order("ord_1042")
    assert state.financial_status == status
    assert (
        state.disputed_total,
        state.dispute_won_total,
        state.dispute_lost_total,
    ) == totals


def test_mercadopago_mediation_resolved_releases_the_hold_once(
    world: World, provider_apis: FakeProviderApis
) -> None:
    processor = mercadopago_processor(world, provider_apis)
    provider_apis.payments["1325896547"] = mercadopago("payment.in_mediation")
    processor.process("mercadopago", NOTIFICATION)
    held = world.order("ord_1042")

    provider_apis.payments["1325896547"] = mercadopago("payment")
    processor.process("mercadopago", NOTIFICATION)
    processor.process("mercadopago", NOTIFICATION)

    assert held.financial_status == "disputed"
    state = world.order("ord_1042")
    assert (state.disputed_total, state.financial_status) == (0, "dispute_won")
    assert world.mismatches("ord_1042") == []


def test_mercadopago_zero_decimal_currency_is_not_multiplied(
    world: World, provider_apis: FakeProviderApis
) -> None:
    provider_apis.payments["1325896547"] = mercadopago("payment.clp")

    mercadopago_processor(world, provider_apis).process("mercadopago", NOTIFICATION)

    state = world.order("ord_1042")
    assert (state.paid_total, state.currency) == (5000, "clp")


def test_request_cost_of_an_applied_refund_is_a_lookup_a_read_and_one_transaction(
    world: World,
) -> None:
    _order, intent, charge = paid(world)
    counter = RequestCounter(world.dynamodb)

    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 1000, T0 + 60, charge))

    # The payment's binding (its order), then its key and order (a duplicate or a stale entry
    # would stop there or go straight to its own transaction), then the transaction
    assert dict(counter.by_operation) == {"BatchGetItem": 2, "TransactWriteItems": 1}


def test_a_dispute_has_one_verdict_whatever_events_follow(world: World) -> None:
    # Given a dispute lost, then a funds_reinstated of that dispute (e.g. a partial refund)
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    world.deliver_all(dispute("charge.dispute.created", intent, case, T0 + 3600))
    world.deliver_all(dispute("charge.dispute.closed.lost", intent, case, T0 + 90_000))

    after = world.deliver_all(dispute("charge.dispute.funds_reinstated", intent, case, T0 + 90_100))

    # Then the first verdict stands: nothing is reinstated on top of a lost dispute (the
    # inquiry it might have been, the opening and the verdict are all duplicates)
    state = world.order(order)
    assert [p.outcome for p in after] == [Outcome.DUPLICATE] * 3
    assert (state.dispute_lost_total, state.dispute_won_total) == (AMOUNT, 0)
    assert state.disputed_total == 0
    assert world.mismatches(order) == []


def test_inquiry_escalating_opens_the_dispute_on_time(world: World) -> None:
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    world.deliver_all(dispute("charge.dispute.created.inquiry", intent, case, T0 + 3600))
    escalated = json.loads(dispute("charge.dispute.created", intent, case, T0 + 7200))
    escalated["type"] = "charge.dispute.updated"
    escalated["data"]["previous_attributes"] = {"status": "warning_under_review"}

    results = world.deliver_all(json.dumps(escalated))

    state = world.order(order)
    assert [p.outcome for p in results] == [Outcome.DUPLICATE, Outcome.APPLIED, Outcome.APPLIED]
    assert (state.lifecycle_status, state.financial_status) == ("disputed", "disputed")
    assert announced(world, order).count(("order.disputed", False)) == 1


def shaped_dispute(template: str, intent: str, case: str, at: int, **fields: Any) -> str:
    """A dispute event of `template` with its dispute's fields replaced (status, balance
    transactions), as Stripe sends it at `at`."""
    event = json.loads(dispute(template, intent, case, at))
    event["data"]["object"].update(fields)
    return json.dumps(event)


def moved(amount: int, category: str) -> dict[str, Any]:
    return {"amount": amount, "reporting_category": category, "type": "adjustment"}


def test_a_prevented_dispute_leaves_the_order_paid(world: World) -> None:
    # Given a paid order whose cardholder's dispute Stripe prevented before it was filed
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    prevented = {"status": "prevented", "balance_transactions": []}

    # When Stripe announces it, created and closed, each twice
    for template in ("charge.dispute.created", "charge.dispute.closed.won") * 2:
        world.deliver_all(shaped_dispute(template, intent, case, T0 + 3600, **prevented))

    # Then nothing was withdrawn, nothing stays open: the order is paid, its books balance
    state = world.order(order)
    assert state.financial_status == "paid"
    assert state.disputed_total == 0
    assert counted(world, order) == [("order.paid", "applied")]
    assert world.mismatches(order) == []


@pytest.mark.parametrize(
    "reinstatement_first", [True, False], ids=["reinstated-first", "closed-first"]
)
def test_a_dispute_lost_after_a_partial_refund_gives_back_the_refunded_part(
    world: World, reinstatement_first: bool
) -> None:
    # Given a paid order refunded 2000 of 5000, then disputed for the whole charge (Stripe
    # withdraws 5000), which the merchant loses: Stripe gives back the 2000 already refunded
    order, intent, charge = paid(world)
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 2000, T0 + 600, charge))
    case = stripe.unique("du")
    world.deliver_all(
        shaped_dispute(
            "charge.dispute.funds_withdrawn",
            intent,
            case,
            T0 + 3600,
            balance_transactions=[moved(-AMOUNT, "dispute")],
        )
    )
    lost = {"status": "lost"}
    reinstated = shaped_dispute(
        "charge.dispute.funds_reinstated",
        intent,
        case,
        T0 + 90_000,
        balance_transactions=[moved(-AMOUNT, "dispute"), moved(2000, "dispute_reversal")],
        **lost,
    )
    closed = shaped_dispute(
        "charge.dispute.closed.lost",
        intent,
        case,
        T0 + 90_001,
        balance_transactions=[moved(-AMOUNT, "dispute"), moved(2000, "dispute_reversal")],
        **lost,
    )

    # When funds_reinstated (status lost) and closed arrive, in either order
    for body in (reinstated, closed) if reinstatement_first else (closed, reinstated):
        world.deliver_all(body)

    # Then the dispute is lost, never won: 3000 lost for good, the 2000 given back counted
    state = world.order(order)
    assert state.financial_status == "dispute_lost"
    assert {
        name: state.total(Total(name))
        for name in ("disputed_total", "dispute_lost_total", "dispute_won_total", "refunded_total")
    } == {
        "disputed_total": 0,
        "dispute_lost_total": AMOUNT - 2000,
        "dispute_won_total": 2000,
        "refunded_total": 2000,
    }
    assert ("order.dispute_won", "applied") not in counted(world, order)
    assert ("order.funds_reinstated", "applied") in counted(world, order)
    assert world.mismatches(order) == []


@pytest.mark.parametrize("inquiry_first", [True, False], ids=["inquiry-first", "withdrawal-first"])
def test_an_inquiry_escalating_seen_only_as_funds_withdrawn_closes(
    world: World, inquiry_first: bool
) -> None:
    # Given an inquiry that escalated to a dispute, on an endpoint that does not subscribe
    # charge.dispute.updated: the inquiry's creation and the withdrawal, in either order
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    inquiry = dispute("charge.dispute.created.inquiry", intent, case, T0 + 3600)
    withdrawn = dispute("charge.dispute.funds_withdrawn", intent, case, T0 + 7200)

    for body in (inquiry, withdrawn) if inquiry_first else (withdrawn, inquiry):
        world.deliver_all(body)
        world.deliver_all(body)  # and again: a provider retry

    # Then no inquiry stays open: the money is disputed once
    state = world.order(order)
    assert state.financial_status == "disputed"
    assert (state.inquiry_total, state.disputed_total) == (0, AMOUNT)
    assert world.mismatches(order) == []


def test_refunds_of_a_conflicted_payment_count_on_the_order_that_holds_it(
    world: World, provider_apis: FakeProviderApis
) -> None:
    # Given a payment bound to order B by its PaymentIntent, whose charge copied order A (the
    # conflict case: the charge's metadata is what the PaymentIntent said at confirmation)
    holder, copied = stripe.unique("ord"), stripe.unique("ord")
    intent, charge = stripe.unique("pi"), stripe.unique("ch")
    processor = stripe_processor(world, provider_apis)
    processor.process("stripe", stripe.payment_intent_succeeded(holder, intent, AMOUNT, T0, charge))
    [conflict] = processor.process(
        "stripe", stripe.charge_succeeded(copied, intent, charge, AMOUNT, T0)
    )
    assert conflict.outcome is Outcome.CONFLICT

    # When an endpoint before acacia announces two refunds with charge.refunded, which names the
    # charge's order, and one refund also with its own refund.created naming it too
    first, second = stripe.unique("re"), stripe.unique("re")
    provider_apis.refunds[charge] = [
        refund_object(second, intent, charge, 1000, T0 + 120),
        refund_object(first, intent, charge, 2000, T0 + 60),
    ]
    processor.process("stripe", charge_refunded_2023(copied, intent, charge))
    processor.process(
        "stripe", stripe.refund_created(intent, first, 2000, T0 + 60, charge, order_id=copied)
    )

    # Then each refund counts once, on the order that holds the payment; nothing on the other
    state = world.order(holder)
    assert (state.paid_total, state.refunded_total) == (AMOUNT, 3000)
    assert state.financial_status == "partially_refunded"
    assert world.find_order(copied) is None
    assert world.mismatches(holder) == []


def test_a_verdict_settles_what_its_opening_counted_whatever_its_event_says(world: World) -> None:
    # Given a dispute opened by charge.dispute.created shaped without balance transactions
    # (booked for the dispute's 1000), whose closing event's balance transactions say 900 was
    # withdrawn and given back, plus a transaction in the account's other currency
    order, intent, _ = paid(world)
    case = stripe.unique("du")
    world.deliver_all(
        shaped_dispute(
            "charge.dispute.created", intent, case, T0 + 3600, amount=1000, balance_transactions=[]
        )
    )
    other_currency = {"amount": -5400, "currency": "usd", "type": "adjustment"}
    world.deliver_all(
        shaped_dispute(
            "charge.dispute.closed.won",
            intent,
            case,
            T0 + 90_000,
            amount=1000,
            balance_transactions=[
                moved(-900, "dispute"),
                moved(900, "dispute_reversal"),
                other_currency,
            ],
        )
    )

    # Then the verdict settles the 1000 the opening held: nothing stays disputed for good
    state = world.order(order)
    assert state.disputed_total == 0
    assert state.dispute_won_total == 1000
    assert state.financial_status == "dispute_won"
    assert world.mismatches(order) == []


def test_a_verdict_whose_opening_counted_stale_settles_what_that_opening_counted(
    world: World,
) -> None:
    # Given a dispute opened (for its 1000) after a later refund of the payment had landed,
    # so the opening counted stale
    order, intent, charge = paid(world)
    world.deliver(stripe.refund_created(intent, stripe.unique("re"), 500, T0 + 7200, charge))
    case = stripe.unique("du")
    world.deliver_all(
        shaped_dispute(
            "charge.dispute.created", intent, case, T0 + 3600, amount=1000, balance_transactions=[]
        )
    )
    assert ("order.disputed", "stale") in counted(world, order)

    # When its verdict says, by its balance transactions, that 900 was withdrawn and given back
    world.deliver_all(
        shaped_dispute(
            "charge.dispute.closed.won",
            intent,
            case,
            T0 + 90_000,
            amount=1000,
            balance_transactions=[moved(-900, "dispute"), moved(900, "dispute_reversal")],
        )
    )

    # Then the verdict settles the 1000 the stale opening counted: nothing stays disputed
    state = world.order(order)
    assert state.disputed_total == 0
    assert state.dispute_won_total == 1000
    assert world.mismatches(order) == []
