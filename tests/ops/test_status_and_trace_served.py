"""`umavez serve` in one shell, `umavez status` and `umavez trace` in another, as an on-call
engineer uses them: what they say is what the stack did."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.fake_registration import register_asaas_webhook
from devstack.handlers import stack_log_path
from devstack.resources import ASAAS_DEVELOPMENT_API_KEY, DEAD_LETTER_QUEUE_NAME, client
from fixtures import stripe
from ops.cli import main
from tests.support.served import Served, serving

T0 = 1_764_460_800


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    with serving() as stack:
        yield stack


def send(served: Served, body: str, directory: Path) -> None:
    path = directory / f"{json.loads(body)['id']}.json"
    path.write_text(body)
    front = f"http://127.0.0.1:{served.port}/webhooks/stripe"
    assert main(["send", str(path), "--endpoint-url", served.aws, "--url", front]) == 0


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out or "null")


def test_trace_tells_a_payment_delivered_twice_from_ingest_to_its_notification(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a payment event of a new order, delivered twice (a provider's retry)
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    body = stripe.payment_intent_succeeded(order, intent, 5000, T0)
    event_id = json.loads(body)["id"]
    send(served, body, tmp_path)
    send(served, body, tmp_path)

    # When the operator traces the event (once process handled both: `send` tells a
    # duplicate from the ledger before process reads it), then its order
    code, journey = traced_until(capsys, served, event_id, lambda j: _handled(j) == 2)
    order_code, of_order = run(capsys, "trace", order, "--endpoint-url", served.aws)

    # Then the event's timeline is: taken in twice, applied once, a duplicate once, sent once
    assert (code, journey["kind"]) == (0, "event")
    stages = [(s["stage"], s["outcome"]) for s in journey["timeline"]]
    assert stages.count(("ingest", "enqueued")) == 2
    assert sorted(o for stage, o in stages if stage == "process") == ["applied", "duplicate"]
    assert [o for stage, o in stages if stage == "outbox"] == ["sent"]
    assert {s["event_id"] for s in journey["timeline"]} == {event_id}
    # And now: one entry, counted by this event, and its notification sent to its channels
    [entry] = [f for f in journey["now"] if f["kind"] == "entry"]
    assert (entry["outcome"], entry["order_id"], entry["counted_by"]) == (
        "applied",
        order,
        event_id,
    )
    assert entry["amount"] == "BRL 50.00"
    [notification] = [f for f in journey["now"] if f["kind"] == "notification"]
    assert notification["status"] == "sent"
    assert "eventbridge" in notification["channels"]
    # And the order's trace holds the same journey, with the order's status first
    assert (order_code, of_order["kind"]) == (0, "order")
    assert of_order["now"][0] == {
        "kind": "order",
        "id": order,
        "status": "paid",
        "last_event_id": event_id,
    }
    assert of_order["timeline"] == journey["timeline"]


def traced_until(
    capsys: pytest.CaptureFixture[str],
    served: Served,
    asked: str,
    done: Callable[[Any], bool],
    seconds: float = 30,
) -> tuple[int, Any]:
    """The trace, asked again each half second until `done` says it is complete (process runs
    in the served stack, on its own time) or `seconds` passed."""
    deadline = time.monotonic() + seconds
    code, journey = run(capsys, "trace", asked, "--endpoint-url", served.aws)
    while not done(journey) and time.monotonic() < deadline:
        time.sleep(0.5)
        code, journey = run(capsys, "trace", asked, "--endpoint-url", served.aws)
    return code, journey


def _handled(journey: Any) -> int:
    return sum(s["stage"] == "process" for s in journey["timeline"]) if journey else 0


def test_trace_reads_the_lines_whose_fields_name_the_id_not_those_that_quote_it(
    served: Served, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a payment event handled by the stack
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    body = stripe.payment_intent_succeeded(order, intent, 5000, T0)
    event_id = json.loads(body)["id"]
    send(served, body, tmp_path)
    traced_until(capsys, served, event_id, lambda j: _handled(j) == 1)

    # And lines of other events that hold its id as text: a longer id with the same prefix,
    # and a message quoting it
    log = stack_log_path(served.aws)
    [processed] = [
        line
        for line in map(json.loads, log.read_text().splitlines())
        if line.get("event_id") == event_id and line.get("outcome") == "applied"
    ]
    longer = {**processed, "event_id": f"{event_id}0", "order_id": stripe.unique("ord")}
    quoting = {
        **processed,
        "event_id": stripe.unique("evt"),
        "order_id": stripe.unique("ord"),
        "message": f"applied; the same amount as {event_id}",
    }
    with log.open("a") as appended:
        appended.writelines(json.dumps(line) + "\n" for line in (longer, quoting))

    # When the operator traces the event again
    code, after = run(capsys, "trace", event_id, "--endpoint-url", served.aws)

    # Then its timeline holds its own lines only: those whose fields name it
    assert code == 0
    assert {s["event_id"] for s in after["timeline"]} == {event_id}
    assert _handled(after) == 1


def test_trace_of_an_unknown_id_says_so_in_one_line(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given an id nothing in the stack has seen
    unknown = stripe.unique("evt")

    # When it is traced
    code = main(["trace", unknown, "--endpoint-url", served.aws])

    # Then one line says nothing was found and what to check, with a non-zero exit
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert unknown in line
    assert "check the id" in line


def test_status_says_healthy_then_names_a_dead_letter_and_exits_1(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the served stack, idle (its queue metrics published since it started)

    # When the operator asks for its status
    code, status = run(capsys, "status", "--endpoint-url", served.aws)

    # Then it is healthy: exit 0, every reading there, none needing a person
    assert (code, status["needs_person"]) == (0, False)
    assert _reading(status, "webhook queue")["facts"]["oldest_seconds"] is not None
    assert [r["name"] for r in status["readings"]] == [
        "webhook queue",
        "dead letters",
        "waiting",
        "unmatched",
        "re-checks",
        "notifications",
        "reconciliation",
        "statement",
        "asaas webhooks",
        "alarms",
    ]

    # When a record is dead-lettered
    sqs = client("sqs", served.aws)
    dead_letters = sqs.get_queue_url(QueueName=DEAD_LETTER_QUEUE_NAME)["QueueUrl"]
    sqs.send_message(QueueUrl=dead_letters, MessageBody="{}")
    try:
        code, status = run(capsys, "status", "--endpoint-url", served.aws)
    finally:
        sqs.purge_queue(QueueUrl=dead_letters)

    # Then a person is needed, for that reason only, and the exit says so
    assert (code, status["needs_person"]) == (1, True)
    assert [r["name"] for r in status["readings"] if r["needs_person"]] == ["dead letters"]
    assert _reading(status, "dead letters")["facts"] == {"count": 1}


def test_status_names_asaas_paused_queue_told_from_outside_and_is_quiet_once_resumed(
    served: Served, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the served stack's fake Asaas API told, from outside as Asaas's own webhook object,
    # that umavez's webhook has its queue paused
    webhook = {
        "id": "wh_served01",
        "name": "umavez",
        "url": f"http://127.0.0.1:{served.port}/webhooks/asaas",
        "email": "oncall@example.com",
        "enabled": True,
        "interrupted": True,
        "apiVersion": 3,
        "hasAuthToken": True,
        "sendType": "SEQUENTIALLY",
        "penalizedRequestsCount": 15,
        "events": ["PAYMENT_CONFIRMED", "PAYMENT_RECEIVED", "PAYMENT_REFUNDED"],
    }
    register_asaas_webhook(served.mercadopago_api, ASAAS_DEVELOPMENT_API_KEY, webhook)
    try:
        # When the operator asks for the status, then again once the queue is resumed
        paused_code, paused = run(capsys, "status", "--endpoint-url", served.aws)
    finally:
        resumed = {**webhook, "interrupted": False, "penalizedRequestsCount": 0}
        register_asaas_webhook(served.mercadopago_api, ASAAS_DEVELOPMENT_API_KEY, resumed)
    resumed_code, running = run(capsys, "status", "--endpoint-url", served.aws)

    # Then the paused queue needs a person, that reading only; resumed, nobody is needed
    assert (paused_code, paused["needs_person"]) == (1, True)
    assert [r["name"] for r in paused["readings"] if r["needs_person"]] == ["asaas webhooks"]
    assert "umavez (wh_served01) is interrupted" in _reading(paused, "asaas webhooks")["summary"]
    assert (resumed_code, running["needs_person"]) == (0, False)
    assert _reading(running, "asaas webhooks")["summary"] == (
        "umavez (wh_served01): enabled, queue running"
    )


def _reading(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in status["readings"] if r["name"] == name)
