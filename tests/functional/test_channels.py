"""Each channel carries the outbox id as its dedupe key and turns a refusal into ChannelError."""

from __future__ import annotations

import base64
import json
import secrets
import socket
import struct
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import boto3
import pytest
from botocore.stub import ANY, Stubber
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from functions.outbox.channels import (
    ChannelError,
    EventBridgeChannel,
    HttpChannel,
    SesEmailChannel,
    SinkGoneError,
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
    # Each POST as it came: the raw body and the headers (what a receiver verifies).
    raw: ClassVar[list[tuple[bytes, dict[str, str]]]] = []
    answer: ClassVar[int | str] = 200
    answer_headers: ClassVar[dict[str, str]] = {}

    def do_POST(self) -> None:
        self.requests.append(("POST", self.path))
        raw = self.rfile.read(int(self.headers["Content-Length"]))
        self.raw.append((raw, dict(self.headers.items())))
        body = json.loads(raw)
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
        for name, value in self.answer_headers.items():
            self.send_header(name, value)
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
    handler = type(
        "S",
        (Sink,),
        {"received": [], "requests": [], "raw": [], "answer": 200, "answer_headers": {}},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/notify", handler
    server.shutdown()
    server.server_close()


def signing_secret() -> str:
    """A Standard Webhooks secret: whsec_ and 32 random bytes in base64."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


SECRET = signing_secret()


def channel(url: str, *active: str, clock: Any = time.time) -> HttpChannel:
    """The HTTP channel as the stack builds it (the sink here is on loopback, in plain http)."""
    return HttpChannel(url, lambda: active or (SECRET,), clock, allow_loopback_http=True)


def test_http_channel_posts_with_the_idempotency_key(sink: tuple[str, type[Sink]]) -> None:
    url, received = sink

    channel(url).send(ITEM)

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
        channel(url).send(ITEM)


@pytest.mark.parametrize("breaks", ["close", "reset", "garbage"])
def test_http_connection_broken_by_the_sink_is_a_channel_error(
    sink: tuple[str, type[Sink]], breaks: str
) -> None:
    # Given a sink that takes the request, then closes, resets or answers no HTTP
    url, received = sink
    received.answer = breaks

    # When the channel posts to it, then it is a ChannelError (the item backs off), not a crash
    with pytest.raises(ChannelError, match="HTTP sink"):
        channel(url).send(ITEM)
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
        channel(url).send(ITEM)

    # Then nothing followed the redirect: the only request the sink saw is the POST
    assert received.requests == [("POST", "/notify")]


def test_http_refused_connection_is_a_channel_error() -> None:
    # Given a port nobody listens on
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]

    with pytest.raises(ChannelError, match="HTTP sink"):
        channel(f"http://127.0.0.1:{port}/notify").send(ITEM)


def test_http_notifications_are_verified_by_the_standard_webhooks_reference_receiver(
    sink: tuple[str, type[Sink]],
) -> None:
    # Given a sink and the channel signing with the active secret
    url, received = sink

    # When an item is sent
    channel(url).send(ITEM)

    # Then the reference implementation, holding the secret, verifies it as received; its
    # webhook-id is the outbox id (the receiver's dedupe key); another secret does not verify
    [(raw, headers)] = received.raw
    assert Webhook(SECRET).verify(raw, headers)["outbox_id"] == ITEM.outbox_id
    assert {k.lower(): v for k, v in headers.items()}["webhook-id"] == ITEM.outbox_id
    with pytest.raises(WebhookVerificationError):
        Webhook(signing_secret()).verify(raw, headers)


def test_during_a_rotation_a_receiver_holding_either_secret_verifies(
    sink: tuple[str, type[Sink]],
) -> None:
    # Given two active secrets: the new one, and the one receivers still hold
    url, received = sink
    new, old = signing_secret(), signing_secret()

    # When an item is sent
    channel(url, new, old).send(ITEM)

    # Then it carries a signature by each, and a receiver with either verifies it
    [(raw, headers)] = received.raw
    assert len({k.lower(): v for k, v in headers.items()}["webhook-signature"].split(" ")) == 2
    assert Webhook(new).verify(raw, headers) == Webhook(old).verify(raw, headers)


@pytest.mark.parametrize(
    "url", ["http://sink.example.com/notify", "ftp://sink.example.com/notify", "sink/notify"]
)
def test_a_notify_url_that_is_not_https_gets_nothing(url: str) -> None:
    # Given a channel configured with a URL that is not https (set by hand on the function)
    with pytest.raises(ChannelError, match="https://") as refused:
        # When it sends, then it refuses, before any connection, saying what is wrong
        HttpChannel(url, lambda: (SECRET,)).send(ITEM)
    assert not isinstance(refused.value, SinkGoneError)


def test_plain_http_to_loopback_is_refused_unless_asked_for(
    sink: tuple[str, type[Sink]],
) -> None:
    # Given the loopback sink, and a channel not told that plain http to it is allowed
    url, received = sink

    # When it sends, then it refuses and the sink got nothing
    with pytest.raises(ChannelError, match="https://"):
        HttpChannel(url, lambda: (SECRET,)).send(ITEM)
    assert received.raw == []


def test_without_an_active_signing_secret_nothing_is_sent(sink: tuple[str, type[Sink]]) -> None:
    url, received = sink

    with pytest.raises(ChannelError, match="signing secret"):
        HttpChannel(url, lambda: (), allow_loopback_http=True).send(ITEM)
    assert received.raw == []


def test_a_410_gone_is_told_apart_from_a_failure(sink: tuple[str, type[Sink]]) -> None:
    url, received = sink
    received.answer = 410

    with pytest.raises(SinkGoneError, match="410"):
        channel(url).send(ITEM)


@pytest.mark.parametrize(
    ("retry_after", "seconds"),
    [("120", 120), (formatdate(1_800_000_600, usegmt=True), 600)],
    ids=["delay-seconds", "http-date"],
)
def test_retry_after_is_read_in_seconds_or_as_an_http_date(
    sink: tuple[str, type[Sink]], retry_after: str, seconds: int
) -> None:
    # Given a sink that answers 503 asking to be left alone for a while
    url, received = sink
    received.answer = 503
    received.answer_headers = {"Retry-After": retry_after}

    # When the channel posts to it at a known time
    with pytest.raises(ChannelError) as refused:
        channel(url, clock=lambda: 1_800_000_000.0).send(ITEM)

    # Then the error carries how long it asked for
    assert refused.value.retry_after_seconds == seconds


def test_an_http_error_carries_no_credentials_or_query_of_the_url() -> None:
    # Given a sink URL with credentials in its userinfo and query, that does not resolve
    url = "https://hook-user:s3cr3t-pass@sink.invalid/notify?token=s3cr3t-token"

    # When the channel fails to reach it
    with pytest.raises(ChannelError) as failed:
        HttpChannel(url, lambda: (SECRET,), timeout_seconds=2).send(ITEM)

    # Then the error says what failed, without the secrets
    assert "HTTP sink" in str(failed.value)
    assert "s3cr3t" not in str(failed.value)


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
