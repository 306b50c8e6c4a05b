"""Signature schemes on raw bytes: what each provider signs, and every way to get it wrong."""

from __future__ import annotations

import hmac
import json

import pytest
import stripe

from fixtures.shapes import EVENTS_DIR
from fixtures.stripe import fixture_text
from functions.asaas.signature import AsaasVerifier
from functions.mercadopago.signature import MercadoPagoVerifier, manifest
from functions.shared.rejections import MalformedRequestError, UnauthenticatedError
from functions.shared.webhooks import WebhookRequest
from functions.stripe.signature import StripeVerifier
from tests.support.signing import generated_secret, mercadopago_signature, stripe_signature

NOW = 1_764_460_800
BODY = fixture_text("payment_intent.succeeded")


def stripe_request(body: str, headers: dict[str, str]) -> WebhookRequest:
    return WebhookRequest("POST", "stripe", headers, {}, body.encode())


def rejection(verify: object) -> str:
    assert callable(verify)
    with pytest.raises(UnauthenticatedError) as caught:
        verify()
    return caught.value.reason


@pytest.fixture
def secret() -> str:
    return generated_secret()


def test_stripe_signature_made_by_stripes_library_verifies(secret: str) -> None:
    header = stripe_signature(BODY, secret, NOW)
    request = stripe_request(BODY, {"stripe-signature": header})

    StripeVerifier().verify(request, [secret], NOW)

    stripe.WebhookSignature.verify_header(BODY, header, secret, tolerance=None)  # oracle agrees


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda body, header: (body.replace("5000", "9000"), header), "bad_signature"),
        (lambda body, header: (body + " ", header), "bad_signature"),
        (lambda body, header: (body, header.replace("v1=", "v0=")), "malformed_signature"),
        (lambda body, header: (body, "t=abc,v1=" + "0" * 64), "malformed_signature"),
        (lambda body, header: (body, "garbage"), "malformed_signature"),
        (lambda body, header: (body, header + ",t=1"), "malformed_signature"),
        (lambda body, header: (body, header[:-1] + "é"), "bad_signature"),
        (lambda body, header: (body, ""), "missing_signature"),
    ],
    ids=["amount", "whitespace", "no-v1", "bad-t", "garbage", "two-t", "non-ascii", "empty"],
)
def test_stripe_tampered_requests_are_rejected(secret: str, change: object, reason: str) -> None:
    assert callable(change)
    body, header = change(BODY, stripe_signature(BODY, secret, NOW))
    request = stripe_request(body, {"stripe-signature": header})

    assert rejection(lambda: StripeVerifier().verify(request, [secret], NOW)) == reason


def test_stripe_signature_with_another_secret_is_rejected(secret: str) -> None:
    request = stripe_request(BODY, {"stripe-signature": stripe_signature(BODY, secret, NOW)})

    assert (
        rejection(lambda: StripeVerifier().verify(request, [generated_secret()], NOW))
        == "bad_signature"
    )


@pytest.mark.parametrize(
    ("signed_at", "reason"),
    [(NOW - 301, "stale_timestamp"), (NOW + 301, "future_timestamp")],
)
def test_stripe_timestamps_outside_300s_either_way_are_rejected(
    secret: str, signed_at: int, reason: str
) -> None:
    request = stripe_request(BODY, {"stripe-signature": stripe_signature(BODY, secret, signed_at)})

    assert rejection(lambda: StripeVerifier().verify(request, [secret], NOW)) == reason


@pytest.mark.parametrize("offset", [-300, 300])
def test_stripe_timestamps_at_the_tolerance_edge_are_accepted(secret: str, offset: int) -> None:
    request = stripe_request(
        BODY, {"stripe-signature": stripe_signature(BODY, secret, NOW + offset)}
    )

    StripeVerifier().verify(request, [secret], NOW)


