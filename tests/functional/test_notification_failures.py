"""What a refused notification leaves behind: a sink that is gone stops for the item and
someone is told, a sink's `Retry-After` is honoured, and no refusal leaves a customer's
address or a URL's credentials in a log line, a table item or `umavez trace`."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
import pytest
from botocore.exceptions import ClientError

from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext
from functions.outbox import handler, sweeper_handler
from functions.outbox.channels import (
    Channel,
    ChannelError,
    EventBridgeChannel,
    HttpChannel,
    SesEmailChannel,
    SinkGoneError,
)
from functions.outbox.sender import OutboxSender, SendPolicy, SendResult
from functions.outbox.sweeper import Sweeper
from functions.outbox.wiring import sink_gone_reporter
from functions.shared.dynamo import from_attributes
from functions.shared.outbox import OutboxItem, outbox_id_for
from ops.trace import LocalLogs, trace
from tests.support.clients import intercepted
from tests.support.clock import FakeClock
from tests.support.sinks import EMAIL_SENDER, Sinks
from tests.support.streams import StreamReader, stream_event
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T0 = 1_764_460_800
POLICY = SendPolicy(backoff_base_seconds=30, backoff_cap_seconds=3600)
CUSTOMER = "maria.silva@example.com"
SANDBOX_REFUSAL = (
    "Email address is not verified. The following identities failed the check in region"
    f" US-EAST-1: {CUSTOMER}"
)


class ScriptedSink:
    """The HTTP channel's place, answering each send with the next of `answers` (an error
    to raise, or None: taken)."""

    name = "http"

    def __init__(self, *answers: ChannelError | None) -> None:
        self._answers = list(answers)
        self.sent: list[str] = []

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        answer = self._answers.pop(0) if self._answers else None
        if answer is not None:
            raise answer
        self.sent.append(item.outbox_id)


@pytest.fixture
def dynamodb(moto_dynamodb: DynamoDBClient) -> DynamoDBClient:
    """This module reads the outbox table's stream: its tables are on moto, which keeps one."""
    return moto_dynamodb


@pytest.fixture
def sinks(dynamodb: DynamoDBClient) -> Sinks:
    return Sinks()


def paid_order(world: World, recipient: str | None = None) -> tuple[str, str]:
    order = stripe.unique("ord")
    body = json.loads(stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, T0))
    if recipient:
        body["data"]["object"]["receipt_email"] = recipient
    processed = world.deliver(json.dumps(body))
    assert processed.effect_key
    return order, outbox_id_for(processed.effect_key)


def outbox_item(world: World, outbox_id: str) -> dict[str, Any]:
    [item] = [i for i in world.outbox() if i["outbox_id"] == outbox_id]
    return item


def test_a_sink_that_is_gone_is_not_retried_for_the_item_and_someone_is_told(
    world: World, sinks: Sinks, clock: FakeClock
) -> None:
    # Given an HTTP sink that answers 410 Gone, beside EventBridge
    _, outbox_id = paid_order(world)
    gone = ScriptedSink(SinkGoneError("HTTP sink answered 410 Gone"))
    told: list[tuple[str, str, str]] = []
    channels: list[Channel] = [EventBridgeChannel(boto3.client("events"), sinks.bus_name), gone]
    sender = OutboxSender(
        world.dynamodb,
        TABLES.outbox,
        channels,
        clock,
        POLICY,
        on_sink_gone=lambda *gone_: told.append(gone_),
    )

    # When the item is sent, and a sweep later finds nothing left to do
    sent = sender.deliver(outbox_id, only_if_due=False)
    clock.advance(7200)
    swept = Sweeper(world.dynamodb, TABLES.outbox, sender, clock).sweep()

    # Then the other channel got it, the item is done (not retried on the gone sink), and
    # the one told names the item and the channel
    assert sent.result is SendResult.SENT
    item = outbox_item(world, outbox_id)
    assert (item["status"], item["channels_sent"], item["channels_gone"]) == (
        "sent",
        {"eventbridge"},
        {"http"},
    )
    assert gone.sent == []
    assert dict(swept) == {}
    assert [(i, c) for i, c, _ in told] == [(outbox_id, "http")]
    assert sinks.events_by_key() == {outbox_id: 1}


