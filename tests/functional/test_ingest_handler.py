"""The ingest Lambda on moto (SQS, Secrets Manager): only signed, fresh requests are enqueued.

Assertions are on the queue's content, not only on the HTTP answer. Every test runs with both
event shapes ingest can receive: a REST API's (payload 1.0) and an HTTP API's (payload 2.0).
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import boto3
import pytest
from moto import mock_aws

from fixtures import stripe
from fixtures.lambda_events import (
    SOURCE_IP,
    FakeLambdaContext,
    Values,
    api_gateway_event,
    http_api_event,
)
from fixtures.shapes import EVENTS_DIR
from fixtures.stripe import fixture_text
from functions.ingest import handler
from tests.support.pipeline import pipeline_on_moto
from tests.support.queues import refusing_what_sqs_refuses
from tests.support.signing import generated_secret, mercadopago_signature, stripe_signature

if TYPE_CHECKING:
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

STRIPE_BODY = fixture_text("charge.succeeded")  # has non-ASCII text: signed as raw bytes


class EventBuilder(Protocol):
    def __call__(
        self,
        provider: str,
        body: bytes,
        headers: Values,
        method: str = "POST",
        query: Values | None = None,
        base64_encoded: bool = False,
    ) -> dict[str, Any]: ...


@pytest.fixture(
    params=[api_gateway_event, http_api_event], ids=["rest-payload-1.0", "http-payload-2.0"]
)
def build(request: pytest.FixtureRequest) -> EventBuilder:
    """How API Gateway hands the request to ingest: `apiType=rest` or `apiType=http`."""
    return request.param  # type: ignore[no-any-return]


@dataclass
class Deployment:
    sqs: SQSClient
    queue_url: str
    secretsmanager: SecretsManagerClient
    secrets: dict[str, str]

    def messages(self) -> list[MessageTypeDef]:
        received: list[MessageTypeDef] = []
        while batch := self.sqs.receive_message(
            QueueUrl=self.queue_url, MaxNumberOfMessages=10, MessageAttributeNames=["All"]
        ).get("Messages", []):
            received += batch
        return received

    def set_active(self, provider: str, secrets: list[str]) -> None:
        self.secretsmanager.put_secret_value(
            SecretId=f"umavez/test/{provider}", SecretString=json.dumps({"active": secrets})
        )
        handler.webhook_ingest.cache_clear()  # as when the cache's max_age runs out


@pytest.fixture
def deployment(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployment]:
    with mock_aws():
        sqs = boto3.client("sqs")
        queue_url = sqs.create_queue(QueueName="umavez-test-webhooks")["QueueUrl"]
        secretsmanager = boto3.client("secretsmanager")
        secrets = {provider: generated_secret() for provider in ("stripe", "mercadopago", "asaas")}
        for provider, secret in secrets.items():
            secretsmanager.create_secret(
                Name=f"umavez/test/{provider}", SecretString=json.dumps({"active": [secret]})
            )
        monkeypatch.setenv("WEBHOOK_QUEUE_URL", queue_url)
        monkeypatch.setenv("PROVIDER_SECRETS", json.dumps({p: f"umavez/test/{p}" for p in secrets}))
        handler.webhook_ingest.cache_clear()
        yield Deployment(sqs, queue_url, secretsmanager, secrets)
        handler.webhook_ingest.cache_clear()


def post(event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = handler.lambda_handler(event, FakeLambdaContext(function_name="umavez-ingest"))
    return response["statusCode"], json.loads(response["body"])


def signed_stripe(
    build: EventBuilder, body: str, secret: str, at: int | None = None, method: str = "POST"
) -> dict[str, Any]:
    header = stripe_signature(body, secret, at if at is not None else int(time.time()))
    return build("stripe", body.encode(), {"Stripe-Signature": header}, method=method)


def test_signed_stripe_event_is_enqueued_once_exactly_as_received(
    deployment: Deployment, build: EventBuilder
) -> None:
    # Given a Stripe delivery signed with the active secret
    event = signed_stripe(build, STRIPE_BODY, deployment.secrets["stripe"])

    # When ingest receives it
    status, body = post(event)

    # Then exactly one message holds the raw payload, with the message contract's attributes
    [message] = deployment.messages()
    assert message["Body"] == STRIPE_BODY
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attributes == {
        "provider": "stripe",
        "event_id": "evt_3QpLqRJz8fEoYh0N1sG5hJ8k",
        "event_type": "charge.succeeded",
    }
    assert (status, body["event_id"]) == (200, "evt_3QpLqRJz8fEoYh0N1sG5hJ8k")


def test_a_signed_thin_event_is_enqueued_and_a_thin_event_signed_otherwise_is_refused(
    deployment: Deployment, build: EventBuilder
) -> None:
    # Given Stripe's thin event shape, signed with the endpoint's secret and with another
    thin = fixture_text("v1.payment_intent.succeeded.thin")

    # When ingest receives both
    refused, _ = post(signed_stripe(build, thin, generated_secret()))
    accepted, _ = post(signed_stripe(build, thin, deployment.secrets["stripe"]))

    # Then only the signed one is enqueued, as received, named by its own id and type
    assert (refused, accepted) == (401, 200)
    [message] = deployment.messages()
    assert message["Body"] == thin
    attributes = {k: v["StringValue"] for k, v in message["MessageAttributes"].items()}
    assert attributes == {
        "provider": "stripe",
        "event_id": "evt_65RCjj4EqW1sabcjs2Z16RCMoNQdSQkOWvfL6L5uU2K40u",
        "event_type": "v1.payment_intent.succeeded",
    }


def test_base64_encoded_body_is_verified_and_enqueued_as_the_original_text(
    deployment: Deployment,
    build: EventBuilder,
) -> None:
    header = stripe_signature(STRIPE_BODY, deployment.secrets["stripe"], int(time.time()))
    event = build("stripe", STRIPE_BODY.encode(), {"Stripe-Signature": header}, base64_encoded=True)

    status, _ = post(event)

    assert [m["Body"] for m in deployment.messages()] == [STRIPE_BODY]
    assert status == 200


def oversized_but_signed(secret: str, build: EventBuilder) -> dict[str, Any]:
    return signed_stripe(build, json.dumps({"id": "evt_big", "pad": "x" * 300_000}), secret)


EventMaker = Callable[[str, EventBuilder], dict[str, Any]]
REJECTIONS: dict[str, tuple[EventMaker, int, str]] = {
    "tampered": (
        lambda s, build: {
            **signed_stripe(build, STRIPE_BODY, s),
            "body": STRIPE_BODY.replace("5000", "50"),
        },
        401,
        "bad_signature",
    ),
    "wrong-secret": (
        lambda s, build: signed_stripe(build, STRIPE_BODY, generated_secret()),
        401,
        "bad_signature",
    ),
    "stale": (
        lambda s, build: signed_stripe(build, STRIPE_BODY, s, int(time.time()) - 3600),
        401,
        "stale_timestamp",
    ),
    "future": (
        lambda s, build: signed_stripe(build, STRIPE_BODY, s, int(time.time()) + 3600),
        401,
        "future_timestamp",
    ),
    "unsigned": (
        lambda s, build: build("stripe", STRIPE_BODY.encode(), {}),
        401,
        "missing_signature",
    ),
    "not-json": (lambda s, build: signed_stripe(build, "{not json", s), 400, "not_json"),
    "json-array": (lambda s, build: signed_stripe(build, "[1, 2]", s), 400, "not_json"),
    "no-envelope": (
        lambda s, build: signed_stripe(build, '{"object": "event"}', s),
        400,
        "missing_envelope",
    ),
    "too-large": (oversized_but_signed, 413, "payload_too_large"),
    "unknown-provider": (
        lambda s, build: {
            **signed_stripe(build, STRIPE_BODY, s),
            "pathParameters": {"provider": "paypal"},
        },
        404,
        "unknown_provider",
    ),
    "wrong-method": (
        lambda s, build: signed_stripe(build, STRIPE_BODY, s, method="GET"),
        405,
        "method_not_allowed",
    ),
    "bad-base64": (
        lambda s, build: {
            **signed_stripe(build, STRIPE_BODY, s),
            "isBase64Encoded": True,
            "body": "%%%",
        },
        400,
        "bad_encoding",
    ),
}


# Every authentication failure, whatever its reason: nothing more to learn from the answer.
UNAUTHENTICATED = {"error": "unauthenticated"}


def counted_reasons(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The per-reason refusal metrics ingest emitted (`rejected_bad_signature` -> bad_signature)."""
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    return sorted(
        name.removeprefix("rejected_")
        for line in lines
        for name in line
        if name.startswith("rejected_")
    )


