"""One synth per configuration for the whole session (the first costs seconds, NOTES.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from aws_cdk.assertions import Template
from cdk_nag import AwsSolutionsChecks

from infra.config import ApiType, StackConfig, cidrs
from infra.stack import UmavezStack


@dataclass
class Synthesized:
    stack: UmavezStack
    template: Template
    outdir: Path

    def resources(self, kind: str) -> dict[str, Any]:
        return dict(self.template.find_resources(kind))


def synthesize(outdir: Path, config: StackConfig) -> Synthesized:
    """Synthesizes with cdk-nag's AwsSolutions plugin: any unacknowledged finding raises."""
    app = cdk.App(outdir=str(outdir))
    stack = UmavezStack(app, "Umavez-test", config=config)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    app.synth()
    return Synthesized(stack, Template.from_stack(stack), outdir)


@pytest.fixture(scope="session")
def synth_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[[StackConfig], Synthesized]:
    cache: dict[StackConfig, Synthesized] = {}

    def get(config: StackConfig) -> Synthesized:
        if config not in cache:
            cache[config] = synthesize(tmp_path_factory.mktemp("cdk"), config)
        return cache[config]

    return get


# Two addresses of each IP version, as an operator would pass them (a bare address, a CIDR).
PROVIDER_IPS = ("3.18.12.63", "54.187.174.0/24", "2600:1f18::1", "2600:1f14::/56")


# The lean deployment: an HTTP API (apiType's default once prod opts out of WAF).
LEAN_PROD = StackConfig(
    stage="prod",
    alarm_email="oncall@example.com",
    email_sender="loja@example.com",
    allow_unprotected_prod=True,
)


@pytest.fixture(scope="session")
def prod(synth_for: Callable[[StackConfig], Synthesized]) -> Synthesized:
    """The lean deployment: an HTTP API (apiType's default once prod opts out of WAF)."""
    return synth_for(LEAN_PROD)


@pytest.fixture(scope="session")
def prod_by_default(synth_for: Callable[[StackConfig], Synthesized]) -> Synthesized:
    """Prod as `cdk deploy -c stage=prod` makes it, with a sender that has a display name."""
    context = {
        "stage": "prod",
        "alarmEmail": "oncall@example.com",
        "emailSender": "Loja <loja@example.com>",
    }
    return synth_for(StackConfig.from_context(context.get))


@pytest.fixture(scope="session")
def dev_with_waf(synth_for: Callable[[StackConfig], Synthesized]) -> Synthesized:
    """A REST API behind WAF (WAF attaches to REST APIs only)."""
    return synth_for(
        StackConfig(
            stage="dev",
            api_type=ApiType.REST,
            waf=True,
            provider_ip_allow_list=cidrs(",".join(PROVIDER_IPS)),
            retention_days=30,
            outbox_give_up_hours=6,
        )
    )


@pytest.fixture(scope="session", params=[ApiType.HTTP, ApiType.REST], ids=["http", "rest"])
def each_api_type(
    request: pytest.FixtureRequest, prod: Synthesized, dev_with_waf: Synthesized
) -> tuple[ApiType, Synthesized]:
    """What must hold whichever API fronts ingest: prod is HTTP, dev_with_waf is REST."""
    api_type: ApiType = request.param
    return api_type, prod if api_type is ApiType.HTTP else dev_with_waf


def scheduled_targets(synth: Synthesized) -> list[tuple[str, str]]:
    """Each schedule's function by its logical id, with the rule's expression (a function on
    several rules, the statement's hourly and daily, once per rule). A rule that starts the
    reconciliation's state machine runs the function its tasks invoke."""
    machines = synth.resources("AWS::StepFunctions::StateMachine")
    targets: list[tuple[str, str]] = []
    for rule in synth.resources("AWS::Events::Rule").values():
        arn = rule["Properties"]["Targets"][0]["Arn"]
        if "Ref" in arn:
            definition = machines[arn["Ref"]]["Properties"]["DefinitionString"]["Fn::Join"][1]
            [function_id] = {part["Fn::GetAtt"][0] for part in definition if "Fn::GetAtt" in part}
        else:
            function_id = arn["Fn::GetAtt"][0]
        targets.append((function_id, rule["Properties"]["ScheduleExpression"]))
    return targets
