"""`umavez statement stripe` on the embedded stack: Stripe's books told from outside over HTTP,
a payment no webhook brought booked once, a forged one reported, fees and net on the order as
`show order --json` tells them."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from devstack.fake_registration import (
    register_asaas_payment,
    register_asaas_transaction,
    register_mercadopago_payment,
    register_stripe_object,
)
from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    DEVELOPMENT_SECRETS,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
    client,
)
from devstack.stack import EmbeddedStack
from firedrill.delivery import DeliveryLog, Providers
from firedrill.story import Post
from fixtures import stripe
from fixtures.shapes import shape, unique
from ops.cli import main
from ops.status_books import statement as statement_reading
from ops.trace import LocalLogs, trace


def iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def tables_of(stack: EmbeddedStack) -> list[str]:
    """The command line's options naming the stack's tables."""
    names = stack.resources.tables
    endpoint = ["--endpoint-url", stack.aws.endpoint_url]
    return [*endpoint, "--ledger-table", names.ledger, "--outbox-table", names.outbox]


def statement_then_order(
    capsys: pytest.CaptureFixture[str], stack: EmbeddedStack, provider: str, at: float, order: str
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    """`umavez statement PROVIDER --json` over the minutes around `at`, then (the stack drained)
    `umavez show order --json`: its exit status and both outputs."""
    where = tables_of(stack)
    window = ["--since", iso(at - 60), "--until", iso(at + 600)]
    capsys.readouterr()
    api = ["--api-url", stack.provider_apis.url]
    code = main(["statement", provider, *window, "--json", *where, *api])
    reported = json.loads(capsys.readouterr().out)
    assert stack.drain()
    main(["show", "order", order, "--json", *where])
    return code, reported, json.loads(capsys.readouterr().out)


def test_the_statement_books_what_no_webhook_brought_and_reports_a_forged_payment(
    capsys: pytest.CaptureFixture[str],
) -> None:
    start = int(time.time()) - 1200
    delivered, missed, forged = (
        (stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")) for _ in range(3)
    )
    with EmbeddedStack() as stack:
        where = tables_of(stack)
        providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, DeliveryLog())
        # Given a payment delivered by its webhook, one Stripe moved but never announced, and
        # one delivered that Stripe never moved (signed with a leaked secret)
        paid = {
            ids: stripe.charge_succeeded(ids[0], ids[1], ids[2], 5000, start + n)
            for n, ids in enumerate((delivered, missed, forged))
        }
        for ids in (delivered, forged):
            assert providers.deliver(Post("stripe", paid[ids])) == [200]
        assert stack.drain()
        # Stripe's books, told from outside as the fake's own API takes them
        for ids in (delivered, missed):
            line = stripe.balance_transaction(paid[ids], "charge", 5000, fee=245)
            charge: dict[str, Any] = line["source"]
            api = stack.provider_apis.url
            register_stripe_object(api, STRIPE_DEVELOPMENT_API_KEY, "charges", charge)
            line["source"] = charge["id"]
            register_stripe_object(api, STRIPE_DEVELOPMENT_API_KEY, "balance_transactions", line)

        # When the operator reads the window's statement, twice
        window = ["--since", iso(start - 60), "--until", iso(start + 600)]
        command = ["statement", "stripe", *window, "--json", *where]
        command += ["--api-url", stack.provider_apis.url]
        capsys.readouterr()
        first = main(command)
        reported = json.loads(capsys.readouterr().out)
        second = main(command)
        again = json.loads(capsys.readouterr().out)
        assert stack.drain()
        main(["show", "order", missed[0], "--json", *where])
        shown = json.loads(capsys.readouterr().out)
        dynamodb = client("dynamodb", stack.aws.endpoint_url)
        told = statement_reading(dynamodb, stack.resources.tables.ledger, time.time())
        journey = trace(missed[0], dynamodb, stack.resources.tables, LocalLogs(stack.log_path))

    # Then `umavez status` needs a person for the forged payment, and `umavez trace` tells the
    # missed one's entry as the statement's, its notification as found by it
    assert told.needs_person
    assert "stripe entry_unknown_to_provider 1" in told.summary
    entries = [f for f in journey.now if f["kind"] == "entry"]
    assert [f["counted_by"].split(", line ")[0] for f in entries] == ["the provider's statement"]
    notes = [f for f in journey.now if f["kind"] == "notification"]
    assert [f["found"] for f in notes] == ["found by the statement"]

    # and the missed payment was booked once (found by the statement, with Stripe's fee and
    # net), the forged one reported by kind both times, and nothing else
    assert (first, second) == (1, 1)
    assert (reported["booked"], again["booked"], again["already_booked"]) == (1, 0, 2)
    assert reported["mismatches"] == {
        "movement_missing": 0,
        "amount_differs": 0,
        "entry_unknown_to_provider": 1,
    }
    assert [d["order_id"] for d in reported["details"]] == [forged[0]]
    assert (shown["totals"]["paid"], shown["fee_total"], shown["net_total"]) == (5000, 245, 4755)
    assert [e["via"] for e in shown["effects"]] == ["statement"]
    assert [i["status"] for i in shown["outbox"]] == ["sent"]


def mercadopago_payment(order: str, at: float) -> dict[str, Any]:
    """An approved Pix payment of 50.00 as Mercado Pago's API answers it, made at `at`."""
    stamp = datetime.fromtimestamp(at, tz=timezone(timedelta(hours=-3))).isoformat(
        timespec="milliseconds"
    )
    answered = shape("mercadopago/payment.json")
    answered.update(
        {
            "id": int(unique("mp").removeprefix("mp_test")),
            "date_created": stamp,
            "date_approved": stamp,
            "date_last_updated": stamp,
            "metadata": {"order_id": order},
            "external_reference": order,
            "fee_details": [{"amount": 0.5, "fee_payer": "collector", "type": "mercadopago_fee"}],
        }
    )
    return answered


