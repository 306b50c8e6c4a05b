"""Reading a provider's REST API with a bearer token: one place for its errors.

A provider that does not answer usefully now is retried (the record goes back to SQS, never
dropped); one that refuses our credentials is a configuration problem (DLQ, alarmed).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from functions.shared.errors import RetryableError, UmavezError


class ProviderApiUnavailableError(RetryableError):
    """Their API did not answer usefully now; the record is retried later. `status` is the
    HTTP status it answered (None: no answer at all)."""

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status


class ProviderApiRefusedError(UmavezError):
    """Their API refused our credentials: a configuration problem, sent to the DLQ."""


def get_json(
    url: str,
    token: str,
    timeout_seconds: float,
    what: str,
    headers: Mapping[str, str] | None = None,
) -> Mapping[str, Any]:
    request = urllib.request.Request(  # noqa: S310 - https base URL from configuration
        url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_seconds) as response:  # noqa: S310
            body: Mapping[str, Any] = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ProviderApiRefusedError(f"{what} refused us: {exc.code}") from exc
        # 404 included: a notification can precede the object's visibility. Never drop it.
        raise ProviderApiUnavailableError(f"{what} answered {exc.code}", exc.code) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        # URLError, a timeout, a connection reset or closed mid-answer: no answer now.
        raise ProviderApiUnavailableError(f"{what} unreachable: {exc}") from exc
    if not isinstance(body, Mapping):
        raise ProviderApiUnavailableError(f"{what} answered JSON that is no object")
    return body
