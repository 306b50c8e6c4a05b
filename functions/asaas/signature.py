"""Asaas: a static token in `asaas-access-token`, compared in constant time; optionally, only
from the addresses Asaas publishes for its webhooks.

Asaas signs nothing and sends no timestamp, so freshness cannot be checked here; the token
is the whole authentication (keep it long, random and rotated), which is why process books
nothing from the body's amounts: it reads the payment from Asaas's API.

The token is compared as HMAC-SHA256 digests under a key made at start: both sides are 32
bytes whatever was presented, so `hmac.compare_digest` runs in the same time for a wrong
token of any length (comparing the raw strings returns at once on a length mismatch, which
tells the length of the secret).

The allow-list (`asaasSourceIps`, docs/deploy.md) refuses any other source with the same 401
as a bad token: a caller learns nothing about which check failed.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets as random_bytes
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from functions.shared.rejections import UnauthenticatedError
from functions.shared.webhooks import Envelope, WebhookRequest, require_text

HEADER: Final = "asaas-access-token"
# Where Asaas sends production webhooks from (its "official IP addresses" page).
PUBLISHED_SOURCE_IPS: Final = ("52.67.12.206", "18.230.8.159", "54.94.136.112", "54.94.183.101")
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class AsaasVerifier:
    def __init__(self, allowed_sources: Iterable[str] = ()) -> None:
        self._allowed: tuple[Network, ...] = tuple(
            ipaddress.ip_network(source, strict=False) for source in allowed_sources
        )
        self._key = random_bytes.token_bytes(32)

    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> None:
        if self._allowed and not self._allowed_source(request.source_ip):
            raise UnauthenticatedError(
                "source_not_allowed", f"{request.source_ip} is not one of Asaas's addresses"
            )
        token = request.headers.get(HEADER)
        if not token:
            raise UnauthenticatedError("missing_signature", "asaas-access-token header is missing")
        presented = self._digest(token)
        if not any(hmac.compare_digest(presented, self._digest(s)) for s in secrets):
            raise UnauthenticatedError("bad_signature", "asaas-access-token does not match")

    def envelope(self, payload: Mapping[str, Any], request: WebhookRequest) -> Envelope:
        return Envelope(
            event_id=require_text(payload, "id"), event_type=require_text(payload, "event")
        )

    def _digest(self, token: str) -> bytes:
        return hmac.new(self._key, token.encode(), hashlib.sha256).digest()

    def _allowed_source(self, source: str | None) -> bool:
        try:
            address = ipaddress.ip_address(source or "")
        except ValueError:
            return False  # no address, or not one: not a source on the list
        return any(address in network for network in self._allowed)
