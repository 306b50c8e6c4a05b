"""Records the AWS calls the operator's commands make, as IAM actions on resources: the evidence
`tests/infra/test_operator_policy.py` holds against the operator policies.

A pytest plugin (`-p tests.support.ops_calls`): every boto3 call made while `umavez ...`
(`ops.cli.main`) runs is recorded under its command (`status`, `dlq list`, `outbox revive`),
and while preflight's checks run (its tests run them without the CLI) under `preflight`, with
the IAM action it is authorized as and the resource it addresses, by name:

    table/<name>, table/<name>/index/<index>, queue/<name>, log-group/<name>, stack/<name>,
    state-machine/<its ARN>, secret/<name>, topic/<its ARN>, alarm/<name>, parameter/<name>,
    identity/<address or domain>, apigateway/account, *

Calls the tests make to set the world up are not the commands' and are not recorded. The
recordings are written to the file named by UMAVEZ_OPS_CALLS when the session ends.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import pytest
from botocore.client import BaseClient

from devstack.calls import permissions_needed

OUTPUT_ENV: Final = "UMAVEZ_OPS_CALLS"
# The words of argv that name a command (`dlq list`, `outbox revive`), the rest its arguments.
TWO_WORD_COMMANDS: Final = frozenset({"dlq", "outbox", "show"})
# Resource-less actions (IAM takes only `*`) the commands call.
ANY_RESOURCE: Final = frozenset(
    {
        "logs:GetQueryResults",
        "cloudwatch:DescribeAlarms",
        "cloudwatch:GetMetricStatistics",
        "lambda:GetAccountSettings",
        "ses:GetAccount",
    }
)


@dataclass(frozen=True, order=True)
class OpsCall:
    command: str
    service: str
    operation: str
    action: str
    resource: str


def command_of(argv: list[str]) -> str:
    words = [a for a in argv if not a.startswith("-")]
    return " ".join(words[:2]) if words and words[0] in TWO_WORD_COMMANDS else words[0]


def running_command() -> str | None:
    """The `umavez` command on the call stack, if any: ops.cli.main's argv, or preflight's
    checks, which its tests run without the CLI."""
    frame = sys._getframe(1)
    found = None
    while frame is not None:
        code = frame.f_code
        if code.co_name == "main" and code.co_filename.endswith(
            os.path.join("ops", "cli", "__init__.py")
        ):
            argv = frame.f_locals.get("argv")
            return command_of(list(argv)) if argv else None
        if code.co_name == "run" and code.co_filename.endswith(os.path.join("ops", "preflight.py")):
            found = "preflight"
        frame = frame.f_back  # type: ignore[assignment]
    return found


def needed(service: str, operation: str, params: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(IAM action, resource by name) for each permission one call needs."""
    prefix = {"stepfunctions": "states", "sesv2": "ses"}.get(service, service)
    action = f"{prefix}:{operation}"
    if action in ANY_RESOURCE:
        return [(action, "*")]
    if service == "stepfunctions":
        return [(action, f"state-machine/{params.get('stateMachineArn', '')}")]
    if service == "cloudformation":
        return [(action, f"stack/{params.get('StackName', '')}")]
    if service == "logs" and operation == "StartQuery":
        return [(action, f"log-group/{name}") for name in params.get("logGroupNames", [])]
    if service == "ssm":
        return [(action, f"parameter{params.get('Name', '')}")]
    if service == "sesv2" and operation == "GetEmailIdentity":
        return [(action, f"identity/{params.get('EmailIdentity', '')}")]
    if service == "sns":
        return [(action, f"topic/{params.get('TopicArn', '')}")]
    if service == "cloudwatch" and "AlarmName" in params:
        return [(action, f"alarm/{params['AlarmName']}")]
    if service == "apigateway" and operation == "GetAccount":
        return [("apigateway:GET", "apigateway/account")]
    if service in ("dynamodb", "sqs", "secretsmanager", "sesv2", "events"):
        return permissions_needed(service, operation, params, {})
    return [(action, f"unknown/{service}")]


class Recorder:
    def __init__(self) -> None:
        self.calls: set[OpsCall] = set()

    @staticmethod
    def _service(client: BaseClient) -> str:
        return str(client.meta.service_model.service_name)

    def record(self, client: BaseClient, operation: str, params: Mapping[str, Any]) -> None:
        command = running_command()
        if command is None:
            return
        service = self._service(client)
        for action, resource in needed(service, operation, params):
            self.calls.add(OpsCall(command, service, operation, action, resource))


RECORDER = Recorder()


@pytest.fixture(autouse=True)
def _record_ops_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    original = BaseClient._make_api_call  # type: ignore[attr-defined]

    def recorded(self: BaseClient, operation_name: str, api_params: Any) -> Any:
        RECORDER.record(self, operation_name, api_params)
        return original(self, operation_name, api_params)

    monkeypatch.setattr(BaseClient, "_make_api_call", recorded)


def pytest_sessionfinish(session: pytest.Session) -> None:
    output = os.environ.get(OUTPUT_ENV)
    if output:
        Path(output).write_text(json.dumps([asdict(c) for c in sorted(RECORDER.calls)], indent=1))


def read(path: Path) -> list[OpsCall]:
    return [OpsCall(**call) for call in json.loads(path.read_text())]
