"""The operator policies allow what on-call's commands call on this stack, and nothing they do
not use.

The evidence is the operator's own tests (tests/ops/) run with the recorder of
`tests/support/ops_calls.py`: every AWS call `umavez status`, `trace`, `show waiting`,
`show order`, `show unmatched`, `dlq list`, `dlq redrive`, `outbox revive`, `attach`,
`replay` and `preflight` made on moto's copy of a deployed stack, as (command, IAM action,
resource by name). Each is held against the command's policy in the synthesized template
(`<stack>-operator-read-<region>` or `-repair-<region>`), evaluated the way AWS evaluates it,
with the resource's name replaced by the ARN its deployed counterpart gets. The other way
round, every action a policy grants, on each resource, is used by a recording or listed in
`NOT_EXERCISED` with its reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from infra.config import StackConfig, StripeIngress
from infra.settings import (
    BOOTSTRAP_VERSION_PARAMETER,
    TEST_ALARM,
    pinned_powertools_version,
    powertools_layer_parameter,
)
from tests.infra.conftest import LEAN_PROD, Synthesized
from tests.infra.test_permissions import deployed_arns, listed
from tests.ops.conftest import LOG_GROUPS, NAMES, STACK, STRIPE_SOURCE
from tests.support import ops_calls
from tests.support.aws_policies import (
    ACCOUNT,
    PARTITION,
    REGION,
    Decision,
    Request,
    Resolver,
    evaluate,
    like,
)
from tests.support.ops_calls import OpsCall

ROOT = Path(__file__).resolve().parents[2]
LAYER_PARAMETER = powertools_layer_parameter(pinned_powertools_version())
PROD_SECRETS = (
    *(f"umavez/prod/{p}/webhook" for p in ("stripe", "mercadopago", "asaas")),
    "umavez/prod/mercadopago/access-token",
    "umavez/prod/stripe/api-key",
    "umavez/prod/asaas/api-key",
    "umavez/prod/notify/signing",
)
# The operator's tests that run the commands against moto's copy of a deployed stack.
OPS_TESTS = (
    "tests/ops/test_status_and_trace_deployed.py",
    "tests/ops/test_by_stack_name.py",
    "tests/ops/test_outbox_revive_cli.py",
    "tests/ops/test_preflight.py",
)
POLICY_OF = {
    "status": "read",
    "trace": "read",
    "show waiting": "read",
    "show order": "read",
    "show unmatched": "read",
    "dlq list": "read",
    "dlq redrive": "repair",
    "outbox revive": "repair",
    "attach": "repair",
    "replay": "repair",
    "preflight": "read",
}
# A command's call held against the other policy: the test alarm pages its subscribers.
REPAIRS = frozenset({("preflight", "cloudwatch:SetAlarmState")})
MOTO_STATE_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:Umavez-prod-Reconciliation"
# Each resource the recorded calls name, by the stack output that names its deployed one.
PLAYS = {
    f"table/{NAMES.ledger}": "LedgerTable",
    f"table/{NAMES.outbox}": "OutboxTable",
    "table/cli-outbox": "OutboxTable",  # `outbox revive`'s own tables (its test's)
    "queue/Umavez-prod-Webhooks-5E6F": "WebhookQueueUrl",
    "queue/Umavez-prod-DeadLetters-7A8B": "DeadLetterQueueUrl",
    f"state-machine/{MOTO_STATE_MACHINE}": "ReconciliationStateMachineArn",
    f"stack/{STACK}": "the stack",
    **{f"log-group/{name}": f"{logical}" for logical, name in LOG_GROUPS.items()},
}
# Resources the tests name on purpose although the stack has none such (a mistyped stack, a
# table named by hand, the sender of another deployment): those calls are AccessDenied with
# these policies, as they should be.
NOT_OF_THE_STACK = frozenset(
    {
        "stack/Umavez-prdo",
        "table/Another-Ledger",
        "identity/loja@other-shop.example",
        "identity/other-shop.example",
    }
)
# The preflight tests' alarm topic, made by moto's CloudFormation with a generated suffix.
MOTO_TOPIC = "topic/arn:aws:sns:us-east-1:123456789012:Umavez-prod-MonitoringAlarms66989066-"
TOPIC_ARN = f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:Umavez-test-Alarms"
TEST_ALARM_ARN = f"arn:{PARTITION}:cloudwatch:{REGION}:{ACCOUNT}:alarm:Umavez-test-DeadLetters"
# The account's, not the stack's: the same ARN whoever reads them.
OF_THE_ACCOUNT = {
    f"parameter{BOOTSTRAP_VERSION_PARAMETER}": (
        f"arn:{PARTITION}:ssm:{REGION}:{ACCOUNT}:parameter{BOOTSTRAP_VERSION_PARAMETER}"
    ),
    f"parameter{LAYER_PARAMETER}": f"arn:{PARTITION}:ssm:{REGION}::parameter{LAYER_PARAMETER}",
    "apigateway/account": f"arn:{PARTITION}:apigateway:{REGION}::/account",
    # The partner event source of Stripe's EventBridge destination (preflight's tests')
    f"event-source/{STRIPE_SOURCE}": (
        f"arn:{PARTITION}:events:{REGION}::event-source/{STRIPE_SOURCE}"
    ),
    # The prod stack's emailSender, as a verified identity (address and domain)
    **{
        f"identity/{i}": f"arn:{PARTITION}:ses:{REGION}:{ACCOUNT}:identity/{i}"
        for i in ("loja@example.com", "example.com")
    },
}
# Grants no recorded call uses: (policy, action, output naming the resource) -> why.
NOT_EXERCISED: dict[tuple[str, str, str], str] = {
    ("read", "logs:StartQuery", "FunctionLogGroups"): (
        "trace queries every group FunctionLogGroups names; the operator's tests' stack has"
        " three of the functions' groups"
    ),
    ("repair", "sqs:ChangeMessageVisibility", "DeadLetterQueueUrl"): (
        "`dlq redrive --message-id` shows again the letters it was not asked to move, and any"
        " whose send failed; the recorded redrive moves them all"
    ),
}
STACK_ARN = f"arn:{PARTITION}:cloudformation:{REGION}:{ACCOUNT}:stack/Umavez-test/0a1b2c3d"
STATE_MACHINE_ARN = f"arn:{PARTITION}:states:{REGION}:{ACCOUNT}:stateMachine:Reconciliation-1A2B"


@pytest.fixture(scope="module")
def prod(synth_for: Callable[[StackConfig], Synthesized]) -> Synthesized:
    """The lean prod deployment notifying an HTTP sink too: every secret preflight describes."""
    return synth_for(
        replace(
            LEAN_PROD,
            notify_url="https://hooks.example.com/umavez",
            stripe_ingress=StripeIngress.BOTH,
            stripe_event_source=STRIPE_SOURCE,
        )
    )


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[OpsCall]:
    """The operator's tests, run once with the recorder: their calls."""
    output = tmp_path_factory.mktemp("ops-calls") / "calls.json"
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    result = subprocess.run(  # noqa: S603 - our own test suite, a fixed command
        [*command, "-n", "0", "-p", "tests.support.ops_calls", *OPS_TESTS],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), ops_calls.OUTPUT_ENV: str(output)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    return ops_calls.read(output)