def test_the_stack_counts_a_gone_sink_and_logs_it(
    world: World,
    sinks: Sinks,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given the outbox Lambda as the stack wires it, its HTTP sink answering 410 Gone
    _, outbox_id = paid_order(world)
    stream = StreamReader(TABLES.outbox)
    monkeypatch.setattr(
        handler,
        "outbox_sender",
        lambda: OutboxSender(
            world.dynamodb,
            TABLES.outbox,
            [ScriptedSink(SinkGoneError("HTTP sink answered 410 Gone"))],
            clock,
            POLICY,
            on_sink_gone=sink_gone_reporter(handler.logger, handler.metrics),
        ),
    )

    # When the stream delivers the item
    with captured_logs(handler.logger) as logs:
        handler.lambda_handler(stream_event(stream.new_records()), FakeLambdaContext())

    # Then an error line names the item and the metric the alarm reads counts it
    [gone_line] = [line for line in logs() if line["level"] == "ERROR"]
    assert (gone_line["outbox_id"], gone_line["channel"]) == (outbox_id, "http")
    [emf] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert emf["notify_sink_gone"] == [1.0]


@pytest.mark.parametrize(("asked", "due_after"), [(900, 900), (5, 30)])
def test_a_sinks_retry_after_is_honoured_but_never_shortens_the_backoff(
    world: World, clock: FakeClock, asked: int, due_after: int
) -> None:
    # Given a sink that refuses and asks to be tried again after `asked` seconds
    _, outbox_id = paid_order(world)
    busy = ScriptedSink(ChannelError("HTTP sink answered 503", retry_after_seconds=asked))
    sender = OutboxSender(world.dynamodb, TABLES.outbox, [busy], clock, POLICY)

    # When the item is tried
    sent = sender.deliver(outbox_id, only_if_due=False)

    # Then it is due no sooner than it asked, nor than the backoff (30 s for a first try)
    assert sent.result is SendResult.RETRY_LATER
    assert outbox_item(world, outbox_id)["next_attempt_at"] == int(clock.now) + due_after


@contextmanager
def captured_logs(*loggers: Any) -> Iterator[Callable[[], list[dict[str, Any]]]]:
    stream = io.StringIO()
    previous = []
    for logger in loggers:
        log_handler = logger.registered_handler
        assert isinstance(log_handler, logging.StreamHandler)
        previous.append((log_handler, log_handler.setStream(stream)))
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        for log_handler, stream_before in previous:
            log_handler.setStream(stream_before)


def refusing_sends(dynamodb_client: Any) -> Any:
    """SES as its sandbox answers a send to an unverified recipient."""

    def refuse(operation: str, call: Callable[[], Any]) -> Any:
        if operation == "send_email":
            raise ClientError(
                {"Error": {"Code": "MessageRejected", "Message": SANDBOX_REFUSAL}}, "SendEmail"
            )
        return call()

    return intercepted(dynamodb_client, refuse)


def test_refused_sends_leave_no_customer_address_or_url_credential_anywhere(
    world: World,
    sinks: Sinks,
    clock: FakeClock,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # Given SES in its sandbox refusing the customer's address, and an HTTP sink whose URL
    # carries credentials and fails, as the outbox Lambda and the sweeper send
    order, outbox_id = paid_order(world, recipient=CUSTOMER)
    assert outbox_item(world, outbox_id)["recipient"] == CUSTOMER
    url = "https://hook:s3cr3t-pass@sink.invalid/notify?token=s3cr3t-token"
    stream = StreamReader(TABLES.outbox)

    def build() -> OutboxSender:
        channels: list[Channel] = [
            SesEmailChannel(refusing_sends(boto3.client("sesv2")), EMAIL_SENDER),
            HttpChannel(url, lambda: ("whsec_" + "A" * 44,), clock, timeout_seconds=2),
        ]
        return OutboxSender(world.dynamodb, TABLES.outbox, channels, clock, POLICY)

    monkeypatch.setattr(handler, "outbox_sender", build)
    monkeypatch.setattr(
        sweeper_handler,
        "sweeper",
        lambda: Sweeper(world.dynamodb, TABLES.outbox, build(), clock, grace_seconds=0),
    )
    monkeypatch.setattr(sweeper_handler, "stranded_items", lambda: None)

    # When the stream's first try and three sweeps fail to send it
    with captured_logs(handler.logger, sweeper_handler.logger) as logs:
        handler.lambda_handler(stream_event(stream.new_records()), FakeLambdaContext())
        for _ in range(3):
            clock.advance(3600)
            sweeper_handler.lambda_handler({}, FakeLambdaContext())
        lines = logs()

    # Then the failures are logged and stored by their codes...
    item = outbox_item(world, outbox_id)
    assert item["attempts"] == 4
    assert "MessageRejected" in item["last_error"]
    assert any("MessageRejected" in json.dumps(line) for line in lines)
    # ...and no log line, no stored attribute but the recipient itself, and no trace of the
    # order shows the address or the URL's secrets
    log_file = tmp_path / "logs.jsonl"
    log_file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    journey = trace(order, world.dynamodb, TABLES, LocalLogs(log_file))
    stored = [
        json.dumps({k: v for k, v in from_attributes(i).items() if k != "recipient"}, default=str)
        for table in (TABLES.outbox, TABLES.ledger)
        for i in world.dynamodb.scan(TableName=table)["Items"]
    ]
    seen = {
        "logs": log_file.read_text(),
        "tables": "\n".join(stored),
        "trace": journey.render() + json.dumps(journey.to_json()),
    }
    assert journey.timeline
    for where, text in seen.items():
        for secret in (CUSTOMER, "s3cr3t"):
            assert secret not in text, f"{secret} in the {where}"
