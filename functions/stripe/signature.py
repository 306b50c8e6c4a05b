"""Stripe: `Stripe-Signature: t=...,v1=...[,v1=...]`, HMAC-SHA256 over "{t}.{raw body}"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from functions.shared.rejections import MalformedRequestError, UnauthenticatedError
from functions.shared.webhooks import (
    Envelope,
    WebhookRequest,
    check_freshness,
    hmac_matches,
    optional_flag,
    parse_signed_header,
    require_text,
)

HEADER: Final = "stripe-signature"
TOLERANCE_SECONDS: Final = 300


class StripeVerifier:
    def __init__(self, tolerance_seconds: int = TOLERANCE_SECONDS) -> None:
        self._tolerance = tolerance_seconds

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> None:
        header = request.headers.get(HEADER)
        if not header:
            raise UnauthenticatedError("missing_signature", "Stripe-Signature header is missing")
        signed = parse_signed_header(header, "Stripe-Signature", timestamp_key="t")
        # Freshness first, without computing an HMAC: a captured request replayed late is
        # refused the same way, on the same path, whether its signature is good or not.
        check_freshness(signed.timestamp, now, self._tolerance)
        message = f"{signed.timestamp_text}.".encode() + request.body
        if not hmac_matches(secrets, message, signed.signatures):
            raise UnauthenticatedError("bad_signature", "no v1 signature matches")

    def envelope(self, payload: Mapping[str, Any], request: WebhookRequest) -> Envelope:
        event_id = require_text(payload, "id")
        if not event_id.startswith("evt_"):
            raise MalformedRequestError("missing_envelope", "Stripe event id must start with evt_")
        require_text(payload, "created")
        # Every Stripe event says which mode it belongs to; one that does not is not Stripe's.
        live = optional_flag(payload, "livemode")
        if live is None:
            raise MalformedRequestError("missing_envelope", "Stripe event has no 'livemode'")
        return Envelope(event_id=event_id, event_type=require_text(payload, "type"), live=live)