def resolver(synth: Synthesized) -> Resolver:
    """Every resource with the ARN one deployment gives it; the stack's and state machine's
    ARNs too (the template names them by Ref)."""
    arns = deployed_arns(synth)
    [machine] = synth.resources("AWS::StepFunctions::StateMachine")
    [topic] = synth.resources("AWS::SNS::Topic")
    [alarm] = [
        k
        for k, a in synth.resources("AWS::CloudWatch::Alarm").items()
        if a["Properties"]["AlarmName"] == f"Umavez-test-{TEST_ALARM}"
    ]
    return Resolver(
        physical={
            **arns.physical,
            machine: STATE_MACHINE_ARN,
            topic: TOPIC_ARN,
            "AWS::StackId": STACK_ARN,
        },
        attributes={**arns.attributes, (alarm, "Arn"): TEST_ALARM_ARN},
    )


def deployed_arn(synth: Synthesized, arns: Resolver, local: str) -> str:
    """The ARN of the deployed resource a recorded one plays; a table's index keeps its
    suffix."""
    if local == "*":
        return "*"
    if local in OF_THE_ACCOUNT:
        return OF_THE_ACCOUNT[local]
    if local.startswith(MOTO_TOPIC):
        return TOPIC_ARN
    if local == f"alarm/Umavez-prod-{TEST_ALARM}":
        return TEST_ALARM_ARN
    if local.startswith("secret/"):  # the same names in both (umavez/prod/...)
        [logical_id] = [
            k
            for k, s in synth.resources("AWS::SecretsManager::Secret").items()
            if s["Properties"]["Name"] == local.removeprefix("secret/")
        ]
        return str(arns.resolve({"Ref": logical_id}))
    name, suffix = local, ""
    if local.startswith("table/") and "/index/" in local:
        name, index = local.split("/index/")
        suffix = f"/index/{index}"
    played = PLAYS[name]
    if played == "the stack":
        return STACK_ARN
    outputs = synth.template.to_json()["Outputs"]
    if played in outputs:
        logical_id = outputs[played]["Value"]["Ref"]
    else:  # a function's log group, by the function's name
        [logical_id] = [k for k in synth.resources("AWS::Logs::LogGroup") if played in k]
    if played == "ReconciliationStateMachineArn":
        return str(arns.resolve({"Ref": logical_id}))
    return str(arns.resolve({"Fn::GetAtt": [logical_id, "Arn"]})) + suffix


