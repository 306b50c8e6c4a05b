"""Ordinary mistakes get one line that says what to do and a non-zero exit, never a traceback
(unless --debug): a missing file, no stack running, no credentials, a table that does not
exist."""

from __future__ import annotations

import socket

import boto3
import pytest
from moto import mock_aws

from ops.cli import main
from ops.cli.mistakes import MISTAKE


@pytest.fixture
def nothing_listening() -> str:
    """A loopback URL on a port nothing listens on (taken, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials anywhere boto3 looks (and none cached by an earlier test's session);
    should any be found, the call goes to a closed loopback port, never to AWS."""
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # hermetic: no metadata service


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_a_file_that_does_not_exist_is_named_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # When `send` is given a path that does not exist
    code = main(["send", "no/such/event.json"])

    # Then one line names the path, and the exit says it was a mistake
    assert code == MISTAKE
    assert one_line(capsys).startswith("umavez send: no/such/event.json: no such file")


@pytest.mark.parametrize(
    "command",
    [
        ["show", "order", "ord_1"],
        ["show", "waiting"],
        ["show", "unmatched"],
        ["dlq", "list"],
        ["attach", "stripe", "pi_1", "ord_1"],
        ["outbox", "revive", "--all-dead"],
    ],
)
def test_no_stack_running_says_to_start_one(
    command: list[str], nothing_listening: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # When a command is pointed at a local stack that is not running
    code = main([*command, "--endpoint-url", nothing_listening])

    # Then one line says nothing answers there and what to do
    assert code == MISTAKE
    line = one_line(capsys)
    assert f"nothing answers at {nothing_listening}" in line
    assert "umavez serve" in line


def test_no_credentials_says_how_to_get_them(
    no_credentials: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # When a command reads the deployed stack with no AWS credentials anywhere
    code = main(["show", "waiting", "--endpoint-url", "aws", "--ledger-table", "Umavez-Ledger"])

    # Then one line says so, and how to set them
    assert code == MISTAKE
    assert "no AWS credentials found" in one_line(capsys)


def test_a_table_that_does_not_exist_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    # Given an account without the table named
    with mock_aws():
        # When a command reads it
        code = main(["show", "waiting", "--endpoint-url", "aws", "--ledger-table", "Typo-Ledger"])

    # Then one line names the failing call and says to check the name
    assert code == MISTAKE
    line = one_line(capsys)
    assert line.startswith("umavez show: Query:")
    assert "Check the table or queue name" in line


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback_instead(nothing_listening: str, where: str) -> None:
    # When the same mistake is made with --debug, before or after the command
    command = ["show", "waiting", "--endpoint-url", nothing_listening]
    words = ["--debug", *command] if where == "before" else [*command, "--debug"]

    # Then the exception itself comes out
    with pytest.raises(Exception, match="Could not connect"):
        main(words)
