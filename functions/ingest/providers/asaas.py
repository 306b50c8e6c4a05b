"""Asaas: a static token in `asaas-access-token`, compared in constant time.

Asaas signs nothing and sends no timestamp, so freshness cannot be checked here; the token
is the whole authentication (keep it long, random and rotated).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from typing import Any, Final

from functions.ingest.errors import UnauthenticatedError
from functions.ingest.providers import Envelope, require_text
from functions.ingest.request import WebhookRequest

HEADER: Final = "asaas-access-token"


class AsaasVerifier:
    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> None:
        token = request.headers.get(HEADER)
        if not token:
            raise UnauthenticatedError("missing_signature", "asaas-access-token header is missing")
        presented = token.encode()
        if not any(hmac.compare_digest(presented, secret.encode()) for secret in secrets):
            raise UnauthenticatedError("bad_signature", "asaas-access-token does not match")

    def envelope(self, payload: Mapping[str, Any], request: WebhookRequest) -> Envelope:
        return Envelope(
            event_id=require_text(payload, "id"), event_type=require_text(payload, "event")
        )
