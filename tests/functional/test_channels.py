"""Each channel carries the outbox id as its dedupe key and turns a refusal into ChannelError."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from botocore.stub import ANY, Stubber

from functions.outbox.channels import (
    ChannelError,
    EventBridgeChannel,
    HttpChannel,
    SesEmailChannel,
)
from functions.outbox.templates import render
from functions.shared.outbox import OutboxItem, OutboxStatus

ITEM = OutboxItem(
    outbox_id="obx_" + "a" * 64,
    effect_key="a" * 64,
    order_id="ord_1042",
    transition="order.refunded",
    amount=2050,
    currency="brl",
    provider="stripe",
    external_ref="re_1",
    event_id="evt_1",
    recipient="cliente@example.com",
    status=OutboxStatus.PENDING,
    created_at="2026-11-30T00:00:00.000+00:00",
)


class Sink(BaseHTTPRequestHandler):
    """A loopback HTTP sink. `answer` is a status code, or how it breaks the connection:
    `close` (no answer at all), `reset` (a TCP RST after reading the request), `garbage`
    (no HTTP status line). `/elsewhere` is where its redirects point; it answers 200."""

    received: ClassVar[list[tuple[str | None, dict[str, Any]]]] = []
    requests: ClassVar[list[tuple[str, str]]] = []
    answer: ClassVar[int | str] = 200

    def do_POST(self) -> None:
        self.requests.append(("POST", self.path))
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.headers.get("Idempotency-Key"), body))
        if self.answer == "close":
            self.close_connection = True
            return
        if self.answer == "reset":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            return
        if self.answer == "garbage":
            self.wfile.write(b"this is not HTTP\r\n\r\n")
            self.close_connection = True
            return
        assert isinstance(self.answer, int)
        self.send_response(self.answer)
        if 300 <= self.answer < 400:
            self.send_header("Location", "/elsewhere")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def sink() -> Iterator[tuple[str, type[Sink]]]:
    handler = type("S", (Sink,), {"received": [], "requests": [], "answer": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/notify", handler
    server.shutdown()
    server.server_close()


def test_http_channel_posts_with_the_idempotency_key(sink: tuple[str, type[Sink]]) -> None:
    url, received = sink

    HttpChannel(url).send(ITEM)

    [(key, body)] = received.received
    assert key == ITEM.outbox_id
    assert (body["order_id"], body["amount"], body["transition"]) == (
        "ord_1042",
        2050,
        "order.refunded",
    )


def test_http_channel_refused_is_a_channel_error(sink: tuple[str, type[Sink]]) -> None:
    url, received = sink
    received.answer = 503

    with pytest.raises(ChannelError):
        HttpChannel(url).send(ITEM)


@pytest.mark.parametrize("breaks", ["close", "reset", "garbage"])
def test_http_connection_broken_by_the_sink_is_a_channel_error(
    sink: tuple[str, type[Sink]], breaks: str
) -> None:
    # Given a sink that takes the request, then closes, resets or answers no HTTP
    url, received = sink
    received.answer = breaks

    # When the channel posts to it, then it is a ChannelError (the item backs off), not a crash
    with pytest.raises(ChannelError, match="HTTP sink"):
        HttpChannel(url).send(ITEM)
    assert received.requests == [("POST", "/notify")]


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_http_redirect_is_a_channel_error_and_is_not_followed(
    sink: tuple[str, type[Sink]], code: int
) -> None:
    # Given a sink that answers the POST with a redirect to a page that answers 200
    url, received = sink
    received.answer = code

    # When the channel posts to it
    with pytest.raises(ChannelError, match=str(code)):
        HttpChannel(url).send(ITEM)

    # Then nothing followed the redirect: the only request the sink saw is the POST
    assert received.requests == [("POST", "/notify")]


def test_http_refused_connection_is_a_channel_error() -> None:
    # Given a port nobody listens on
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]

    with pytest.raises(ChannelError, match="HTTP sink"):
        HttpChannel(f"http://127.0.0.1:{port}/notify").send(ITEM)


def test_eventbridge_failed_entry_is_a_channel_error() -> None:
    client = boto3.client("events")
    with Stubber(client) as stubber:
        stubber.add_response(
            "put_events",
            {
                "FailedEntryCount": 1,
                "Entries": [{"ErrorCode": "InternalFailure", "ErrorMessage": "x"}],
            },
        )
        with pytest.raises(ChannelError, match="InternalFailure"):
            EventBridgeChannel(client, "bus").send(ITEM)


@pytest.mark.parametrize("configuration_set", [None, "loja-transactional"])
def test_ses_sends_name_the_configuration_set_the_role_is_granted(
    configuration_set: str | None,
) -> None:
    # Given an e-mail channel with (or without) the stack's configuration set
    client = boto3.client("sesv2")
    expected: dict[str, Any] = {
        "FromEmailAddress": "loja@example.com",
        "Destination": {"ToAddresses": ["cliente@example.com"]},
        "Content": ANY,
        "EmailTags": [{"Name": "outbox_id", "Value": ITEM.idempotency_key}],
    }
    if configuration_set:
        expected["ConfigurationSetName"] = configuration_set

    with Stubber(client) as stubber:
        stubber.add_response("send_email", {"MessageId": "m-1"}, expected)
        # When it sends an item
        SesEmailChannel(client, "loja@example.com", configuration_set).send(ITEM)
        # Then the request names that configuration set, and only when there is one
        stubber.assert_no_pending_responses()


def test_templates_render_money_and_end_with_the_key() -> None:
    message = render(ITEM)

    assert message.subject == "Refund issued for order ord_1042"
    assert "BRL 20.50" in message.body
    assert message.body.endswith(f"Reference: {ITEM.outbox_id}")
