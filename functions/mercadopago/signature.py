"""Mercado Pago: `x-signature: ts=...,v1=...` over the manifest
`id:{data.id};request-id:{x-request-id};ts:{ts};`, leaving out the parts a request lacks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from functions.shared.rejections import UnauthenticatedError
from functions.shared.webhooks import (
    Envelope,
    WebhookRequest,
    check_freshness,
    hmac_matches,
    optional_flag,
    parse_signed_header,
    require_text,
)

HEADER: Final = "x-signature"
REQUEST_ID_HEADER: Final = "x-request-id"
TOLERANCE_SECONDS: Final = 300


def manifest(data_id: str | None, request_id: str | None, ts: str) -> str:
    parts = []
    if data_id:
        # Their docs: an alphanumeric data.id is signed in lower case.
        parts.append(f"id:{data_id.lower()};")
    if request_id:
        parts.append(f"request-id:{request_id};")
    parts.append(f"ts:{ts};")
    return "".join(parts)


class MercadoPagoVerifier:
    def __init__(self, tolerance_seconds: int = TOLERANCE_SECONDS) -> None:
        self._tolerance = tolerance_seconds

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> None:
        header = request.headers.get(HEADER)
        if not header:
            raise UnauthenticatedError("missing_signature", "x-signature header is missing")
        signed = parse_signed_header(header, "x-signature", timestamp_key="ts")
        # Freshness first, without computing an HMAC: a late replay is refused the same way
        # whether its signature is good or not. Seconds in their docs; tolerate milliseconds
        # should they send them.
        seconds = signed.timestamp // 1000 if signed.timestamp > 10**11 else signed.timestamp
        check_freshness(seconds, now, self._tolerance)
        message = manifest(
            request.query.get("data.id"),
            request.headers.get(REQUEST_ID_HEADER),
            signed.timestamp_text,
        ).encode()
        if not hmac_matches(secrets, message, signed.signatures):
            raise UnauthenticatedError("bad_signature", "x-signature does not match")

    def envelope(self, payload: Mapping[str, Any], request: WebhookRequest) -> Envelope:
        # Their signature covers the query's data.id, not the body: a body naming another
        # resource than the signed one is not authenticated.
        data = payload.get("data")
        body_id = data.get("id") if isinstance(data, dict) else None
        signed_id = request.query.get("data.id")
        if body_id is None or signed_id is None or str(body_id).lower() != signed_id.lower():
            raise UnauthenticatedError(
                "unsigned_resource", "body data.id differs from the signed data.id"
            )
        event_type = payload.get("action") or payload.get("type")
        # An order's notification may carry no id of its own: its order's version names it.
        version = data.get("version") if isinstance(data, dict) else None
        named = payload if payload.get("id") not in (None, "") or version is None else None
        return Envelope(
            event_id=require_text(named, "id") if named else f"{body_id}:{version}",
            event_type=require_text({"type": event_type}, "type"),
            live=optional_flag(payload, "live_mode"),
        )
