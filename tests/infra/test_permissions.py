"""Each function's role allows what its code calls, and grants nothing its calls do not use.

The evidence is a fire drill's recordings (`devstack/calls.py`): every AWS call each function
made on the embedded stack, its pollers' calls under the function whose event source mapping
they play, as (function, IAM action, local resource). Each is held against the function's
role in the synthesized template, evaluated the way AWS evaluates it
(`tests/support/aws_policies.py`) with the local resource replaced by the ARN its deployed
counterpart gets (`LocalResources.deployed_as`). The other way round, every action a role
grants, on each resource it grants it on, is either exercised by a recording or on
`NOT_EXERCISED_LOCALLY` with its reason.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import pytest

from devstack.calls import AwsCall
from devstack.resources import EMAIL_SENDER
from firedrill.run import RecordedCalls
from functions.shared.tables import TableNames
from infra.settings import LAMBDA_PACKAGES
from tests.conftest import DrillRun
from tests.infra.conftest import Synthesized
from tests.infra.test_stack import role_statements
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

FUNCTIONS = tuple(LAMBDA_PACKAGES)
EMAIL_DOMAIN = EMAIL_SENDER.split("@", 1)[1]
EVERY_FUNCTION = "*"
ANY_RESOURCE = "any"
# Grants no local run exercises, each with its reason: (function or *, action, the local
# resource it is granted on or any) -> why.
NOT_EXERCISED_LOCALLY: dict[tuple[str, str, str], str] = {
    # Made by the Lambda runtime, not the code: locally, logs go to a file.
    (EVERY_FUNCTION, "logs:CreateLogStream", ANY_RESOURCE): "the Lambda runtime writes logs",
    (EVERY_FUNCTION, "logs:PutLogEvents", ANY_RESOURCE): "the Lambda runtime writes logs",
    # Tracing is off locally (POWERTOOLS_TRACE_DISABLED): no X-Ray daemon to send to.
    (EVERY_FUNCTION, "xray:PutTraceSegments", ANY_RESOURCE): "Lambda's tracing sends them",
    (EVERY_FUNCTION, "xray:PutTelemetryRecords", ANY_RESOURCE): "Lambda's tracing sends them",
    # SES authorizes a send as the address when it is verified, else as its domain: locally
    # the address is, so only deployments that verified the domain send as it.
    ("outbox", "ses:SendEmail", f"identity/{EMAIL_DOMAIN}"): "a domain-verified sender",
    ("sweeper", "ses:SendEmail", f"identity/{EMAIL_DOMAIN}"): "a domain-verified sender",
    # Made by Lambda's event source mappings, which the local pollers play without them.
    ("outbox", "dynamodb:ListStreams", ANY_RESOURCE): (
        "Lambda's stream mapping lists the table's streams; the poller is handed the stream"
    ),
    ("process", "sqs:ChangeMessageVisibility", ANY_RESOURCE): (
        "the poller extends a batch's visibility only when it outlasts half the local 3 s"
        " visibility timeout, which a drill may never see"
    ),
    # CDK's event sources grant these with the actions the mappings use; the mappings name
    # their queues by ARN, and no code calls them.
    ("process", "sqs:GetQueueUrl", ANY_RESOURCE): "CDK's SqsEventSource grants it too",
    ("outbox", "sqs:GetQueueUrl", ANY_RESOURCE): "CDK's on-failure destination grants it too",
    ("outbox", "sqs:GetQueueAttributes", ANY_RESOURCE): (
        "CDK's on-failure destination grants it too"
    ),
    # Paths of the code a drill does not reach: each is slower than a drill, or needs books
    # that do not balance.
    ("process", "dynamodb:DeleteItem", ANY_RESOURCE): (
        "a re-check that finds its pending refund settled ends the watch: re-checks come"
        " minutes after a refund is first seen pending"
    ),
    ("process", "dynamodb:Query", ANY_RESOURCE): (
        "an Asaas cash receipt or its undo reads the payment's cash entries: no drill story"
        " receives in cash"
    ),
    ("waiting", "dynamodb:UpdateItem", ANY_RESOURCE): (
        "a due re-check's next time is written: minutes after a refund is first seen pending"
    ),
    ("process", "dynamodb:GetItem", ANY_RESOURCE): (
        "a payment captured again (multicapture) reads its capture mark: the drill's payments"
        " are captured once"
    ),
    ("outbox", "dynamodb:GetItem", ANY_RESOURCE): (
        "a first try sent without a recipient reads its order again: only when it found an"
        " e-mailable item with no address, which the drill's payments all name"
    ),
    ("statement", "dynamodb:ConditionCheckItem", ANY_RESOURCE): (
        "a reversal's transaction checks the entry it reverses: the drill's lost movements are"
        " payments and refunds, never a reversal"
    ),
    ("reconciliation", "dynamodb:BatchGetItem", f"table/{TableNames().ledger}"): (
        "an outbox item without its counted entry is confirmed by reading the ledger: only when"
        " the books do not balance, and a drill's always do"
    ),
}


def deployed_arns(synth: Synthesized) -> Resolver:
    """The template's intrinsics resolved as one deployment would: every table, queue, bus,
    secret and log group gets the ARN (and queue URL) AWS would give it."""
    arn = f"arn:{PARTITION}:{{service}}:{REGION}:{ACCOUNT}:{{resource}}"
    physical: dict[str, str] = {}
    attributes: dict[tuple[str, str], str] = {}
    for logical_id, resource in synth.template.to_json()["Resources"].items():
        props = resource.get("Properties", {})
        generated = f"{synth.stack.stack_name}-{logical_id}-1A2B3C4D"
        physical[logical_id] = generated
        kind = resource["Type"]
        if kind == "AWS::DynamoDB::GlobalTable":
            table = arn.format(service="dynamodb", resource=f"table/{generated}")
            attributes[(logical_id, "Arn")] = table
            attributes[(logical_id, "StreamArn")] = f"{table}/stream/2026-01-01T00:00:00.000"
        elif kind == "AWS::SQS::Queue":
            name = props.get("QueueName", generated)
            attributes[(logical_id, "Arn")] = arn.format(service="sqs", resource=name)
            physical[logical_id] = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{name}"
        elif kind == "AWS::Events::EventBus":
            name = props.get("Name", generated)
            attributes[(logical_id, "Arn")] = arn.format(
                service="events", resource=f"event-bus/{name}"
            )
        elif kind == "AWS::SecretsManager::Secret":
            name = props.get("Name", generated)
            physical[logical_id] = arn.format(
                service="secretsmanager", resource=f"secret:{name}-AbCdEf"
            )
        elif kind == "AWS::Logs::LogGroup":
            name = props.get("LogGroupName", generated)
            attributes[(logical_id, "Arn")] = arn.format(
                service="logs", resource=f"log-group:{name}:*"
            )
    return Resolver(
        stack_name=synth.stack.stack_name,
        physical=physical,
        attributes=attributes,
    )


KINDS = {
    "table": "AWS::DynamoDB::GlobalTable",
    "queue": "AWS::SQS::Queue",
    "event-bus": "AWS::Events::EventBus",
    "secret": "AWS::SecretsManager::Secret",
}


def deployed_arn(
    synth: Synthesized, resolver: Resolver, deployed_as: Mapping[str, str], local: str
) -> str:
    """The ARN of the deployed resource a local one plays: `table/<name>/index/<index>` the
    deployed table's ARN with the same suffix, `table/<name>/stream` its stream's."""
    if local == "*":
        return "*"
    kind, _, rest = local.partition("/")
    if kind in ("identity", "configuration-set"):  # the same names in both (emailSender)
        return f"arn:{PARTITION}:ses:{REGION}:{ACCOUNT}:{local}"
    name, suffix = rest, ""
    if kind == "table" and "/" in rest:
        name, _, tail = rest.partition("/")
        suffix = "" if tail == "stream" else f"/{tail}"
    construct = deployed_as.get(f"{kind}/{name}")
    if construct is None or kind not in KINDS:
        raise LookupError(f"{local} plays no resource of the deployed stack")
    prefix = "Pipeline" + construct.replace("/", "")
    [logical_id] = [k for k in synth.resources(KINDS[kind]) if k.startswith(prefix)]
    if kind == "secret":
        return str(resolver.resolve({"Ref": logical_id}))
    attribute = "StreamArn" if kind == "table" and rest.endswith("/stream") else "Arn"
    return str(resolver.resolve({"Fn::GetAtt": [logical_id, attribute]})) + suffix


@pytest.fixture(scope="module")
def recorded(every_kind_drill: DrillRun) -> RecordedCalls:
    assert every_kind_drill.exit_code == 0, every_kind_drill.report
    return RecordedCalls.read(every_kind_drill.recorded_calls)


def roles(synth: Synthesized, resolver: Resolver) -> dict[str, list[dict[str, Any]]]:
    """Each function's role statements, resolved for one deployment."""
    return {name: resolver.resolve(role_statements(synth, name.capitalize())) for name in FUNCTIONS}