def test_the_mercadopago_statement_books_a_payment_never_notified(
    capsys: pytest.CaptureFixture[str],
) -> None:
    order = unique("ord")
    at = time.time() - 1200
    with EmbeddedStack() as stack:
        # Given a payment Mercado Pago knows (told from outside) and never notified
        payment = mercadopago_payment(order, at)
        register_mercadopago_payment(
            stack.provider_apis.url, MERCADOPAGO_DEVELOPMENT_TOKEN, payment
        )

        # When the operator reads the window's statement
        code, reported, shown = statement_then_order(capsys, stack, "mercadopago", at, order)

    # Then it is booked once, with what Mercado Pago kept and paid out
    assert (code, reported["booked"], reported["details"]) == (0, 1, [])
    assert (shown["totals"]["paid"], shown["fee_total"], shown["net_total"]) == (5000, 50, 4950)


def test_the_asaas_statement_books_a_payment_no_webhook_brought(
    capsys: pytest.CaptureFixture[str],
) -> None:
    order = unique("ord")
    at = time.time() - 1200
    day = datetime.fromtimestamp(at, tz=timezone(timedelta(hours=-3))).date().isoformat()
    with EmbeddedStack() as stack:
        # Given a payment Asaas received (R$ 50.00, R$ 0.99 kept) and its statement's lines,
        # told from outside; no webhook of it ever came
        payment = shape("asaas/PAYMENT_RECEIVED.json")["payment"]
        payment.update({"id": unique("pay"), "externalReference": order, "paymentDate": day})
        api, key = stack.provider_apis.url, ASAAS_DEVELOPMENT_API_KEY
        register_asaas_payment(api, key, payment)
        for kind, value in (("PAYMENT_RECEIVED", 50.0), ("PAYMENT_FEE", -0.99)):
            line = {"object": "financialTransaction", "id": unique("ftn"), "value": value}
            line |= {"type": kind, "date": day, "description": kind, "paymentId": payment["id"]}
            register_asaas_transaction(api, key, line)

        # When the operator reads the window's statement
        code, reported, shown = statement_then_order(capsys, stack, "asaas", at, order)

    # Then it is booked once, with what Asaas kept and paid out
    assert (code, reported["booked"], reported["details"]) == (0, 1, [])
    assert (shown["totals"]["paid"], shown["fee_total"], shown["net_total"]) == (5000, 99, 4901)
