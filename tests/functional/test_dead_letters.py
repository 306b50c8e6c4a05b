"""The dead-letter queue, listed and redriven: a real failure (Mercado Pago refusing our token)
sends a message there through the stack's redrive policy; once fixed, a redrive applies it."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from fixtures import stripe
from fixtures.shapes import EVENTS_DIR
from functions.ingest.adapters import SqsQueue
from functions.shared.failures import FailureRecords
from infra.settings import MAX_RECEIVE_COUNT
from ops.dlq import DeadLetters
from ops.status import dead_letters as status_of_dead_letters
from tests.support.clients import intercepted
from tests.support.pipeline import Pipeline, pipeline_on_moto
from tests.support.world import TABLES

PAYMENT_IDS = itertools.count(8_000_000_001)


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    with pipeline_on_moto(monkeypatch) as running:
        yield running


def dead_letters(pipeline: Pipeline, sqs: Any = None) -> DeadLetters:
    failures = FailureRecords(pipeline.world.dynamodb, TABLES.ledger, time.time)
    return DeadLetters(
        sqs or pipeline.sqs,
        pipeline.dead_letter_url,
        pipeline.queue_url,
        30,
        0,
        last_failures=failures.last_failures,
    )


def notify_payment(pipeline: Pipeline) -> tuple[str, str, dict[str, str]]:
    """Mercado Pago knows a paid order's payment and notifies it; ingest enqueues the
    notification. Returns the order, the body and the attributes ingest gave it."""
    payment: dict[str, Any] = json.loads((EVENTS_DIR / "mercadopago" / "payment.json").read_text())
    order, payment_id = stripe.unique("ord"), next(PAYMENT_IDS)
    payment.update({"id": payment_id, "external_reference": order, "metadata": {}})
    pipeline.apis.payments[str(payment_id)] = payment
    notification = json.loads((EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text())
    notification.update({"id": payment_id * 10, "data": {"id": str(payment_id)}})
    body = json.dumps(notification)
    attributes = {
        "provider": "mercadopago",
        "event_id": str(notification["id"]),
        "event_type": "payment.updated",
    }
    SqsQueue(pipeline.sqs, pipeline.queue_url).send(body, attributes)
    return order, body, attributes


def failed_into_the_dlq(
    pipeline: Pipeline, count: int = 1
) -> list[tuple[str, str, dict[str, str]]]:
    """Notifications processed while Mercado Pago refuses our token: each fails
    `MAX_RECEIVE_COUNT` times and SQS moves it to the DLQ. Then the token is fixed."""
    notified = [notify_payment(pipeline) for _ in range(count)]
    pipeline.apis.status_override = 401
    pipeline.process()
    pipeline.apis.status_override = None
    return notified


def test_a_message_that_failed_five_times_is_listed_and_left_in_the_dlq(
    pipeline: Pipeline,
) -> None:
    # Given a notification that failed five times
    [(order, _, attributes)] = failed_into_the_dlq(pipeline)

    # When the DLQ is listed, twice
    first, second = dead_letters(pipeline).letters(), dead_letters(pipeline).letters()

    # Then it is listed with its provider, event, receives and first receive, both times, and
    # it is still in the DLQ; nothing reached the order
    [letter] = first
    assert (letter.provider, letter.event_id, letter.event_type) == (
        attributes["provider"],
        attributes["event_id"],
        attributes["event_type"],
    )
    assert letter.receives == MAX_RECEIVE_COUNT
    assert letter.first_received_at is not None
    assert [(d.message_id, d.event_id) for d in second] == [(letter.message_id, letter.event_id)]
    assert pipeline.dead_letters() == 1
    assert pipeline.world.find_order(order) is None


def test_a_dead_letter_says_why_its_last_receive_failed(pipeline: Pipeline) -> None:
    # Given a notification that failed five times: Mercado Pago refused our token
    failed_into_the_dlq(pipeline)

    # When the DLQ is listed
    [letter] = dead_letters(pipeline).letters()

    # Then it shows the last failure's code and message, and the receive it happened on
    assert letter.reason is not None
    assert "ProviderApiRefusedError: Mercado Pago payments API refused us: 401" in letter.reason
    assert f"receive {MAX_RECEIVE_COUNT}" in letter.reason
    assert letter.describe()["reason"] == letter.reason


def test_a_redriven_message_goes_back_unchanged_and_is_applied_once(pipeline: Pipeline) -> None:
    # Given two notifications in the DLQ, the cause fixed since
    [(order, body, attributes), (other_order, _, other)] = failed_into_the_dlq(pipeline, 2)
    letters = {d.event_id: d for d in dead_letters(pipeline).letters()}
    chosen = letters[attributes["event_id"]].message_id

    # When one is redriven and the queue processed, then redriven again
    moved = dead_letters(pipeline).redrive([chosen])
    pipeline.process()
    again = dead_letters(pipeline).redrive([chosen])

    # Then it went back with its body and attributes, and its payment is applied once
    assert [(r.message_id, r.result) for r in moved] == [(chosen, "moved")]
    [redriven] = [m for m in pipeline.processed if m["MessageId"] == moved[0].new_message_id]
    assert (redriven["Body"], pipeline.attributes(redriven)) == (body, attributes)
    assert pipeline.world.order(order).paid_total == 5000
    assert pipeline.world.order(order).effect_count == 1
    # And the other stays in the DLQ, untouched; the first is gone from it
    assert [(r.message_id, r.result) for r in again] == [(chosen, "not found")]
    assert [d.event_id for d in dead_letters(pipeline).letters()] == [other["event_id"]]
    assert pipeline.world.find_order(other_order) is None


def test_a_message_is_deleted_from_the_dlq_only_after_it_was_sent(pipeline: Pipeline) -> None:
    # Given a message in the DLQ, and the webhook queue refusing sends
    [(order, _, attributes)] = failed_into_the_dlq(pipeline)
    refusing = intercepted(pipeline.sqs, refuse("send_message"))

    # When everything is redriven
    [result] = dead_letters(pipeline, refusing).redrive()
    pipeline.process()

    # Then the send failed, so the message is still in the DLQ (visible) and nothing applied
    assert result.result.startswith("send failed")
    assert result.new_message_id is None
    assert [d.event_id for d in dead_letters(pipeline).letters()] == [attributes["event_id"]]
    assert pipeline.world.find_order(order) is None


def refuse(operation: str) -> Callable[[str, Callable[[], Any]], Any]:
    def around(name: str, call: Callable[[], Any]) -> Any:
        if name == operation:
            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "down"}}, name)
        return call()

    return around


def test_the_status_line_says_why_and_leaves_the_letter_where_it_is(pipeline: Pipeline) -> None:
    # Given a notification that failed five times
    failed_into_the_dlq(pipeline)
    failures = FailureRecords(pipeline.world.dynamodb, TABLES.ledger, time.time)

    # When the status is read
    reading = status_of_dead_letters(pipeline.sqs, pipeline.dead_letter_url, failures.last_failures)

    # Then its line says why the letter failed, a person is needed, and the letter is still there
    assert reading.needs_person
    assert "ProviderApiRefusedError: Mercado Pago payments API refused us: 401" in reading.summary
    assert reading.facts["count"] == 1
    assert pipeline.dead_letters() == 1
    assert len(dead_letters(pipeline).letters()) == 1
