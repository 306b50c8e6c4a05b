"""On the embedded stack, through the CLI as an operator types it: `umavez replay stripe` stops
at an API error, says how to resume, and the resumed run applies only what was missing; a
notification that failed into the DLQ is listed and, once the cause is fixed, redriven and
applied by `umavez dlq`; `umavez replay mercadopago` finds an order whose notification was
lost."""

from __future__ import annotations

import json
import re
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from devstack.resources import DEVELOPMENT_SECRETS
from devstack.stack import EmbeddedStack
from firedrill.delivery import DeliveryLog, Providers
from firedrill.story import Post
from fixtures import stripe
from fixtures.shapes import EVENTS_DIR, shape
from ops.cli import main

DLQ_WAIT_SECONDS = 90  # five receives, 3 s apart, on a busy machine


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any, str]:
    """`umavez ARGV --json`: its exit code, its JSON output and what it said on stderr."""
    capsys.readouterr()
    code = main([*argv, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def test_replay_resumes_after_an_api_error_and_a_dead_letter_is_redriven(
    capsys: pytest.CaptureFixture[str],
) -> None:
    now = int(time.time())
    paid_order, lost_order, late_order = (stripe.unique("ord") for _ in range(3))
    intent, charge, refund = stripe.unique("pi"), stripe.unique("ch"), stripe.unique("re")
    paid = stripe.payment_intent_succeeded(paid_order, intent, 5000, now - 600, charge)
    lost = [
        stripe.payment_intent_succeeded(lost_order, stripe.unique("pi"), 3000, now - 500),
        stripe.payment_intent_succeeded(late_order, stripe.unique("pi"), 2000, now - 400),
        stripe.refund_created(intent, refund, 1500, now - 300, charge),
    ]
    with EmbeddedStack() as stack:
        aws = ["--endpoint-url", stack.aws.endpoint_url]
        ledger = ["--ledger-table", stack.resources.tables.ledger]
        replay = [
            *("replay", "stripe", "--page-size", "2", "--wait", "60"),
            *("--since", datetime.fromtimestamp(now - 3600, tz=UTC).isoformat()),
            *("--api-url", stack.provider_apis.url, *aws, *ledger),
        ]
        # Given a payment whose webhook arrived, and three events whose webhooks were lost, all
        # kept by Stripe; its events API fails on the second page
        providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, DeliveryLog())
        assert providers.deliver(Post("stripe", paid)) == [200]
        stack.provider_apis.events += [json.loads(body) for body in (paid, *lost)]
        stack.provider_apis.fail("/v1/events", request=2)
        assert stack.drain()

        # When the last hour is replayed, then resumed as the error says
        stopped, first, error = run(capsys, *replay)
        [resume_after] = re.findall(r"--starting-after (evt_\w+)", error)
        resumed, second, _ = run(capsys, *replay, "--starting-after", resume_after)
        _, shown, _ = run(capsys, "show", "order", paid_order, *aws, *ledger)

        # Then the first run applied the first page and stopped; the resumed one applied the
        # payment lost on the second page, and found the delivered one a duplicate
        assert (stopped, resumed) == (1, 0)
        assert [(r["event_type"], r["outcome"]) for r in first] == [
            ("refund.created", "applied"),
            ("payment_intent.succeeded", "applied"),
        ]
        assert [(r["order_id"], r["outcome"]) for r in second] == [
            (lost_order, "applied"),
            (paid_order, "duplicate"),
        ]
        assert (shown["totals"]["paid"], shown["totals"]["refunded"]) == (5000, 1500)
        assert len(shown["effects"]) == 2

        # Given a Mercado Pago notification processed while their API refuses our token
        payment: dict[str, Any] = json.loads(
            (EVENTS_DIR / "mercadopago" / "payment.json").read_text()
        )
        mp_order, payment_id = stripe.unique("ord"), str(now)
        payment.update({"id": int(payment_id), "external_reference": mp_order})
        stack.provider_apis.payments[payment_id] = payment
        stack.provider_apis.status_override = 401
        notification = json.loads((EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text())
        notification.update({"id": now * 10, "data": {"id": payment_id}})
        query = {"data.id": payment_id, "type": "payment"}
        assert providers.deliver(Post("mercadopago", json.dumps(notification), query)) == [200]
        listed: list[dict[str, Any]] = []
        deadline = time.monotonic() + DLQ_WAIT_SECONDS
        while not listed and time.monotonic() < deadline:
            time.sleep(1)
            _, listed, _ = run(capsys, "dlq", "list", *aws)

        # When the token works again and the DLQ is redriven
        stack.provider_apis.status_override = None
        capsys.readouterr()
        redriven = main(["dlq", "redrive", "--all", *aws])
        assert stack.drain()
        _, after, _ = run(capsys, "dlq", "list", *aws)
        _, mp_shown, _ = run(capsys, "show", "order", mp_order, *aws, *ledger)

        # Given an order of the Orders API whose notification was lost (its payment named by
        # the order only: on no payments search)
        orders_order, changed = stripe.unique("ord"), datetime.fromtimestamp(now - 600, tz=UTC)
        found = shape("mercadopago/order.processed.json")
        found.update(
            id=f"ORD01TEST{now}",
            external_reference=orders_order,
            created_date=changed.isoformat(),
            last_updated_date=changed.isoformat(),
        )
        found["transactions"]["payments"][0].update(id=f"PAY01TEST{now}", reference={})
        stack.provider_apis.orders[found["id"]] = found

        # When Mercado Pago's last hour is replayed as an operator types it
        replayed_code, replayed, _ = run(
            capsys,
            *("replay", "mercadopago", "--wait", "60", "--api-url", stack.provider_apis.url),
            *("--since", datetime.fromtimestamp(now - 3600, tz=UTC).isoformat(), *aws, *ledger),
        )
        _, orders_shown, _ = run(capsys, "show", "order", orders_order, *aws, *ledger)

    # Then it was listed after its five receives, moved back, and its payment applied once
    assert [(d["provider"], d["event_id"], d["receives"]) for d in listed] == [
        ("mercadopago", str(now * 10), 5)
    ]
    assert (redriven, after) == (0, [])
    assert (mp_shown["status"], mp_shown["totals"]["paid"], len(mp_shown["effects"])) == (
        "paid",
        5000,
        1,
    )
    # And the order's payment, on no payments search, was found by the orders search and
    # applied once
    assert replayed_code == 0
    assert [(r["order_id"], r["outcome"]) for r in replayed] == [(orders_order, "applied")]
    assert (orders_shown["status"], orders_shown["totals"]["paid"]) == ("paid", 20000)
