"""Tracing on and off: with tracing off no handler imports the X-Ray SDK (a third of a cold
start); with it on, the handlers are traced as before. Each case runs in a fresh interpreter,
since what matters is what gets imported."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Tracer

from functions.shared import observability
from functions.shared.observability import NoTracer, make_tracer, tracing_enabled
from infra.settings import LAMBDA_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
TRACE_HEADER = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
SWITCHES = (
    "POWERTOOLS_TRACE_DISABLED",
    "LAMBDA_TASK_ROOT",
    "AWS_SAM_LOCAL",
    "AWS_CHALICE_CLI_MODE",
)


def lambda_environment(**overrides: str) -> dict[str, str]:
    environment = {
        name: value
        for name, value in os.environ.items()
        if name not in SWITCHES and name != "_X_AMZN_TRACE_ID"
    }
    environment.update(
        {
            "WEBHOOK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/q",
            "PROVIDER_SECRETS": json.dumps({"stripe": "umavez/test/stripe"}),
            "LEDGER_TABLE": "ledger",
            "OUTBOX_TABLE": "outbox",
            **overrides,
        }
    )
    return environment


def run(code: str, environment: dict[str, str]) -> list[str]:
    result = subprocess.run(  # noqa: S603 - our own code, in this interpreter
        [sys.executable, "-c", code],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # The handlers' JSON log lines and metrics go to stdout too; the script's own lines do not
    # start with a brace.
    return [line for line in result.stdout.splitlines() if not line.startswith("{")]


@pytest.mark.parametrize(
    "environment",
    [
        {},
        {"LAMBDA_TASK_ROOT": "/var/task"},
        {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "true"},
        {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "1"},
        {"LAMBDA_TASK_ROOT": "/var/task", "POWERTOOLS_TRACE_DISABLED": "false"},
        {"LAMBDA_TASK_ROOT": "/var/task", "AWS_SAM_LOCAL": "true"},
        {"LAMBDA_TASK_ROOT": "/var/task", "AWS_CHALICE_CLI_MODE": "true"},
        {"POWERTOOLS_TRACE_DISABLED": "false"},
    ],
)
def test_tracing_is_on_exactly_when_powertools_would_trace(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str]
) -> None:
    for name in SWITCHES:
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert tracing_enabled() is not bool(Tracer._is_tracer_disabled())


def test_with_tracing_off_the_functions_get_a_tracer_that_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POWERTOOLS_TRACE_DISABLED", "true")
    tracer = make_tracer("ingest")
    assert isinstance(tracer, NoTracer)

    def handler(event: dict[str, Any], context: object) -> dict[str, Any]:
        return {"echo": event}

    assert tracer.capture_lambda_handler(handler) is handler
    assert tracer.capture_lambda_handler(capture_response=False)(handler) is handler
    assert tracer.capture_method(handler) is handler
    assert tracer.capture_method(capture_error=False)(handler) is handler
    assert observability.powertools("ingest")[1].__class__ is NoTracer


def test_with_tracing_off_no_handler_imports_the_xray_sdk() -> None:
    handlers = [spec[0].rsplit(".", 1)[0] for spec in LAMBDA_PACKAGES.values()]
    code = "\n".join(
        [
            "import sys",
            *(f"import {module}" for module in handlers),
            "from functions.ingest import handler",
            "from fixtures.lambda_events import FakeLambdaContext, api_gateway_event",
            "answer = handler.lambda_handler(",
            "    api_gateway_event('nobody', b'{}', {}), FakeLambdaContext())",
            "print('status', answer['statusCode'])",
            "print('xray', sorted({n.split('.')[0] for n in sys.modules} & {'aws_xray_sdk'}))",
        ]
    )
    for environment in (
        lambda_environment(POWERTOOLS_TRACE_DISABLED="true", LAMBDA_TASK_ROOT=str(ROOT)),
        lambda_environment(),  # outside Lambda: Powertools would not trace either
    ):
        output = run(code, environment)
        assert output == ["status 404", "xray []"]


@pytest.fixture
def xray_daemon() -> Iterator[socket.socket]:
    """A UDP socket where the X-Ray daemon listens: the SDK streams subsegments to it."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as daemon:
        daemon.bind(("127.0.0.1", 0))
        daemon.settimeout(5)
        yield daemon


def subsegments(daemon: socket.socket) -> dict[tuple[str, str], dict[str, Any]]:
    """What the SDK streamed, by (subsegment name, service annotation)."""
    received: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        while True:
            datagram = daemon.recv(65_536).decode()
            for line in datagram.splitlines()[1:]:  # after the {"format": "json"} header
                document = json.loads(line)
                service = document.get("annotations", {}).get("Service", "")
                received[document["name"], service] = document
    except TimeoutError:
        return received


def test_with_tracing_on_the_handlers_are_traced(xray_daemon: socket.socket) -> None:
    port = xray_daemon.getsockname()[1]
    environment = lambda_environment(
        LAMBDA_TASK_ROOT=str(ROOT),
        _X_AMZN_TRACE_ID=TRACE_HEADER,
        AWS_XRAY_DAEMON_ADDRESS=f"127.0.0.1:{port}",
        AWS_XRAY_CONTEXT_MISSING="RUNTIME_ERROR",
    )
    code = "\n".join(
        [
            "import sys",
            "from functions.ingest import handler as ingest",
            "from functions.process import handler as process",
            "from fixtures.lambda_events import (",
            "    FakeLambdaContext, api_gateway_event, sqs_event, sqs_record)",
            "answer = ingest.lambda_handler(",
            "    api_gateway_event('nobody', b'{}', {}), FakeLambdaContext())",
            "print('status', answer['statusCode'])",
            "# A record without its provider attribute fails before any AWS call.",
            "event = sqs_event(sqs_record('{}', {'event_id': 'evt_1'}))",
            "failures = process.lambda_handler(event, FakeLambdaContext())",
            "print('failures', len(failures['batchItemFailures']))",
            "print('tracers', type(ingest.tracer).__name__, type(process.tracer).__name__)",
            "print('xray', 'aws_xray_sdk' in sys.modules)",
        ]
    )
    output = run(code, environment)
    assert output == ["status 404", "failures 1", "tracers Tracer Tracer", "xray True"]
    traced = subsegments(xray_daemon)
    ingest = traced["## lambda_handler", "ingest"]
    assert ingest["trace_id"] == "1-5759e988-bd862e3fe1be46a994272793"
    assert ingest["annotations"]["ColdStart"] is True
    assert ingest["metadata"]["ingest"]["lambda_handler response"]["statusCode"] == 404
    assert ("## lambda_handler", "process") in traced
    record = traced["## functions.process.handler.record_handler", ""]  # capture_method
    assert record["fault"] is True  # the failed record, with its error