def policy(synth: Synthesized, arns: Resolver, name: str) -> list[dict[str, Any]]:
    [found] = [
        p
        for p in synth.resources("AWS::IAM::ManagedPolicy").values()
        if arns.resolve(p["Properties"]["ManagedPolicyName"])
        == f"Umavez-test-operator-{name}-{REGION}"
    ]
    return list(arns.resolve(found["Properties"]["PolicyDocument"]["Statement"]))


def policy_of(call: OpsCall) -> str:
    return "repair" if (call.command, call.action) in REPAIRS else POLICY_OF[call.command]


def of_the_stack(calls: Iterable[OpsCall]) -> list[OpsCall]:
    return [c for c in calls if c.resource not in NOT_OF_THE_STACK]


def denied(statements: list[dict[str, Any]], calls: Iterable[OpsCall], arn_of: Any) -> list[str]:
    document = {"Statement": statements}
    return [
        f"{c.command}: {c.operation} needs {c.action} on {arn_of(c.resource)}"
        for c in calls
        if evaluate(document, Request({"AWS": "on-call"}, c.action, arn_of(c.resource)))
        is not Decision.ALLOW
    ]


def excused_arns(synth: Synthesized, arns: Resolver, output: str) -> list[str]:
    """The deployed resources an output of NOT_EXERCISED names (each of FunctionLogGroups)."""
    if output == "FunctionLogGroups":
        joined = synth.template.to_json()["Outputs"][output]["Value"]["Fn::Join"][1]
        return [str(arns.resolve({"Fn::GetAtt": [p["Ref"], "Arn"]})) for p in joined]
    local = next(k for k, v in PLAYS.items() if v == output)
    return [deployed_arn(synth, arns, local)]


def unused(
    synth: Synthesized,
    arns: Resolver,
    name: str,
    statements: list[dict[str, Any]],
    calls: Iterable[OpsCall],
) -> list[str]:
    used = [(c.action, deployed_arn(synth, arns, c.resource)) for c in calls]
    excused = [
        (action, arn)
        for (policy_name, action, output) in NOT_EXERCISED
        if policy_name == name
        for arn in excused_arns(synth, arns, output)
    ]
    found = []
    for statement in statements:
        for action in listed(statement["Action"]):
            for resource in listed(statement["Resource"]):
                if (action, resource) in excused:
                    continue
                if not any(like(action, a, fold=True) and like(resource, r) for a, r in used):
                    found.append(f"{name}: {action} on {resource}")
    return found


def test_the_operators_tests_recorded_every_command_the_policies_are_for(
    recorded: list[OpsCall],
) -> None:
    # Then each command made calls, and none is outside the two policies
    commands = {c.command for c in recorded}
    assert commands == set(POLICY_OF), commands
    # And every resource they named is one of the stack's, or a mistake made on purpose
    named = {c.resource for c in recorded if not c.resource.startswith(MOTO_TOPIC)}
    assert named <= {
        *PLAYS,
        *NOT_OF_THE_STACK,
        *OF_THE_ACCOUNT,
        "*",
        f"alarm/Umavez-prod-{TEST_ALARM}",
        *(f"{name}/index/due" for name in PLAYS if name.startswith("table/")),
        *(f"secret/{name}" for name in PROD_SECRETS),
    }, named


