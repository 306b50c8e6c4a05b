"""`umavez serve`, then `umavez send`, as a person would. Mercado Pago: the payment file is
registered with serve's fake Mercado Pago API and its signed notification goes through the
front. Every provider: the order is shown once processed; a bad file sends nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.resources import MERCADOPAGO_DEVELOPMENT_TOKEN
from ops.cli import main
from tests.support.served import Served, serving

EVENTS = Path(__file__).parents[2] / "fixtures" / "events"


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serving() as stack:
        yield stack


def payment_file(
    directory: Path, fixture: str, payment_id: str, order_id: str, name: str = "payment.json"
) -> Path:
    """A real-shaped payment (fixtures/events) of a payment and an order of this test's own."""
    payment = json.loads((EVENTS / "mercadopago" / fixture).read_text())
    payment.update(
        {"id": int(payment_id), "external_reference": order_id, "metadata": {"order_id": order_id}}
    )
    for refund in payment["refunds"]:
        refund["payment_id"] = int(payment_id)
    path = directory / name
    path.write_text(json.dumps(payment))
    return path


def show_order(served: Served, order_id: str, capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    assert main(["show", "order", order_id, "--json", "--endpoint-url", served.aws]) == 0
    return json.loads(capsys.readouterr().out)


def unique_payment() -> tuple[str, str]:
    number = uuid.uuid4().int
    return str(10**9 + number % (9 * 10**9)), f"ord_mp_{number % 16**10:010x}"


def test_serve_prints_the_fake_mercadopago_api_and_its_token(served: Served) -> None:
    # Given serve's stack, Then its banner says where the fake Mercado Pago API is, and its token
    assert f"{served.mercadopago_api}/v1/payments/ID" in served.banner
    assert MERCADOPAGO_DEVELOPMENT_TOKEN in served.banner


def test_send_a_mercadopago_payment_pays_its_order_once(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given serve's stack, and a file holding an approved payment of BRL 50 for a new order
    payment_id, order = unique_payment()
    path = payment_file(tmp_path, "payment.json", payment_id, order)

    # When it is sent as Mercado Pago's
    code = main(["send", "--provider", "mercadopago", str(path), *served.options()])
    printed = capsys.readouterr().out

    # Then the fake knew nothing of it (payment.created), the front said 200, and once
    # processed the order is shown paid
    assert code == 0
    assert "notification: payment.created" in printed
    assert "HTTP 200" in printed
    assert f"order {order}: paid" in printed
    # And the books hold the payment once, with one notification
    shown = show_order(served, order, capsys)
    assert (shown["status"], shown["currency"], shown["totals"]["paid"]) == ("paid", "brl", 5000)
    assert [(e["outcome"], e["external_ref"]) for e in shown["effects"]] == [
        ("applied", payment_id)
    ]
    assert [(i["transition"], i["status"]) for i in shown["outbox"]] == [("order.paid", "sent")]


def test_a_second_send_with_the_payments_refunds_moves_the_books(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a Mercado Pago payment of BRL 50 sent and applied
    payment_id, order = unique_payment()
    paid = payment_file(tmp_path, "payment.json", payment_id, order)
    assert main(["send", "--provider", "mercadopago", str(paid), *served.options()]) == 0
    capsys.readouterr()

    # When the same payment, refunded in two parts (20 + 30), is sent
    refunded = payment_file(tmp_path, "payment.refunded.json", payment_id, order, "refunded.json")
    code = main(["send", "--provider", "mercadopago", str(refunded), *served.options()])
    printed = capsys.readouterr().out

    # Then its notification is an update, and each refund counted once; the payment not again
    assert code == 0
    assert "notification: payment.updated" in printed
    assert f"order {order}: refunded" in printed
    shown = show_order(served, order, capsys)
    assert (shown["status"], shown["totals"]["paid"], shown["totals"]["refunded"]) == (
        "refunded",
        5000,
        5000,
    )
    assert sorted((e["transition"], e["external_ref"], e["amount"]) for e in shown["effects"]) == [
        ("order.paid", payment_id, 5000),
        ("order.refunded", "refund:2187654321", 2000),
        ("order.refunded", "refund:2187654399", 3000),
    ]
    assert sorted(i["transition"] for i in shown["outbox"]) == [
        "order.paid",
        "order.refunded",
        "order.refunded",
    ]


def stripe_payment(order: str, suffix: str) -> dict[str, Any]:
    event = json.loads((EVENTS / "stripe" / "payment_intent.succeeded.json").read_text())
    event["id"] = f"evt_{suffix}"
    event["data"]["object"].update(id=f"pi_{suffix}", metadata={"order_id": order})
    return dict(event)


def asaas_payment(order: str, suffix: str) -> dict[str, Any]:
    event = json.loads((EVENTS / "asaas" / "PAYMENT_RECEIVED.json").read_text())
    event["id"] = f"evt_{suffix}&1"
    event["payment"].update(id=f"pay_{suffix}", externalReference=order)
    return dict(event)


@pytest.mark.parametrize("provider", ["stripe", "asaas"])
def test_send_shows_the_order_once_processed_for_stripe_and_asaas_too(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: str
) -> None:
    # Given serve's stack and a payment event of a new order, as the provider sends it
    _, order = unique_payment()
    suffix = order.removeprefix("ord_mp_")
    event = (stripe_payment if provider == "stripe" else asaas_payment)(order, suffix)
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))

    # When it is sent
    code = main(["send", "--provider", provider, str(path), *served.options(provider)])

    # Then send prints the HTTP status, then the order as `show order` does, paid
    printed = capsys.readouterr().out
    assert code == 0
    assert f"{provider} event.json: HTTP 200" in printed
    assert "processed: applied" in printed
    assert f"order {order}: paid  (paid BRL 50.00)" in printed
    if provider == "asaas":
        # process read the payment from the fake Asaas API, which send told it
        assert f"payment pay_{suffix} (RECEIVED) registered with the fake Asaas API" in printed


def test_send_says_so_when_nothing_is_processed_in_time(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a payment naming no order: process retries it (then parks it) for seconds
    payment_id, _ = unique_payment()
    path = payment_file(tmp_path, "payment.json", payment_id, "")
    payment = json.loads(path.read_text())
    payment.update(external_reference=None, metadata={})
    path.write_text(json.dumps(payment))

    # When it is sent with a wait shorter than that
    code = main(
        ["send", "--provider", "mercadopago", str(path), "--wait", "0.5", *served.options()]
    )

    # Then the post was accepted, and send says it was not processed in time
    printed = capsys.readouterr()
    assert code == 1
    assert "HTTP 200" in printed.out
    assert "not processed within 0.5 s" in printed.err


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda p: p.pop("currency_id"), "currency_id: Field required"),
        (lambda p: p.update(id="12-34"), "is not alphanumeric"),
        # An unusable date_approved is stamped at date_created instead: the last update is not
        (lambda p: p.update(date_last_updated="yesterday"), "not an ISO 8601 moment"),
    ],
    ids=["no currency", "id not alphanumeric", "date not ISO 8601"],
)
def test_a_bad_payment_file_is_refused_and_nothing_is_sent(
    served: Served,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: Any,
    reason: str,
) -> None:
    # Given serve's stack and a payment file process could not read
    payment_id, order = unique_payment()
    path = payment_file(tmp_path, "payment.json", payment_id, order)
    payment = json.loads(path.read_text())
    change(payment)
    path.write_text(json.dumps(payment))
    sends_before = served.sqs_sends()

    # When it is sent
    code = main(["send", "--provider", "mercadopago", str(path), *served.options()])
    printed = capsys.readouterr()

    # Then it is refused with the reason, the fake was not told, and nothing was enqueued
    assert code == 2
    assert reason in printed.err
    assert "nothing sent" in printed.err
    assert "HTTP" not in printed.out
    assert served.fake_payment(payment_id) == 404
    assert served.sqs_sends() == sends_before


