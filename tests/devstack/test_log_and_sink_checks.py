"""The drill's checks on what the logs and the HTTP receiver saw, on what they are given."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from devstack.sink import HttpSink
from firedrill.checks import every_http_notification_verified, no_address_in_the_logs


def test_a_log_line_with_an_address_fails_the_check_without_repeating_it(tmp_path: Path) -> None:
    # Given a log whose second line names a customer (as an unredacted SES refusal would)
    log = tmp_path / "lambda-logs.jsonl"
    lines = [
        {"message": "outbox item handled", "outbox_id": "obx_1"},
        {"message": "send failed; backed off", "error": "failed the check: ana@example.com"},
        {"message": "send failed; backed off", "error": "failed the check: [email]"},
    ]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))

    # When the drill checks it
    check = no_address_in_the_logs(log)

    # Then it fails naming the line, not the address
    assert not check.ok
    assert "lines [2]" in check.detail
    assert "ana@" not in check.detail


def test_a_log_without_addresses_passes(tmp_path: Path) -> None:
    log = tmp_path / "lambda-logs.jsonl"
    log.write_text(json.dumps({"message": "error", "error": "SES: MessageRejected: [email]"}))

    assert no_address_in_the_logs(log).ok


def test_the_receiver_counts_what_it_could_not_verify() -> None:
    # Given a receiver that verified some notifications and not one
    recorded: list[tuple[str, str]] = []
    recorder: Any = SimpleNamespace(count=lambda key, channel: recorded.append((key, channel)))
    sink = HttpSink(recorder)
    try:
        sink.counted("obx_1")
        sink.counted(None)
        stack = cast(Any, SimpleNamespace(http_sink=sink))

        # Then the check fails, and the verified one was counted for its key
        check = every_http_notification_verified(stack)
    finally:
        sink.stop()
    assert (check.ok, check.detail) == (False, "1 verified, 1 unverified")
    assert recorded == [("obx_1", "http")]
