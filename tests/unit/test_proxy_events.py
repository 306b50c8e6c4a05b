"""Ingest reads a REST API's proxy event (payload 1.0) and an HTTP API's (payload 2.0) as the same
request: the exact body bytes, lower-cased headers, the query, the method and the provider."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from fixtures.lambda_events import (
    EVENTS_DIR,
    SOURCE_IP,
    Values,
    api_gateway_event,
    http_api_event,
)
from functions.ingest.request import from_proxy_event, source_ip
from functions.shared.rejections import MalformedRequestError
from functions.shared.webhooks import WebhookRequest

BODY = '{"id": "evt_1", "description": "Café ✓"}'.encode()


def recorded_http_api_event() -> dict[str, Any]:
    return json.loads((EVENTS_DIR / "http_api_v2.stripe.json").read_text())  # type: ignore[no-any-return]


def test_the_recorded_http_api_event_is_read_where_payload_2_0_keeps_each_part() -> None:
    # Given an HTTP API event as API Gateway delivers it to POST /webhooks/{provider}
    event = recorded_http_api_event()

    # When ingest reads it
    request = from_proxy_event(event)

    # Then the method comes from requestContext.http, the body is the text as sent
    assert (request.method, request.provider) == ("POST", "stripe")
    assert request.body == event["body"].encode()
    assert request.headers["stripe-signature"] == event["headers"]["stripe-signature"]
    assert request.query == {}
    assert source_ip(event) == "54.187.174.169"


CASES: dict[str, dict[str, Any]] = {
    "plain": {"headers": {"Stripe-Signature": "t=1,v1=ab"}},
    "base64 body": {"headers": {"Stripe-Signature": "t=1,v1=ab"}, "base64_encoded": True},
    "query": {
        "headers": {"x-signature": "ts=1,v1=ab", "X-Request-Id": "req-1"},
        "query": {"data.id": "1325896547", "type": "payment"},
    },
    "percent-encoded query": {
        "headers": {"x-signature": "ts=1,v1=ab"},
        "query": {"data.id": "ABC 123/ü", "note": "a&b=c"},
    },
    "repeated query parameter": {
        "headers": {"x-signature": "ts=1,v1=ab"},
        "query": {"data.id": ["1", "2"]},
    },
    "repeated headers": {
        "headers": {
            "Stripe-Signature": "t=1,v1=ab",
            "X-Forwarded-For": ["198.51.100.7", "10.0.0.1"],
        },
    },
    "another method": {"headers": {"asaas-access-token": "tok"}, "method": "PUT"},
}


def both_shapes(
    headers: Values,
    query: Values | None = None,
    base64_encoded: bool = False,
    method: str = "POST",
) -> tuple[WebhookRequest, WebhookRequest]:
    rest, http = (
        from_proxy_event(build("asaas", BODY, headers, method, query, base64_encoded))
        for build in (api_gateway_event, http_api_event)
    )
    return rest, http


@pytest.mark.parametrize("case", CASES)
def test_the_same_request_reads_the_same_whichever_api_delivered_it(case: str) -> None:
    rest, http = both_shapes(**CASES[case])

    # API Gateway adds its own transport headers (host, x-forwarded-*) to 2.0's; the sender's
    # headers read the same
    sent = {name.lower() for name in CASES[case]["headers"]}
    assert {k: v for k, v in http.headers.items() if k in sent} == rest.headers
    assert (http.method, http.provider, http.query, http.body) == (
        rest.method,
        rest.provider,
        rest.query,
        rest.body,
    )
    assert rest.body == BODY


def test_repeated_names_are_their_values_comma_joined_in_order() -> None:
    rest, http = both_shapes(
        {"X-Forwarded-For": ["198.51.100.7", "10.0.0.1"]}, query={"data.id": ["1", "2"]}
    )

    for request in (rest, http):
        assert request.headers["x-forwarded-for"] == "198.51.100.7,10.0.0.1"
        assert request.query == {"data.id": "1,2"}


def test_the_query_of_2_0_is_decoded_from_the_raw_query_string() -> None:
    # queryStringParameters cannot tell a repeated name from a value with a comma
    event = {
        **http_api_event("mercadopago", BODY, {}),
        "rawQueryString": "data.id=1%2C2&type=payment",
        "queryStringParameters": {"data.id": "1,2", "type": "payment"},
    }
    repeated = {
        **http_api_event("mercadopago", BODY, {}),
        "rawQueryString": "data.id=1&data.id=2",
        "queryStringParameters": {"data.id": "1,2"},
    }

    assert from_proxy_event(event).query == {"data.id": "1,2", "type": "payment"}
    assert from_proxy_event(repeated).query == {"data.id": "1,2"}
    # An event without rawQueryString (not one API Gateway sends) falls back to the parameters
    without_raw = {k: v for k, v in event.items() if k != "rawQueryString"}
    assert from_proxy_event(without_raw).query == {"data.id": "1,2", "type": "payment"}


def test_2_0_without_a_body_or_query_is_an_empty_request_not_an_error() -> None:
    event = recorded_http_api_event()
    for field in ("body", "rawQueryString"):
        del event[field]

    request = from_proxy_event(event)

    assert (request.body, request.query) == (b"", {})


@pytest.mark.parametrize("build", [api_gateway_event, http_api_event])
def test_a_body_marked_base64_that_is_not_is_malformed_in_both_shapes(build: Any) -> None:
    event = {**build("stripe", BODY, {}), "isBase64Encoded": True, "body": "%%%"}

    with pytest.raises(MalformedRequestError) as raised:
        from_proxy_event(event)

    assert raised.value.reason == "bad_encoding"


@pytest.mark.parametrize("build", [api_gateway_event, http_api_event])
def test_base64_bodies_are_the_bytes_sent(build: Any) -> None:
    binary = bytes(range(256))
    event = {
        **build("stripe", BODY, {}),
        "isBase64Encoded": True,
        "body": base64.b64encode(binary).decode(),
    }

    assert from_proxy_event(event).body == binary


def test_the_source_address_is_read_where_each_format_keeps_it() -> None:
    rest = api_gateway_event("stripe", BODY, {})
    http = http_api_event("stripe", BODY, {})

    assert source_ip(rest) == source_ip(http) == SOURCE_IP
    assert "identity" not in http["requestContext"]
    assert source_ip({"version": "2.0", "requestContext": {}}) is None
    assert source_ip({}) is None