def order_file(directory: Path, fixture: str, order_id: str, name: str = "order.json") -> Path:
    """A real-shaped order of the Orders API (fixtures/events) for an order of this test's own;
    its transactions keep their ids, so each test's order has its own."""
    order = json.loads((EVENTS / "mercadopago" / fixture).read_text())
    suffix = order_id.removeprefix("ord_mp_").upper()
    order.update({"id": f"ORD01{suffix}", "external_reference": order_id})
    for payment in order["transactions"]["payments"]:
        payment.pop("reference", None)
        payment["id"] = f"PAY01{suffix}"
    for refund in order["transactions"].get("refunds", []):
        refund.update(transaction_id=f"PAY01{suffix}", id=f"REF01{suffix}")
        refund.pop("reference", None)
    path = directory / name
    path.write_text(json.dumps(order))
    return path


def test_send_a_mercadopago_order_then_its_refund_books_each_once(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given serve's stack, and a file holding an order of the Orders API, processed
    _, order = unique_payment()
    paid = order_file(tmp_path, "order.processed.json", order)
    suffix = order.removeprefix("ord_mp_").upper()

    # When it is sent as Mercado Pago's, and then the same order refunded in part
    assert main(["send", "--provider", "mercadopago", str(paid), *served.options()]) == 0
    first = capsys.readouterr().out
    refunded = order_file(tmp_path, "order.partially_refunded.json", order, "refunded.json")
    code = main(["send", "--provider", "mercadopago", str(refunded), *served.options()])

    # Then the fake Orders API was told each, its notification on topic order went through the
    # front, and the books hold the payment and the refund once each
    assert code == 0
    assert f"order ORD01{suffix} (processed) registered" in first
    assert "notification: order.processed" in first
    shown = show_order(served, order, capsys)
    assert (shown["status"], shown["totals"]["paid"], shown["totals"]["refunded"]) == (
        "partially_refunded",
        20000,
        5000,
    )
    assert sorted((e["transition"], e["external_ref"]) for e in shown["effects"]) == [
        ("order.paid", f"PAY01{suffix}"),
        ("order.refunded", f"refund:REF01{suffix}"),
    ]


def test_a_bad_order_file_is_refused_and_nothing_is_sent(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an order whose refund names no payment of the order
    _, order = unique_payment()
    path = order_file(tmp_path, "order.partially_refunded.json", order)
    broken = json.loads(path.read_text())
    broken["transactions"]["refunds"][0]["transaction_id"] = "PAY_ELSEWHERE"
    path.write_text(json.dumps(broken))
    sends_before = served.sqs_sends()

    # When it is sent
    code = main(["send", "--provider", "mercadopago", str(path), *served.options()])
    printed = capsys.readouterr()

    # Then it is refused naming the field, and nothing was enqueued
    assert code == 2
    assert "order.transactions.refunds.0.transaction_id" in printed.err
    assert served.sqs_sends() == sends_before


def test_send_via_eventbridge_puts_stripes_event_on_the_bus_and_the_webhook_is_a_duplicate(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given serve's stack and a Stripe payment for a new order
    order, suffix = f"ord_eb_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex[:12]
    event = stripe_payment(order, suffix)
    event["data"]["object"]["latest_charge"] = f"ch_{suffix}"  # a charge of its own
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))

    # When it is put on the local Stripe partner bus, then sent to the webhook too
    by_bus = main(["send", "--via", "eventbridge", str(path), *served.options()])
    printed = capsys.readouterr().out
    by_webhook = main(["send", str(path), *served.options()])

    # Then the bus's rule took it to process, which paid the order once; the webhook's copy
    # is a duplicate
    assert (by_bus, by_webhook) == (0, 0)
    assert "put on the local Stripe partner bus" in printed
    assert "processed: applied" in printed
    shown = show_order(served, order, capsys)
    assert (shown["status"], shown["totals"]["paid"]) == ("paid", 5000)
    assert [e["outcome"] for e in shown["effects"]] == ["applied"]


def test_send_via_eventbridge_is_stripes_only(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "payment.json"
    path.write_text("{}")

    code = main(["send", "--provider", "asaas", "--via", "eventbridge", str(path)])

    assert code == 2
    assert "Stripe's" in capsys.readouterr().err


def test_send_thin_books_the_thin_event_of_a_payment_once_with_its_snapshot(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given serve's stack and a Stripe payment for a new order
    order, suffix = f"ord_thin_{uuid.uuid4().hex[:10]}", uuid.uuid4().hex[:12]
    event = stripe_payment(order, suffix)
    event["data"]["object"]["latest_charge"] = f"ch_{suffix}"
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))

    # When its thin event is sent, then the snapshot event itself
    thin = main(["send", "--thin", str(path), *served.options()])
    printed = capsys.readouterr().out
    snapshot = main(["send", str(path), *served.options()])

    # Then the PaymentIntent was registered with the fake Stripe API, the thin event read it
    # and paid the order; the snapshot event of the same change is a duplicate
    assert (thin, snapshot) == (0, 0)
    assert f"payment_intent pi_{suffix} registered with the fake Stripe API" in printed
    assert "processed: applied" in printed
    shown = show_order(served, order, capsys)
    assert (shown["status"], shown["totals"]["paid"]) == ("paid", 5000)
    assert [e["outcome"] for e in shown["effects"]] == ["applied"]


@pytest.mark.parametrize(
    ("arguments", "why"),
    [
        (["--provider", "asaas", "--thin"], "Stripe's"),
        (["--thin"], "--thin takes a snapshot event"),
    ],
)
def test_send_thin_refuses_what_has_no_thin_event_and_sends_nothing(
    served: Served,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    arguments: list[str],
    why: str,
) -> None:
    # Given a file that is not a snapshot event (a thin event already)
    path = tmp_path / "thin.json"
    path.write_text((EVENTS / "stripe" / "v1.payment_intent.succeeded.thin.json").read_text())
    sends_before = served.sqs_sends()

    # When it is sent with --thin, Then it is refused, saying why, and nothing is sent
    assert main(["send", *arguments, str(path), *served.options()]) == 2
    assert why in capsys.readouterr().err
    assert served.sqs_sends() == sends_before