@pytest.mark.parametrize("name", ["read", "repair"])
def test_each_policy_allows_every_call_of_its_commands(
    prod: Synthesized, recorded: list[OpsCall], name: str
) -> None:
    # Given the policy and what its commands called
    arns = resolver(prod)
    calls = of_the_stack(c for c in recorded if policy_of(c) == name)

    # Then AWS would allow every one of those calls
    assert denied(policy(prod, arns, name), calls, lambda r: deployed_arn(prod, arns, r)) == []


@pytest.mark.parametrize("name", ["read", "repair"])
def test_each_policy_grants_only_what_its_commands_use_or_a_reason_covers(
    prod: Synthesized, recorded: list[OpsCall], name: str
) -> None:
    # Given the policy and what its commands called
    arns = resolver(prod)
    calls = of_the_stack(c for c in recorded if policy_of(c) == name)

    # Then every grant was used, or is listed with why no recorded run uses it
    assert unused(prod, arns, name, policy(prod, arns, name), calls) == []


def test_the_read_policy_lets_nothing_change(prod: Synthesized) -> None:
    # Given the read policy, Then it allows no write to a table or a queue
    writes = ("dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "sqs:SendMessage")
    arns = resolver(prod)
    document = {"Statement": policy(prod, arns, "read")}
    for action in (*writes, "sqs:DeleteMessage"):
        asked = Request({"AWS": "on-call"}, action, "*")
        assert evaluate(document, asked) is Decision.IMPLICIT_DENY, action


def test_the_outputs_name_both_policies_named_for_the_stack_and_region(prod: Synthesized) -> None:
    # Given the outputs, Then each names its policy, whose name is the stack's and the region's
    # (IAM names are the account's: a stack of the same name in another region is another)
    outputs = prod.template.to_json()["Outputs"]
    policies = prod.resources("AWS::IAM::ManagedPolicy")
    for output, name in (
        ("OperatorReadPolicyArn", f"Umavez-test-operator-read-{REGION}"),
        ("OperatorRepairPolicyArn", f"Umavez-test-operator-repair-{REGION}"),
    ):
        logical_id = outputs[output]["Value"]["Ref"]
        assert Resolver().resolve(policies[logical_id]["Properties"]["ManagedPolicyName"]) == name


def test_a_policy_missing_an_action_its_command_calls_fails_the_check(
    prod: Synthesized, recorded: list[OpsCall]
) -> None:
    # Given the repair policy without SendMessage, which a redrive, an attach and a replay need
    arns = resolver(prod)
    statements = [
        s for s in policy(prod, arns, "repair") if "sqs:SendMessage" not in listed(s["Action"])
    ]
    calls = of_the_stack(c for c in recorded if policy_of(c) == "repair")

    # When its commands' calls are held against it, Then each command's send is reported
    found = denied(statements, calls, lambda r: deployed_arn(prod, arns, r))
    queue = f"arn:{PARTITION}:sqs:{REGION}:{ACCOUNT}:Umavez-test-webhooks"
    assert sorted(found) == [
        f"{command}: {operation} needs sqs:SendMessage on {queue}"
        for command, operation in (
            ("attach", "SendMessage"),
            ("dlq redrive", "SendMessage"),
            ("replay", "SendMessageBatch"),
        )
    ]


def test_a_grant_no_command_uses_fails_the_check(
    prod: Synthesized, recorded: list[OpsCall]
) -> None:
    # Given the read policy granting Scan on the ledger too, which no command calls
    arns = resolver(prod)
    statements = policy(prod, arns, "read")
    ledger = deployed_arn(prod, arns, f"table/{NAMES.ledger}")
    statements.append({"Effect": "Allow", "Action": "dynamodb:Scan", "Resource": ledger})
    calls = of_the_stack(c for c in recorded if policy_of(c) == "read")

    # Then the extra grant is reported
    assert unused(prod, arns, "read", statements, calls) == [f"read: dynamodb:Scan on {ledger}"]
