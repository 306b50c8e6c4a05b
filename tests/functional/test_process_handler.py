"""The process Lambda as the runtime calls it: a batch, partial failures, logs and metrics."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext, sqs_event, sqs_record
from functions.process import handler, wiring
from tests.support.world import World

if TYPE_CHECKING:
    pass

T0 = 1_764_460_800


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture
def logs() -> Iterator[io.StringIO]:
    """What the process Logger writes, as the Lambda runtime would ship it to CloudWatch."""
    stream = io.StringIO()
    log_handler = handler.logger.registered_handler
    assert isinstance(log_handler, logging.StreamHandler)
    previous = log_handler.setStream(stream)
    yield stream
    log_handler.setStream(previous)


def emitted_metrics(captured: str) -> dict[str, float]:
    """Sum of each metric in the EMF blob Powertools prints at the end of the invocation."""
    [emf] = [line for line in json_lines(captured) if "_aws" in line]
    names = [m["Name"] for m in emf["_aws"]["CloudWatchMetrics"][0]["Metrics"]]
    return {name: sum(emf[name]) if isinstance(emf[name], list) else emf[name] for name in names}


@pytest.mark.usefixtures("deployed_tables")
def test_batch_applies_good_records_and_fails_only_the_bad_ones(
    world: World, capsys: pytest.CaptureFixture[str], logs: io.StringIO
) -> None:
    # Given a batch with a payment, a malformed payload and a message without a provider
    order = stripe.unique("ord")
    payment = stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0)
    event_id = json.loads(payment)["id"]
    good = sqs_record(payment, {"provider": "stripe", "event_id": event_id})
    malformed = sqs_record("{not json", {"provider": "stripe"})
    no_provider = sqs_record(payment, {})

    # When the process Lambda receives it
    response = handler.lambda_handler(sqs_event(good, malformed, no_provider), FakeLambdaContext())

    # Then the payment is applied and only the two bad records go back to the queue
    assert world.order(order).paid_total == 5000
    assert len(world.outbox(order)) == 1
    failed = {failure["itemIdentifier"] for failure in response["batchItemFailures"]}
    assert failed == {malformed["messageId"], no_provider["messageId"]}

    # And each outcome is logged with its event and key, and counted
    lines = json_lines(logs.getvalue())
    [applied_line] = [line for line in lines if line.get("outcome") == "applied"]
    assert applied_line["effect_key"]
    assert (applied_line["order_id"], applied_line["event_id"]) == (order, event_id)
    failure_lines = [line for line in lines if line["level"] == "ERROR"]
    assert {line["message_id"] for line in failure_lines} == failed
    assert emitted_metrics(capsys.readouterr().out) == {"applied": 1, "failed": 2}


@pytest.mark.usefixtures("deployed_tables")
def test_redelivered_message_is_acknowledged_as_duplicate(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a message already processed once
    order = stripe.unique("ord")
    body = stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0)
    handler.lambda_handler(sqs_event(sqs_record(body, {"provider": "stripe"})), FakeLambdaContext())
    after_first = world.snapshot()
    capsys.readouterr()

    # When SQS delivers it again
    response = handler.lambda_handler(
        sqs_event(sqs_record(body, {"provider": "stripe"}, receive_count=2)), FakeLambdaContext()
    )

    # Then it is acknowledged (not failed), nothing changed, and it is counted as duplicate
    assert world.snapshot() == after_first
    assert response["batchItemFailures"] == []
    assert emitted_metrics(capsys.readouterr().out) == {"duplicate": 1}


@pytest.mark.usefixtures("deployed_tables")
def test_refund_waiting_for_its_payment_is_retried_not_dropped(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a refund whose payment is not recorded yet
    refund = stripe.refund_created(stripe.unique("pi"), stripe.unique("re"), 5000, T0)
    record = sqs_record(refund, {"provider": "stripe"})

    # When the process Lambda receives it
    response = handler.lambda_handler(sqs_event(record), FakeLambdaContext())

    # Then the record goes back to the queue, nothing is written, and it is counted as retried
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [record["messageId"]]
    assert world.deliveries() == []
    assert emitted_metrics(capsys.readouterr().out) == {"retried": 1}


@pytest.mark.usefixtures("deployed_tables")
def test_batch_stops_taking_records_when_lambda_time_runs_short(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a batch of four payments, and a Lambda whose time runs out after the second
    # (a slow provider API ate it): 25 s left, then 14 s, then less than one record's worst case
    orders = [stripe.unique("ord") for _ in range(4)]
    records = [
        sqs_record(
            stripe.payment_intent_succeeded(order, stripe.unique("pi"), 1000, T0),
            {"provider": "stripe"},
        )
        for order in orders
    ]
    time_left = iter([25_000, 14_000, wiring.RECORD_RESERVE_MS - 1, 1_000])
    context = FakeLambdaContext(remaining_ms=lambda: next(time_left))

    # When the process Lambda receives the batch
    response = handler.lambda_handler(sqs_event(*records), context)

    # Then the first two are applied, the last two are handed back unstarted (nothing written)
    assert [world.order(order).paid_total for order in orders[:2]] == [1000, 1000]
    assert [world.find_order(order) for order in orders[2:]] == [None, None]
    failed = [failure["itemIdentifier"] for failure in response["batchItemFailures"]]
    assert failed == [record["messageId"] for record in records[2:]]
    # And the cut is counted, so the BatchesCutShort alarm sees it
    assert emitted_metrics(capsys.readouterr().out) == {"applied": 2, "batch_cut_short": 2}


class RefusingToPark:
    """A waiting room whose park fails (throttled, denied): nothing is parked."""

    def park(self, message: object, waiting: object) -> None:
        raise RuntimeError("the waiting room refused the park")


@pytest.mark.usefixtures("deployed_tables")
def test_an_unbound_refund_whose_park_fails_is_a_failure_with_its_reason_never_waiting(
    world: World,
    capsys: pytest.CaptureFixture[str],
    logs: io.StringIO,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a refund whose payment is not recorded, received often enough to be parked, and a
    # waiting room that refuses to park it
    refund = stripe.refund_created(stripe.unique("pi"), stripe.unique("re"), 5000, T0)
    record = sqs_record(refund, {"provider": "stripe"}, receive_count=50)
    monkeypatch.setattr(wiring, "waiting_room", RefusingToPark)
    capsys.readouterr()

    # When the process Lambda receives it
    response = handler.lambda_handler(sqs_event(record), FakeLambdaContext())

    # Then it goes back to the queue counted and logged as the park's failure, with its reason,
    # never as waiting: the dead letter it may become says why
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [record["messageId"]]
    assert emitted_metrics(capsys.readouterr().out) == {"failed": 1}
    lines = json_lines(logs.getvalue())
    assert [line["reason"] for line in lines if line["level"] == "ERROR"] == [
        "the waiting room refused the park"
    ]
    assert not any(line.get("outcome") == "waiting" for line in lines)