def denied(
    statements: list[dict[str, Any]], calls: Iterable[AwsCall], arn_of: Callable[[str], str]
) -> list[str]:
    """The calls the statements do not allow, as AWS would decide."""
    policy = {"Statement": statements}
    return [
        f"{call.function}: {call.operation} needs {call.action} on {arn_of(call.resource)}"
        for call in calls
        if evaluate(policy, Request({"AWS": "role"}, call.action, arn_of(call.resource)))
        is not Decision.ALLOW
    ]


def unjustified(
    function: str,
    statements: list[dict[str, Any]],
    calls: Iterable[AwsCall],
    arn_of: Callable[[str], str],
) -> list[str]:
    """Each (action, resource) the statements grant that no call used and no reason covers."""
    used = [(call.action, arn_of(call.resource)) for call in calls]
    excused = [
        (action, None if local == ANY_RESOURCE else arn_of(local))
        for (named, action, local) in NOT_EXERCISED_LOCALLY
        if named in (function, EVERY_FUNCTION)
    ]
    found = []
    for statement in statements:
        for action in listed(statement["Action"]):
            for resource in listed(statement["Resource"]):
                if any(a == action and r in (None, resource) for a, r in excused):
                    continue
                if not any(like(action, a, fold=True) and like(resource, r) for a, r in used):
                    found.append(f"{function}: {action} on {resource}")
    return found


def listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.fixture(scope="module")
def resolver(prod: Synthesized) -> Resolver:
    return deployed_arns(prod)


def arn_lookup(
    prod: Synthesized, resolver: Resolver, recorded: RecordedCalls
) -> Callable[[str], str]:
    return lambda local: deployed_arn(prod, resolver, recorded.deployed_as, local)


def test_the_drill_recorded_calls_of_every_function_and_of_the_mappings_pollers(
    recorded: RecordedCalls,
) -> None:
    # Given a drill's recordings
    by_function = {f: {c.action for c in recorded.calls if c.function == f} for f in FUNCTIONS}

    # Then every function made calls, the pollers' under the function whose mapping they
    # play (receiving for process, reading the stream and giving batches up for outbox)
    assert all(by_function.values()), by_function
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} <= (
        by_function["process"]
    )
    assert {"dynamodb:GetRecords", "dynamodb:GetShardIterator", "sqs:SendMessage"} <= (
        by_function["outbox"]
    )
    # and a transaction is recorded as the actions of its items, table by table
    transaction = {
        (c.action, c.resource)
        for c in recorded.calls
        if c.operation == "TransactWriteItems" and c.function == "process"
    }
    assert ("dynamodb:PutItem", "table/umavez-outbox") in transaction
    assert ("dynamodb:ConditionCheckItem", "table/umavez-ledger") in transaction


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_role_allows_every_call_its_function_made(
    prod: Synthesized, resolver: Resolver, recorded: RecordedCalls, function: str
) -> None:
    # Given the function's role and what it called during the drill
    statements = roles(prod, resolver)[function]
    calls = [c for c in recorded.calls if c.function == function]

    # Then AWS would allow every one of those calls
    assert denied(statements, calls, arn_lookup(prod, resolver, recorded)) == []


