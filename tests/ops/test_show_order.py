"""On the embedded stack: a legacy charge.refunded read through the fake Stripe refunds API, and
`umavez show order --json` telling what the books say."""

from __future__ import annotations

import json
import time

import pytest

from devstack.resources import DEVELOPMENT_SECRETS
from devstack.stack import EmbeddedStack
from firedrill.delivery import DeliveryLog, Providers
from firedrill.story import Post
from fixtures import stripe
from ops.cli import main

T0 = 1_764_460_800


def legacy_charge_refunded(order: str, intent: str, charge: str) -> str:
    event = json.loads(stripe.fixture_text("charge.refunded.2023-10-16"))
    event["id"] = stripe.unique("evt")
    event["created"] = T0 + 120
    event["data"]["object"].update(
        {"id": charge, "payment_intent": intent, "metadata": {"order_id": order}}
    )
    return json.dumps(event)


def test_show_order_after_a_refund_read_from_stripes_api(
    capsys: pytest.CaptureFixture[str],
) -> None:
    order, intent, charge, refund = (stripe.unique(p) for p in ("ord", "pi", "ch", "re"))
    with EmbeddedStack() as stack:
        # Given a paid order whose endpoint is pinned to 2023-10-16, and Stripe knowing a refund
        listed = json.loads(stripe.fixture_text("api.refunds.list"))["data"][0]
        stack.provider_apis.refunds[charge] = [
            {**listed, "id": refund, "amount": 1500, "charge": charge, "payment_intent": intent}
        ]
        providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, DeliveryLog())
        paid = stripe.payment_intent_succeeded(order, intent, 5000, T0, charge)
        assert providers.deliver(Post("stripe", paid)) == [200]
        assert stack.drain()

        # When charge.refunded (naming no refund) arrives, and the order is shown
        assert providers.deliver(Post("stripe", legacy_charge_refunded(order, intent, charge))) == [
            200
        ]
        assert stack.drain()
        names = stack.resources.tables
        capsys.readouterr()
        code = main(
            [
                "show",
                "order",
                order,
                "--json",
                "--endpoint-url",
                stack.aws.endpoint_url,
                "--ledger-table",
                names.ledger,
                "--outbox-table",
                names.outbox,
            ]
        )

    # Then the refund counted once, keyed by its re_ id, and the order reads partially refunded
    shown = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (shown["status"], shown["totals"]["paid"], shown["totals"]["refunded"]) == (
        "partially_refunded",
        5000,
        1500,
    )
    assert [(e["transition"], e["external_ref"]) for e in shown["effects"]][-1] == (
        "order.refunded",
        refund,
    )
    assert {i["status"] for i in shown["outbox"]} == {"sent"}
    assert any(path.startswith("/v1/refunds?charge=") for path in stack.provider_apis.requests)


def test_show_waiting_then_attach_applies_the_payment_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    with EmbeddedStack() as stack:
        endpoint = ["--endpoint-url", stack.aws.endpoint_url]
        ledger = ["--ledger-table", stack.resources.tables.ledger]
        # Given a PaymentIntent that names no order, parked after its first receives
        providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, DeliveryLog())
        providers.deliver(Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, T0)))
        waiting: list[dict[str, object]] = []
        for _ in range(60):
            capsys.readouterr()
            main(["show", "waiting", "--json", *endpoint, *ledger])
            waiting = json.loads(capsys.readouterr().out)
            if waiting:
                break
            time.sleep(0.5)

        # When an operator attaches it to its order, twice
        codes = [main(["attach", "stripe", intent, order, *endpoint, *ledger]) for _ in range(2)]
        assert stack.drain()
        capsys.readouterr()
        main(["show", "order", order, "--json", *endpoint, *ledger])
        shown = json.loads(capsys.readouterr().out)

    # Then it was listed with what it waits for, and is paid once
    assert [w["waits_for"] for w in waiting] == [[intent]]
    assert codes == [0, 0]
    assert (shown["status"], shown["totals"]["paid"], len(shown["outbox"])) == ("paid", 5000, 1)
