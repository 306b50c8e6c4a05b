"""The webhook request as received: the raw body bytes, exactly, and lower-cased headers.

Two event shapes arrive here, depending on the stack's `apiType`: a REST API's proxy event
(payload format 1.0) and an HTTP API's (payload format 2.0). Both become the same request:
a header or query parameter sent more than once is its values comma-joined, in order, which is
what payload 2.0 does itself (and what HTTP allows for repeated header fields). Only the standard
library is used here: this is ingest's cold-start path.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl

from functions.shared.rejections import MalformedRequestError
from functions.shared.webhooks import WebhookRequest

HTTP_API_PAYLOAD_VERSION = "2.0"


def from_proxy_event(event: Mapping[str, Any]) -> WebhookRequest:
    """A REST (1.0) or HTTP API (2.0) proxy event; signatures are computed over `body`, never
    re-serialized."""
    if event.get("version") == HTTP_API_PAYLOAD_VERSION:
        method = _context(event).get("http", {}).get("method", "")
        headers = _joined(event.get("headers"))
        query = _query_v2(event)
    else:
        method = event.get("httpMethod", "")
        headers = _joined(event.get("multiValueHeaders")) or _joined(event.get("headers"))
        query = _joined(event.get("multiValueQueryStringParameters"), lower=False) or _joined(
            event.get("queryStringParameters"), lower=False
        )
    return WebhookRequest(
        method=str(method).upper(),
        provider=provider_of(event),
        headers=headers,
        query=query,
        body=_body(event),
        source_ip=source_ip(event),
    )


def provider_of(event: Mapping[str, Any]) -> str:
    return str((event.get("pathParameters") or {}).get("provider", ""))


def source_ip(event: Mapping[str, Any]) -> str | None:
    """The caller's address, for logs and allow-lists: `requestContext.http.sourceIp` in 2.0,
    `requestContext.identity.sourceIp` in 1.0."""
    context = _context(event)
    where = context.get("http") if event.get("version") == HTTP_API_PAYLOAD_VERSION else None
    ip = (where or context.get("identity") or {}).get("sourceIp")
    return str(ip) if ip is not None else None


def _context(event: Mapping[str, Any]) -> Mapping[str, Any]:
    context = event.get("requestContext")
    return context if isinstance(context, Mapping) else {}


def _body(event: Mapping[str, Any]) -> bytes:
    raw = event.get("body") or ""
    if not event.get("isBase64Encoded"):
        return str(raw).encode("utf-8")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MalformedRequestError("bad_encoding", "body is not valid base64") from exc


def _query_v2(event: Mapping[str, Any]) -> dict[str, str]:
    """From `rawQueryString`, as sent (percent-encoded), decoded here: `queryStringParameters`
    has already comma-joined repeated names and cannot tell `a=1&a=2` from `a=1,2`."""
    raw = event.get("rawQueryString")
    if raw is None:
        return _joined(event.get("queryStringParameters"), lower=False)
    pairs: dict[str, list[str]] = {}
    for name, value in parse_qsl(str(raw), keep_blank_values=True):
        pairs.setdefault(name, []).append(value)
    return _joined(pairs, lower=False)


def _joined(values: Mapping[str, Any] | None, lower: bool = True) -> dict[str, str]:
    """Names (lower-cased for headers) to their values comma-joined: a list per name (1.0's
    multi-value maps) or one already-joined string."""
    joined: dict[str, list[str]] = {}
    for name, value in (values or {}).items():
        key = str(name).lower() if lower else str(name)
        listed: Iterable[Any] = value if isinstance(value, list) else [value]
        joined.setdefault(key, []).extend(str(v) for v in listed if v is not None)
    return {name: ",".join(parts) for name, parts in joined.items()}