def test_stripe_rolling_secret_header_with_two_v1_verifies_with_either(secret: str) -> None:
    old, new = secret, generated_secret()
    old_v1 = stripe_signature(BODY, old, NOW).split(",")[1]
    header = stripe_signature(BODY, new, NOW) + "," + old_v1

    for active in ([old], [new]):
        StripeVerifier().verify(stripe_request(BODY, {"stripe-signature": header}), active, NOW)


def test_mercadopago_manifest_leaves_out_missing_parts() -> None:
    assert manifest("ABC123", "req-1", "1700000000") == "id:abc123;request-id:req-1;ts:1700000000;"
    assert manifest(None, "req-1", "1700000000") == "request-id:req-1;ts:1700000000;"
    assert manifest(None, None, "1700000000") == "ts:1700000000;"


def test_mercadopago_signature_over_the_manifest_verifies(secret: str) -> None:
    header = mercadopago_signature("123456", "req-1", NOW, secret)
    request = WebhookRequest(
        "POST",
        "mercadopago",
        {"x-signature": header, "x-request-id": "req-1"},
        {"data.id": "123456"},
        b"{}",
    )

    MercadoPagoVerifier().verify(request, [secret], NOW)


@pytest.mark.parametrize(
    ("query", "request_id", "reason"),
    [
        ({"data.id": "999"}, "req-1", "bad_signature"),
        ({"data.id": "123456"}, "req-2", "bad_signature"),
        ({}, "req-1", "bad_signature"),
    ],
    ids=["other-data-id", "other-request-id", "no-data-id"],
)
def test_mercadopago_signature_binds_data_id_and_request_id(
    secret: str, query: dict[str, str], request_id: str, reason: str
) -> None:
    header = mercadopago_signature("123456", "req-1", NOW, secret)
    request = WebhookRequest(
        "POST", "mercadopago", {"x-signature": header, "x-request-id": request_id}, query, b"{}"
    )

    assert rejection(lambda: MercadoPagoVerifier().verify(request, [secret], NOW)) == reason


def test_mercadopago_signature_stamped_in_milliseconds_is_checked_as_its_seconds(
    secret: str,
) -> None:
    # Given notifications whose signed ts is in milliseconds: one of now, one an hour old
    def signed_at(ts: int) -> WebhookRequest:
        header = mercadopago_signature("1", None, ts, secret)
        return WebhookRequest(
            "POST", "mercadopago", {"x-signature": header}, {"data.id": "1"}, b"{}"
        )

    # When they are verified, Then the fresh one verifies (it is not from the future), and
    # the old one is stale, as its seconds would be
    MercadoPagoVerifier().verify(signed_at(NOW * 1000 + 250), [secret], NOW)
    assert (
        rejection(
            lambda: MercadoPagoVerifier().verify(signed_at((NOW - 3600) * 1000), [secret], NOW)
        )
        == "stale_timestamp"
    )


def test_mercadopago_stale_signature_is_rejected(secret: str) -> None:
    header = mercadopago_signature("1", None, NOW - 3600, secret)
    request = WebhookRequest(
        "POST", "mercadopago", {"x-signature": header}, {"data.id": "1"}, b"{}"
    )

    assert (
        rejection(lambda: MercadoPagoVerifier().verify(request, [secret], NOW)) == "stale_timestamp"
    )


@pytest.mark.parametrize(
    ("headers", "reason"),
    [({}, "missing_signature"), ({"asaas-access-token": "wrong"}, "bad_signature")],
)
def test_asaas_token_must_match(secret: str, headers: dict[str, str], reason: str) -> None:
    request = WebhookRequest("POST", "asaas", headers, {}, b"{}")

    assert rejection(lambda: AsaasVerifier().verify(request, [secret], NOW)) == reason


def test_asaas_token_matching_any_active_secret_is_accepted(secret: str) -> None:
    request = WebhookRequest("POST", "asaas", {"asaas-access-token": secret}, {}, b"{}")

    AsaasVerifier().verify(request, [generated_secret(), secret], NOW)


