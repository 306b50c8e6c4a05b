"""The webhook request as received: the raw body bytes, exactly, and lower-cased headers."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from functions.ingest.errors import MalformedRequestError


@dataclass(frozen=True)
class WebhookRequest:
    method: str
    provider: str
    headers: Mapping[str, str]
    query: Mapping[str, str]
    body: bytes


def from_proxy_event(event: Mapping[str, Any]) -> WebhookRequest:
    """An API Gateway REST proxy event; signatures are computed over `body`, never re-serialized."""
    raw = event.get("body") or ""
    if event.get("isBase64Encoded"):
        try:
            body = base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise MalformedRequestError("bad_encoding", "body is not valid base64") from exc
    else:
        body = raw.encode("utf-8")
    return WebhookRequest(
        method=str(event.get("httpMethod", "")).upper(),
        provider=str((event.get("pathParameters") or {}).get("provider", "")),
        headers={str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()},
        query={str(k): str(v) for k, v in (event.get("queryStringParameters") or {}).items()},
        body=body,
    )