@pytest.mark.parametrize("function", FUNCTIONS)
def test_each_role_grants_only_what_its_calls_use_or_a_reason_covers(
    prod: Synthesized, resolver: Resolver, recorded: RecordedCalls, function: str
) -> None:
    # Given the function's role and what it called during the drill
    statements = roles(prod, resolver)[function]
    calls = [c for c in recorded.calls if c.function == function]

    # Then every action it grants, on every resource, was used or is not exercised locally
    # for a stated reason
    assert unjustified(function, statements, calls, arn_lookup(prod, resolver, recorded)) == []


def test_a_role_missing_an_action_the_code_calls_fails_the_check(
    prod: Synthesized, resolver: Resolver, recorded: RecordedCalls
) -> None:
    # Given process's role without ConditionCheckItem, which a reversal's transaction needs
    statements = copy.deepcopy(roles(prod, resolver)["process"])
    for statement in statements:
        if (
            isinstance(statement["Action"], list)
            and "dynamodb:ConditionCheckItem" in statement["Action"]
        ):
            statement["Action"].remove("dynamodb:ConditionCheckItem")
    calls = [c for c in recorded.calls if c.function == "process"]

    # When its calls are held against it
    found = denied(statements, calls, arn_lookup(prod, resolver, recorded))

    # Then the transaction's condition check is reported, on the deployed ledger's ARN
    assert len(found) == 1, found
    assert "TransactWriteItems needs dynamodb:ConditionCheckItem on arn:aws:dynamodb:" in found[0]


def test_a_grant_no_call_uses_and_no_reason_covers_fails_the_check(
    prod: Synthesized, resolver: Resolver, recorded: RecordedCalls
) -> None:
    # Given reconciliation's role granting Scan on the ledger too, which nothing calls
    statements = copy.deepcopy(roles(prod, resolver)["reconciliation"])
    ledger = next(s["Resource"] for s in statements if "dynamodb:GetItem" in s["Action"])
    statements.append({"Effect": "Allow", "Action": "dynamodb:Scan", "Resource": ledger})
    calls = [c for c in recorded.calls if c.function == "reconciliation"]

    # When its grants are held against its calls
    found = unjustified("reconciliation", statements, calls, arn_lookup(prod, resolver, recorded))

    # Then the extra grant is reported
    assert found == [f"reconciliation: dynamodb:Scan on {ledger}"]


def test_every_local_resource_a_function_named_plays_a_deployed_one(
    prod: Synthesized, resolver: Resolver, recorded: RecordedCalls
) -> None:
    # Then no recorded call addresses a resource the deployed stack does not have
    arns = {
        call.resource: deployed_arn(prod, resolver, recorded.deployed_as, call.resource)
        for call in recorded.calls
    }
    assert all(arn == "*" or arn.startswith(f"arn:{PARTITION}:") for arn in arns.values()), (
        json.dumps(arns, indent=1)
    )


def test_every_reason_names_a_grant_a_role_still_has(prod: Synthesized, resolver: Resolver) -> None:
    # Given every grant of every role
    granted = {
        (function, action)
        for function, statements in roles(prod, resolver).items()
        for statement in statements
        for action in listed(statement["Action"])
    }

    # Then the reasons list no grant that is gone: a stale reason would excuse a future one
    for function, action, _ in NOT_EXERCISED_LOCALLY:
        if function == EVERY_FUNCTION:
            assert all((f, action) in granted for f in FUNCTIONS), action
        else:
            assert (function, action) in granted, (function, action)
