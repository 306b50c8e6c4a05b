"""The local webhook front plays either API Gateway: an HTTP API (payload 2.0, the default, as in
the stack) or a REST API (payload 1.0). Ingest reads the same request from both, and a signed
Stripe event through the HTTP API front is applied once."""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest

from devstack.front import ApiFront
from devstack.resources import DEVELOPMENT_SECRETS, client
from devstack.stack import EmbeddedStack
from firedrill.delivery import DeliveryLog, Providers
from firedrill.story import Post
from fixtures import stripe
from functions.ingest.request import from_proxy_event
from functions.shared.domain import Outcome
from infra.config import ApiType
from ops.state import order_view

T0 = 1_764_460_800


@contextmanager
def front_recording(api_type: ApiType) -> Iterator[tuple[ApiFront, list[dict[str, Any]]]]:
    """A front whose "ingest" only records the events it is handed."""
    events: list[dict[str, Any]] = []

    def ingest(event: dict[str, Any], _context: Any) -> dict[str, Any]:
        events.append(event)
        return {"statusCode": 200, "headers": {}, "body": "{}"}

    front = ApiFront(ingest, api_type=api_type).start()
    try:
        yield front, events
    finally:
        front.stop()


def send(url: str, body: bytes, headers: list[tuple[str, str]], method: str = "POST") -> int:
    """One request with its header fields as listed, repeated ones included (urllib would keep
    one value per name)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.putrequest(method, f"{parts.path}?{parts.query}" if parts.query else parts.path)
        for name, value in [*headers, ("Content-Length", str(len(body)))]:
            connection.putheader(name, value)
        connection.endheaders(body)
        return connection.getresponse().status
    finally:
        connection.close()


BODY = '{"id": "evt_1", "description": "Café ✓"}'.encode()
HEADERS = [
    ("Content-Type", "application/json; charset=utf-8"),
    ("Stripe-Signature", "t=1,v1=ab"),
    ("X-Forwarded-For", "198.51.100.7"),
    ("X-Forwarded-For", "10.0.0.1"),
    ("Cookie", "a=1; b=2"),
]


def test_the_http_api_front_hands_ingest_a_payload_2_0_event() -> None:
    with front_recording(ApiType.HTTP) as (front, events):
        # When a webhook with a repeated header, a cookie and a query is posted
        status = send(f"{front.url}/webhooks/stripe?data.id=1&data.id=2&type=a%20b", BODY, HEADERS)

    # Then ingest got it as an HTTP API delivers it
    [event] = events
    assert status == 200
    assert (event["version"], event["routeKey"]) == ("2.0", "POST /webhooks/{provider}")
    assert event["requestContext"]["http"]["method"] == "POST"
    assert event["requestContext"]["http"]["sourceIp"] == "127.0.0.1"
    assert event["pathParameters"] == {"provider": "stripe"}
    assert event["headers"]["x-forwarded-for"] == "198.51.100.7,10.0.0.1"
    assert "cookie" not in event["headers"]
    assert event["cookies"] == ["a=1", "b=2"]
    assert event["rawQueryString"] == "data.id=1&data.id=2&type=a%20b"
    assert event["queryStringParameters"] == {"data.id": "1,2", "type": "a b"}
    # A JSON body arrives as its text; signatures are checked over its UTF-8 bytes
    assert (event["isBase64Encoded"], event["body"]) == (False, BODY.decode())
    assert "httpMethod" not in event


def test_a_body_that_is_not_text_reaches_ingest_base64_as_an_http_api_sends_it() -> None:
    with front_recording(ApiType.HTTP) as (front, events):
        send(
            f"{front.url}/webhooks/asaas",
            b"\xff\x00",
            [("Content-Type", "application/octet-stream")],
        )

    [event] = events
    assert (event["isBase64Encoded"], event["body"]) == (True, "/wA=")


@pytest.mark.parametrize(
    ("api_type", "reaches_ingest"), [(ApiType.HTTP, False), (ApiType.REST, True)]
)
def test_only_the_route_reaches_ingest_as_an_http_api(
    api_type: ApiType, reaches_ingest: bool
) -> None:
    with front_recording(api_type) as (front, events):
        get = send(f"{front.url}/webhooks/stripe", b"", [], method="GET")
        elsewhere = send(f"{front.url}/other", BODY, [])

    # An HTTP API has no route for GET: its own 404; a REST API's front leaves the 405 to ingest
    assert elsewhere == 404
    assert (get, len(events)) == ((200, 1) if reaches_ingest else (404, 0))


def test_ingest_reads_the_same_request_from_either_front() -> None:
    requests = []
    for api_type in ApiType:
        with front_recording(api_type) as (front, events):
            send(f"{front.url}/webhooks/mercadopago?data.id=1325896547&type=payment", BODY, HEADERS)
        requests.append(from_proxy_event(events[0]))

    http, rest = requests
    assert (http.method, http.provider, http.query, http.body) == (
        rest.method,
        rest.provider,
        rest.query,
        rest.body,
    )
    assert http.body == BODY
    for name in ("stripe-signature", "x-forwarded-for", "content-type"):
        assert http.headers[name] == rest.headers[name], name


def test_a_signed_stripe_event_through_the_http_api_front_is_enqueued_and_applied_once() -> None:
    order, intent = stripe.unique("ord"), stripe.unique("pi")
    with EmbeddedStack(api_type=ApiType.HTTP) as stack:
        # Given the embedded stack playing an HTTP API, its events watched on their way
        seen: list[dict[str, Any]] = []
        ingest = stack.front.ingest

        def watched(event: dict[str, Any], context: Any) -> dict[str, Any]:
            seen.append(event)
            return ingest(event, context)

        stack.front.ingest = watched
        providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, DeliveryLog())

        # When Stripe delivers a signed payment_intent.succeeded (and resends it)
        paid = stripe.payment_intent_succeeded(order, intent, 5000, T0)
        statuses = [providers.deliver(Post("stripe", paid)) for _ in range(2)]
        assert stack.drain()
        view = order_view(client("dynamodb", stack.aws.endpoint_url), stack.resources.tables, order)

    # Then ingest read payload 2.0 events with the JSON as text, accepted both, and the ledger
    # holds one applied payment
    assert statuses == [[200], [200]]
    assert {(e["version"], e["isBase64Encoded"]) for e in seen} == {("2.0", False)}
    assert view.books.paid_total == 5000
    assert [e.outcome for e in view.effects] == [Outcome.APPLIED.value]