@pytest.mark.parametrize("case", REJECTIONS, ids=list(REJECTIONS))
def test_bad_requests_get_a_clear_4xx_and_enqueue_nothing(
    deployment: Deployment, build: EventBuilder, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make_event, expected_status, expected_reason = REJECTIONS[case]

    status, body = post(make_event(deployment.secrets["stripe"], build))

    assert deployment.messages() == []
    if expected_status == 401:
        # One answer to every authentication failure; only the metric (and the log) says why
        assert (status, body) == (401, UNAUTHENTICATED)
    else:
        assert (status, body["error"]) == (expected_status, expected_reason)
        assert body["message"]
    assert counted_reasons(capsys) == [expected_reason]


def test_a_replayed_request_learns_nothing_of_its_signature(
    deployment: Deployment, build: EventBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given captured requests replayed an hour late: one with a good signature, one forged
    late = int(time.time()) - 3600
    good = signed_stripe(build, STRIPE_BODY, deployment.secrets["stripe"], late)
    forged = signed_stripe(build, STRIPE_BODY, generated_secret(), late)

    # When both arrive
    answers = [post(good), post(forged)]

    # Then they get the same answer, and both are refused as stale before any signature is
    # checked (so neither the answer nor the path says which signature was good)
    assert answers == [(401, UNAUTHENTICATED), (401, UNAUTHENTICATED)]
    assert counted_reasons(capsys) == ["stale_timestamp", "stale_timestamp"]
    assert deployment.messages() == []


def test_mercadopago_body_naming_another_resource_gets_the_same_answer_as_a_bad_signature(
    deployment: Deployment, build: EventBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a notification signed for one payment whose body names another, and a forged one
    raw = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_bytes()
    now = int(time.time())
    good = mercadopago_signature("999", "req-1", now, deployment.secrets["mercadopago"])
    forged = mercadopago_signature("999", "req-1", now, generated_secret())
    query = {"data.id": "999", "type": "payment"}
    events = [
        build("mercadopago", raw, {"x-signature": h, "x-request-id": "req-1"}, query=query)
        for h in (good, forged)
    ]

    # When both arrive
    answers = [post(event) for event in events]

    # Then the answers are the same; the metric alone tells them apart
    assert answers == [(401, UNAUTHENTICATED), (401, UNAUTHENTICATED)]
    assert counted_reasons(capsys) == ["bad_signature", "unsigned_resource"]
    assert deployment.messages() == []


def test_rejections_are_logged_without_secrets_and_counted_by_reason(
    deployment: Deployment, build: EventBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = io.StringIO()
    log_handler = handler.logger.registered_handler
    assert isinstance(log_handler, logging.StreamHandler)
    previous = log_handler.setStream(stream)
    try:
        post(signed_stripe(build, STRIPE_BODY, generated_secret()))
    finally:
        log_handler.setStream(previous)

    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert (line["reason"], line["provider"], line["status"]) == ("bad_signature", "stripe", 401)
    # The caller's address, read where each payload format keeps it
    assert line["source_ip"] == SOURCE_IP
    assert deployment.secrets["stripe"] not in stream.getvalue()
    assert "amount_captured" not in stream.getvalue()
    [emf] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert (emf["rejected"], emf["rejected_bad_signature"]) == ([1.0], [1.0])


def test_failed_send_is_a_5xx_so_the_provider_retries(
    deployment: Deployment, build: EventBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a queue that cannot be written to
    monkeypatch.setenv("WEBHOOK_QUEUE_URL", deployment.queue_url + "-gone")
    handler.webhook_ingest.cache_clear()

    # When a correctly signed event arrives
    status, body = post(signed_stripe(build, STRIPE_BODY, deployment.secrets["stripe"]))

    # Then nothing is enqueued and the answer is not a 2xx
    assert deployment.messages() == []
    assert (status, body["error"]) == (503, "enqueue_failed")


def test_during_rotation_both_secrets_work_and_a_retired_one_is_rejected(
    deployment: Deployment,
    build: EventBuilder,
) -> None:
    old, new = deployment.secrets["stripe"], generated_secret()

    deployment.set_active("stripe", [new, old])
    during = [post(signed_stripe(build, STRIPE_BODY, secret))[0] for secret in (new, old)]
    deployment.set_active("stripe", [new])
    after = [post(signed_stripe(build, STRIPE_BODY, secret))[0] for secret in (new, old)]

    assert len(deployment.messages()) == 3
    assert (during, after) == ([200, 200], [200, 401])


def test_unset_secret_is_a_5xx_not_a_silent_401(
    deployment: Deployment, build: EventBuilder
) -> None:
    deployment.set_active("stripe", [])

    status, body = post(signed_stripe(build, STRIPE_BODY, deployment.secrets["stripe"]))

    assert deployment.messages() == []
    assert (status, body["error"]) == (503, "secret_not_configured")


def test_mercadopago_notification_signed_over_its_manifest_is_enqueued(
    deployment: Deployment,
    build: EventBuilder,
) -> None:
    raw = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_bytes()
    header = mercadopago_signature(
        "1325896547", "req-7f3a", int(time.time()), deployment.secrets["mercadopago"]
    )
    event = build(
        "mercadopago",
        raw,
        {"x-signature": header, "x-request-id": "req-7f3a"},
        query={"data.id": "1325896547", "type": "payment"},
    )

    status, _ = post(event)

    [message] = deployment.messages()
    assert message["MessageAttributes"]["event_id"]["StringValue"] == "118452369871"
    assert message["MessageAttributes"]["event_type"]["StringValue"] == "payment.updated"
    assert status == 200


def test_mercadopago_notification_whose_ts_is_in_milliseconds_is_enqueued(
    deployment: Deployment,
    build: EventBuilder,
) -> None:
    # Given a notification signed with its ts in milliseconds
    raw = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_bytes()
    header = mercadopago_signature(
        "1325896547", "req-9c1d", int(time.time() * 1000), deployment.secrets["mercadopago"]
    )
    event = build(
        "mercadopago",
        raw,
        {"x-signature": header, "x-request-id": "req-9c1d"},
        query={"data.id": "1325896547", "type": "payment"},
    )

    # When it arrives
    status, _ = post(event)

    # Then it is accepted and enqueued: not refused as from the future
    [message] = deployment.messages()
    assert message["MessageAttributes"]["event_id"]["StringValue"] == "118452369871"
    assert status == 200


def test_mercadopago_query_is_read_as_sent_and_a_repeated_data_id_is_never_authentic(
    deployment: Deployment, build: EventBuilder
) -> None:
    # Given a signed notification whose query carries more than data.id, percent-encoded, and
    # the same notification with a second data.id appended on its way (payload 2.0 comma-joins
    # repeated parameters; 1.0 keeps the last one in queryStringParameters)
    raw = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_bytes()
    header = mercadopago_signature(
        "1325896547", "req-5e2b", int(time.time()), deployment.secrets["mercadopago"]
    )
    headers = {"x-signature": header, "x-request-id": "req-5e2b"}
    signed = build(
        "mercadopago", raw, headers, query={"data.id": "1325896547", "type": "payment updated"}
    )
    smuggled = build(
        "mercadopago", raw, headers, query={"data.id": ["1325896547", "999"], "type": "payment"}
    )

    # When both arrive
    answers = [post(signed), post(smuggled)]

    # Then only the one whose data.id is the signed one is enqueued, whichever the API type
    assert [(status, body.get("error")) for status, body in answers] == [
        (200, None),
        (401, "unauthenticated"),
    ]
    [message] = deployment.messages()
    assert json.loads(message["Body"])["data"]["id"] == "1325896547"


def test_repeated_headers_reach_ingest_joined_and_only_a_repeated_signature_is_refused(
    deployment: Deployment, build: EventBuilder, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a Stripe delivery relayed by proxies that repeat their own headers, and one whose
    # Stripe-Signature field appears twice (an HTTP API joins them: two timestamps)
    secret = deployment.secrets["stripe"]
    now = int(time.time())
    relayed = build(
        "stripe",
        STRIPE_BODY.encode(),
        {
            "Stripe-Signature": stripe_signature(STRIPE_BODY, secret, now),
            "X-Forwarded-For": ["198.51.100.7", "203.0.113.10"],
            "Via": ["1.1 edge-a", "1.1 edge-b"],
        },
    )
    doubled = build(
        "stripe",
        STRIPE_BODY.encode(),
        {
            "Stripe-Signature": [
                stripe_signature(STRIPE_BODY, secret, now),
                stripe_signature(STRIPE_BODY, generated_secret(), now),
            ]
        },
    )

    # When both arrive
    answers = [post(relayed), post(doubled)]

    # Then the relayed one is enqueued once, and the doubled signature is refused as malformed
    assert [(status, body.get("error")) for status, body in answers] == [
        (200, None),
        (401, "unauthenticated"),
    ]
    assert counted_reasons(capsys) == ["malformed_signature"]
    assert [m["Body"] for m in deployment.messages()] == [STRIPE_BODY]


def test_asaas_event_with_its_token_is_enqueued(
    deployment: Deployment, build: EventBuilder
) -> None:
    raw = (EVENTS_DIR / "asaas" / "PAYMENT_RECEIVED.json").read_bytes()
    event = build("asaas", raw, {"asaas-access-token": deployment.secrets["asaas"]})

    status, _ = post(event)

    [message] = deployment.messages()
    assert message["Body"] == raw.decode()
    assert message["MessageAttributes"]["event_type"]["StringValue"] == "PAYMENT_RECEIVED"
    assert status == 200


def test_asaas_allow_list_refuses_other_sources_with_the_same_401_and_enqueues_nothing(
    deployment: Deployment, build: EventBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a deployment that accepts Asaas webhooks from Asaas's published addresses only
    monkeypatch.setenv("ASAAS_SOURCE_IPS", "52.67.12.206,18.230.8.159")
    handler.webhook_ingest.cache_clear()
    raw = (EVENTS_DIR / "asaas" / "PAYMENT_RECEIVED.json").read_bytes()
    token = {"asaas-access-token": deployment.secrets["asaas"]}

    # When a correctly tokened event comes from elsewhere, and the same from a listed address
    elsewhere = post(build("asaas", raw, token))
    wrong_token = post(build("asaas", raw, {"asaas-access-token": "nope"}))
    listed = build("asaas", raw, token)
    context = listed["requestContext"]
    (context.get("http") or context["identity"])["sourceIp"] = "18.230.8.159"
    accepted = post(listed)

    # Then the stranger gets the 401 a bad token gets, and only the listed source is enqueued
    assert (elsewhere[0], wrong_token[0], accepted[0]) == (401, 401, 200)
    assert elsewhere[1] == wrong_token[1] == {"error": "unauthenticated"}
    assert [m["Body"] for m in deployment.messages()] == [raw.decode()]


def mercadopago_notification(build: EventBuilder, secret: str, live_mode: bool) -> dict[str, Any]:
    note = json.loads((EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text())
    note["live_mode"] = live_mode
    header = mercadopago_signature("1325896547", "req-9c1d", int(time.time()), secret)
    return build(
        "mercadopago",
        json.dumps(note).encode(),
        {"x-signature": header, "x-request-id": "req-9c1d"},
        query={"data.id": "1325896547", "type": "payment"},
    )


def test_test_mode_events_on_a_live_deployment_are_answered_200_and_never_enqueued(
    deployment: Deployment,
    build: EventBuilder,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Given a live deployment (a Connect platform's live endpoint also receives test events)
    monkeypatch.setenv("PAYMENT_MODE", "live")
    handler.webhook_ingest.cache_clear()
    test_stripe = signed_stripe(build, STRIPE_BODY, deployment.secrets["stripe"])  # livemode: false
    live_body = json.dumps({**json.loads(STRIPE_BODY), "livemode": True})
    live_stripe = signed_stripe(build, live_body, deployment.secrets["stripe"])
    capsys.readouterr()

    # When authentic test-mode events of Stripe and Mercado Pago arrive, and a live one
    answers = [
        post(test_stripe),
        post(mercadopago_notification(build, deployment.secrets["mercadopago"], live_mode=False)),
        post(live_stripe),
    ]

    # Then the test-mode ones are answered 200 (so the provider does not retry for days),
    # say why, and never reach the queue; only the live event is enqueued
    assert [(status, body.get("ignored")) for status, body in answers] == [
        (200, "test_mode"),
        (200, "test_mode"),
        (200, None),
    ]
    assert [m["Body"] for m in deployment.messages()] == [live_body]
    # And they are counted under their own reason
    emfs = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert sum(sum(emf.get("ignored_test_mode", [])) for emf in emfs) == 2


def test_stripe_event_without_livemode_is_refused_and_not_enqueued(
    deployment: Deployment,
    build: EventBuilder,
) -> None:
    # Given a correctly signed body shaped like a Stripe event but saying no mode
    body = json.loads(STRIPE_BODY)
    del body["livemode"]

    # When it arrives
    status, answer = post(signed_stripe(build, json.dumps(body), deployment.secrets["stripe"]))

    # Then it is a clear 400 and nothing is enqueued
    assert (status, answer["error"]) == (400, "missing_envelope")
    assert deployment.messages() == []


# Bodies deeper than a JSON parse can recurse (Python's parser stops near 1,000 levels), each
# well under the size limit: authentic bytes the parse cannot read.
TOO_DEEP = {
    "unclosed-arrays": "[" * 100_000,
    "objects-1000-deep": '{"a": ' * 1000 + "{}" + "}" * 1000,
}


@pytest.mark.parametrize("case", TOO_DEEP, ids=list(TOO_DEEP))
def test_a_signed_body_nested_too_deep_to_parse_is_a_400_logged_and_counted(
    deployment: Deployment, build: EventBuilder, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    # Given a correctly signed Stripe delivery whose body is nested too deep to parse
    event = signed_stripe(build, TOO_DEEP[case], deployment.secrets["stripe"])
    stream = io.StringIO()
    log_handler = handler.logger.registered_handler
    assert isinstance(log_handler, logging.StreamHandler)
    previous = log_handler.setStream(stream)

    # When ingest receives it
    try:
        status, answer = post(event)
    finally:
        log_handler.setStream(previous)

    # Then it is refused with its reason (a 5xx would make Stripe retry it for days), and
    # nothing is enqueued
    assert (status, answer["error"]) == (400, "too_deep")
    assert answer["message"]
    assert deployment.messages() == []
    # And it is logged and counted like every other refusal
    [line] = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert (line["reason"], line["provider"], line["status"]) == ("too_deep", "stripe", 400)
    [emf] = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert (emf["rejected"], emf["rejected_too_deep"]) == ([1.0], [1.0])


def test_a_signed_body_with_characters_sqs_refuses_is_enqueued_and_applied(
    build: EventBuilder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a signed Stripe payment whose description holds U+FFFE and U+FFFF, raw (JSON allows
    # them; an SQS message may not contain them), and a queue that refuses them as SQS does
    with pipeline_on_moto(monkeypatch) as pipeline, refusing_what_sqs_refuses():
        secret = generated_secret()
        boto3.client("secretsmanager").create_secret(
            Name="umavez/test/stripe", SecretString=json.dumps({"active": [secret]})
        )
        monkeypatch.setenv("PROVIDER_SECRETS", json.dumps({"stripe": "umavez/test/stripe"}))
        handler.webhook_ingest.cache_clear()
        order = stripe.unique("ord")
        event = json.loads(
            stripe.payment_intent_succeeded(order, stripe.unique("pi"), 5000, int(time.time()))
        )
        event["data"]["object"]["description"] = "Pedido \ufffe\uffff"
        body = json.dumps(event, ensure_ascii=False)

        # When ingest receives it, and process takes the queue
        status, answer = post(signed_stripe(build, body, secret))
        pipeline.process()
        handler.webhook_ingest.cache_clear()

        # Then it was enqueued (the same payload, the characters escaped) and its payment applied
        assert (status, answer.get("error")) == (200, None)
        [message] = pipeline.processed
        assert json.loads(message["Body"]) == event
        assert pipeline.world.order(order).paid_total == 5000
        assert pipeline.dead_letters() == 0


@pytest.mark.parametrize(
    "encoded",
    [
        STRIPE_BODY.encode("utf-16"),
        # A surrogate encoded in UTF-8: no valid UTF-8 holds one, nor can an SQS message
        STRIPE_BODY.replace("}", ', "x": "\ud800"}', 1).encode("utf-8", "surrogatepass"),
    ],
    ids=["utf-16", "encoded-surrogate"],
)
def test_a_signed_body_that_is_not_utf_8_is_a_400_not_a_crash(
    deployment: Deployment, build: EventBuilder, encoded: bytes
) -> None:
    # Given a correctly signed body that JSON's byte-level reader would take, but not UTF-8
    at = int(time.time())
    signature = hmac.new(
        deployment.secrets["stripe"].encode(), f"{at}.".encode() + encoded, hashlib.sha256
    ).hexdigest()
    event = build(
        "stripe", encoded, {"Stripe-Signature": f"t={at},v1={signature}"}, base64_encoded=True
    )

    # When ingest receives it, then it is refused as not JSON, and nothing is enqueued
    status, answer = post(event)
    assert (status, answer["error"]) == (400, "not_json")
    assert deployment.messages() == []