@pytest.mark.parametrize("presented", ["x", "wrong-but-long" * 20, "", "é"])
def test_asaas_token_is_compared_in_constant_time_as_fixed_length_digests(
    secret: str, presented: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a spy on the comparison the verifier makes
    compared: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    request = WebhookRequest("POST", "asaas", {"asaas-access-token": presented or " "}, {}, b"{}")

    # When a token of another length than the secret's is presented, and the right one
    rejection(lambda: AsaasVerifier().verify(request, [secret, generated_secret()], NOW))
    right = WebhookRequest("POST", "asaas", {"asaas-access-token": secret}, {}, b"{}")
    AsaasVerifier().verify(right, [secret], NOW)

    # Then every comparison was of two SHA-256 digests: no early return on a length mismatch
    assert compared
    assert set(compared) == {(32, 32)}


def test_asaas_source_outside_the_allow_list_is_refused_as_unauthenticated(secret: str) -> None:
    headers = {"asaas-access-token": secret}
    verifier = AsaasVerifier(["52.67.12.206", "10.1.0.0/16"])

    for source in ("203.0.113.10", None, "not-an-address"):
        request = WebhookRequest("POST", "asaas", headers, {}, b"{}", source_ip=source)
        assert rejection(lambda r=request: verifier.verify(r, [secret], NOW)) == (
            "source_not_allowed"
        )
    for source in ("52.67.12.206", "10.1.200.3"):
        verifier.verify(WebhookRequest("POST", "asaas", headers, {}, b"{}", source), [secret], NOW)


@pytest.mark.parametrize(("body_id", "signed_id"), [("999", "123"), (None, "123"), ("123", None)])
def test_mercadopago_body_must_name_the_signed_resource(
    body_id: str | None, signed_id: str | None
) -> None:
    payload = {"id": 1, "type": "payment", "data": {"id": body_id} if body_id else {}}
    query = {"data.id": signed_id} if signed_id else {}
    request = WebhookRequest("POST", "mercadopago", {}, query, b"{}")

    assert (
        rejection(lambda: MercadoPagoVerifier().envelope(payload, request)) == "unsigned_resource"
    )


def test_mercadopago_order_notification_signed_in_lower_case_is_named_by_its_version(
    secret: str,
) -> None:
    # Given an order's notification as Mercado Pago signs it: the alphanumeric data.id in lower
    # case in the manifest, no id of the notification's own in the body
    body = (EVENTS_DIR / "mercadopago" / "order.notification.json").read_text()
    query = {"data.id": "ORD01JQ4S4KY8HWQ6NA5PXB65B3D3", "type": "order"}
    header = mercadopago_signature("ord01jq4s4ky8hwq6na5pxb65b3d3", "req-7", NOW, secret)
    request = WebhookRequest(
        "POST",
        "mercadopago",
        {"x-signature": header, "x-request-id": "req-7"},
        query,
        body.encode(),
    )

    # When ingest verifies it and reads its envelope
    MercadoPagoVerifier().verify(request, [secret], NOW)
    envelope = MercadoPagoVerifier().envelope(json.loads(body), request)

    # Then it is accepted, named by its order and the order's version
    assert (envelope.event_id, envelope.event_type) == (
        "ORD01JQ4S4KY8HWQ6NA5PXB65B3D3:3",
        "order.processed",
    )


def test_mercadopago_notification_without_an_id_or_an_order_version_is_refused() -> None:
    payload = {"type": "payment", "action": "payment.updated", "data": {"id": "123"}}
    request = WebhookRequest("POST", "mercadopago", {}, {"data.id": "123"}, b"{}")

    with pytest.raises(MalformedRequestError) as refused:
        MercadoPagoVerifier().envelope(payload, request)

    assert refused.value.reason == "missing_envelope"
