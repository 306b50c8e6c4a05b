"""Property: whatever arrives, ingest never answers 5xx and enqueues only signed requests, in a
REST API's event (payload 1.0) as in an HTTP API's (payload 2.0)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import stripe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.internal.conjecture import providers as conjecture_providers
from hypothesis.internal.constants_ast import Constants

from fixtures.fakes import RecordingQueue, StaticSecrets
from fixtures.lambda_events import api_gateway_event, http_api_event
from fixtures.shapes import EVENTS_DIR
from fixtures.stripe import fixture_text
from functions.ingest import handler
from functions.ingest.service import VERIFIERS, WebhookIngest
from tests.support.signing import mercadopago_signature, stripe_signature

NOW = 1_764_460_800
SECRETS = {
    "stripe": "whsec_fuzz_not_a_real_secret_0000",
    "mercadopago": "mp_fuzz_not_a_real_secret_0000",
    "asaas": "asaas_fuzz_not_a_real_token_0000",
}
EXAMPLES = 400
MERCADOPAGO_BODY = (EVENTS_DIR / "mercadopago" / "payment.updated.json").read_text()
MERCADOPAGO_DATA_ID = "1325896547"
VALID_BODY = {
    "stripe": fixture_text("payment_intent.succeeded"),
    "mercadopago": MERCADOPAGO_BODY,
    "asaas": (EVENTS_DIR / "asaas" / "PAYMENT_RECEIVED.json").read_text(),
}
# What each scheme authenticates: Stripe the body and time; Mercado Pago data.id, request id
# and time but not the body; Asaas a static token only.
VALID_UNDER_SCHEME = {
    "stripe": {"correct"},
    "mercadopago": {"correct", "tampered"},
    "asaas": {"correct", "tampered", "stale"},
}
HEADER_NAMES = ["Stripe-Signature", "x-signature", "x-request-id", "asaas-access-token", "X-Other"]


@dataclass(frozen=True)
class Attempt:
    event: dict[str, Any]
    provider: str
    method: str
    body: str
    headers: dict[str, str]
    signing: str
    correctly_signed: bool

    @property
    def forged(self) -> bool:
        """A known provider, a POST and a well-formed payload: only the signature is wrong."""
        return (
            not self.correctly_signed
            and self.signing != "none"
            and self.method == "POST"
            and self.body in VALID_BODY.values()
        )


EventBuilder = Callable[..., dict[str, Any]]


@st.composite
def attempts(draw: st.DrawFn, build: EventBuilder) -> Attempt:
    # Hypothesis favours the first entries of sampled_from: the interesting cases go first.
    provider = draw(st.sampled_from([*SECRETS, "paypal"]))
    valid_body = st.just(VALID_BODY.get(provider, "{}"))
    body = draw(
        st.one_of(
            valid_body,
            valid_body,
            valid_body,
            st.text(max_size=200),
            st.dictionaries(
                st.sampled_from(["id", "type", "created", "event", "action"]), st.text(max_size=20)
            ).map(json.dumps),
        )
    )
    headers = draw(
        st.dictionaries(st.sampled_from(HEADER_NAMES), st.text(max_size=120), max_size=3)
    )
    signing = draw(
        st.sampled_from(["wrong-secret", "correct", "tampered", "stale", "correct", "none"])
    )
    secret = SECRETS.get(provider, "x") + ("-not-it" if signing == "wrong-secret" else "")
    signed_at = NOW - 3600 if signing == "stale" else NOW + draw(st.integers(-300, 300))
    signed_body = body + " " if signing == "tampered" else body
    if signing != "none":
        if provider == "stripe":
            headers["Stripe-Signature"] = stripe_signature(signed_body, secret, signed_at)
        elif provider == "mercadopago":
            headers["x-signature"] = mercadopago_signature(
                MERCADOPAGO_DATA_ID, headers.get("x-request-id"), signed_at, secret
            )
        elif provider == "asaas":
            headers["asaas-access-token"] = secret
    method = draw(st.sampled_from(["POST"] * 8 + ["GET", "PUT"]))
    query = draw(st.sampled_from([{"data.id": MERCADOPAGO_DATA_ID}] * 3 + [None, {"data.id": "1"}]))
    event = build(provider, body.encode(), headers, method=method, query=query)
    correctly_signed = signing in VALID_UNDER_SCHEME.get(provider, set())
    return Attempt(event, provider, method, body, headers, signing, correctly_signed)


@pytest.fixture
def generator_independent_of_loaded_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis (pinned) mixes constants from every loaded local module into its draws,
    sampled_from indexes included: the same derandomized run then generates other cases
    depending on which test modules were imported before it. The thresholds below are about
    this generator, so it draws from no module's constants."""
    monkeypatch.setattr(conjecture_providers, "_get_local_constants", Constants)


@pytest.mark.usefixtures("generator_independent_of_loaded_modules")
@pytest.mark.parametrize(
    "build", [api_gateway_event, http_api_event], ids=["rest-payload-1.0", "http-payload-2.0"]
)
def test_no_input_yields_a_5xx_or_an_unsigned_enqueue(build: EventBuilder) -> None:
    queue = RecordingQueue()
    ingest = WebhookIngest(
        VERIFIERS, StaticSecrets({p: (s,) for p, s in SECRETS.items()}), queue, lambda: NOW
    )
    cases: list[Attempt] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(attempts(build))
    def property_holds(attempt: Attempt) -> None:
        cases.append(attempt)
        before = len(queue.sent)
        response = handler.respond(attempt.event, ingest)
        handler.metrics.clear_metrics()
        enqueued = len(queue.sent) - before

        assert response["statusCode"] < 500
        assert enqueued == (1 if response["statusCode"] == 200 else 0)
        if enqueued:
            assert attempt.correctly_signed, attempt
            assert queue.sent[-1][0] == attempt.body
            if attempt.provider == "stripe":
                header = {k.lower(): v for k, v in attempt.headers.items()}["stripe-signature"]
                stripe.WebhookSignature.verify_header(
                    attempt.body, header, SECRETS["stripe"], tolerance=None
                )

    property_holds()

    accepted = len(queue.sent)
    assert len(cases) == EXAMPLES
    forgeries = sum(case.forged for case in cases)
    print(f"{EXAMPLES} cases: {accepted} accepted, {forgeries} forgeries refused")
    assert forgeries >= EXAMPLES // 40, "too few forgeries tried"
    assert EXAMPLES // 20 < accepted < EXAMPLES // 2, (
        f"{accepted} of {EXAMPLES} accepted: a lopsided generator"
    )
