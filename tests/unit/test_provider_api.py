"""A provider's API that answers nothing usable now is retried, whatever broke: the record goes
back to SQS (or the replay stops with its resume), never out as an unexpected crash."""

from __future__ import annotations

import http.client
import io
import urllib.request
from typing import Any

import pytest

from functions.shared.provider_api import ProviderApiUnavailableError, get_json


@pytest.mark.parametrize(
    "broken",
    [
        http.client.RemoteDisconnected("Remote end closed connection without response"),
        http.client.IncompleteRead(b"{"),
        ConnectionResetError(104, "Connection reset by peer"),
        TimeoutError("timed out"),
    ],
)
def test_a_connection_broken_mid_answer_is_unavailable_not_a_crash(
    broken: Exception, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an API whose connection breaks as it answers
    def urlopen(*_: Any, **__: Any) -> Any:
        raise broken

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)

    # When it is read, Then the error says it is unavailable now (retried), with no status
    with pytest.raises(ProviderApiUnavailableError) as unavailable:
        get_json("https://api.example.com/v1/orders/ORD1", "token", 1.0, "the orders API")
    assert unavailable.value.status is None


def test_an_answer_that_is_json_but_no_object_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an API answering a JSON list where an object belongs
    monkeypatch.setattr(urllib.request, "urlopen", lambda *_, **__: io.BytesIO(b"[1, 2]"))

    # When it is read, Then it is refused as no answer, never handed on as one
    with pytest.raises(ProviderApiUnavailableError, match="no object"):
        get_json("https://api.example.com/v1/orders", "token", 1.0, "the orders search")
