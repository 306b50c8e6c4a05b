"""What every provider's signature check shares: the request as received, the one small
interface (verify, then read the envelope), and the pieces of the signed headers.

Only the standard library is used here: this is ingest's cold-start path.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from functions.shared.rejections import MalformedRequestError, UnauthenticatedError

HEX_SHA256: Final = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class WebhookRequest:
    method: str
    provider: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    body: bytes
    # The caller's address as API Gateway saw it (None outside API Gateway): for allow-lists.
    source_ip: str | None = None


@dataclass(frozen=True)
class Envelope:
    """The minimum ingest reads of a payload: enough to log, route and audit it."""

    event_id: str
    event_type: str
    # The provider's live/test flag (Stripe `livemode`, Mercado Pago `live_mode`); None where
    # the payload has none (Asaas: sandbox and production are separate accounts and URLs).
    live: bool | None = None


class WebhookVerifier(Protocol):
    def verify(self, request: WebhookRequest, secrets: Sequence[str], now: float) -> None:
        """Raise UnauthenticatedError unless the request is signed by one of `secrets` and fresh."""

    def envelope(self, payload: Mapping[str, Any], request: WebhookRequest) -> Envelope:
        """Raise MalformedRequestError unless the payload carries the provider's envelope."""


@dataclass(frozen=True)
class SignedHeader:
    timestamp_text: str
    timestamp: int
    signatures: list[str]


def parse_signed_header(header: str, header_name: str, timestamp_key: str) -> SignedHeader:
    """`t=...,v1=...,v1=...` (names vary by provider); every v1 is kept for secret rolls."""
    parts: dict[str, list[str]] = {}
    for item in header.split(","):
        name, separator, value = item.strip().partition("=")
        if separator:
            parts.setdefault(name, []).append(value)
    timestamps = parts.get(timestamp_key, [])
    if "v1" not in parts or len(timestamps) != 1:
        raise UnauthenticatedError("malformed_signature", f"{header_name} header is malformed")
    text = timestamps[0]
    if not text.isascii() or not text.isdigit() or len(text) > 13:
        raise UnauthenticatedError("malformed_signature", f"{header_name} timestamp is invalid")
    # compare_digest needs ASCII; anything that is not a hex SHA-256 can never match anyway.
    signatures = [v for v in parts["v1"] if HEX_SHA256.fullmatch(v)]
    return SignedHeader(text, int(text), signatures)


def hmac_matches(secrets: Sequence[str], message: bytes, signatures: Sequence[str]) -> bool:
    """Any signature made with any active secret (several are active while one is rotated)."""
    expected = [hmac.new(s.encode(), message, hashlib.sha256).hexdigest() for s in secrets]
    return any(hmac.compare_digest(mine, theirs) for mine in expected for theirs in signatures)


def check_freshness(timestamp: int, now: float, tolerance: int) -> None:
    """Reject replays both ways: too old, or claiming to come from the future."""
    if timestamp < now - tolerance:
        raise UnauthenticatedError("stale_timestamp", f"signature older than {tolerance}s")
    if timestamp > now + tolerance:
        raise UnauthenticatedError("future_timestamp", f"signature more than {tolerance}s ahead")


def optional_flag(payload: Mapping[str, Any], field: str) -> bool | None:
    value = payload.get(field)
    if value is None:
        return None
    if not isinstance(value, bool):
        raise MalformedRequestError("missing_envelope", f"payload's {field!r} is not a boolean")
    return value


def require_text(payload: Mapping[str, Any], field: str) -> str:
    value = payload.get(field)
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        raise MalformedRequestError("missing_envelope", f"payload has no usable {field!r}")
    return str(value)
