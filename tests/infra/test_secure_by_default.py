"""Secure by default, and a first deploy that works in an account that already holds other
stacks: what the synthesized template leaves to the account, whom its roles trust, and what
prod is protected by when nobody chose."""

from __future__ import annotations

from typing import Any

import pytest

from infra.config import ApiType
from infra.constructs.reconciliation import schedule_rule_name
from tests.infra.conftest import Synthesized
from tests.infra.test_api import access_log_of
from tests.infra.test_first_deploy import role_statements
from tests.support.aws_policies import (
    ACCOUNT,
    PARTITION,
    REGION,
    Decision,
    Request,
    Resolver,
    evaluate,
)

CREATION_UUID = {"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}
OTHER_ACCOUNT = "444455556666"
# Service principals a role may trust without aws:SourceArn / aws:SourceAccount, each with why.
TRUSTED_WITHOUT_CONDITION = {
    "lambda.amazonaws.com": (
        "an execution role is assumed for the functions it was passed to (iam:PassRole, which"
        " never crosses accounts), and Lambda's own calls are scoped by lambda:SourceFunctionArn"
    ),
}


@pytest.fixture(
    scope="module", params=["prod-http", "rest-waf", "prod-by-default"], ids=lambda p: p
)
def each_variant(
    request: pytest.FixtureRequest,
    prod: Synthesized,
    dev_with_waf: Synthesized,
    prod_by_default: Synthesized,
) -> Synthesized:
    """Every way the stack is synthesized in these tests: HTTP, REST with WAF, prod's default."""
    return {"prod-http": prod, "rest-waf": dev_with_waf, "prod-by-default": prod_by_default}[
        request.param
    ]


def test_the_api_access_logs_are_a_vended_group_named_once_per_stack_creation(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    # Given either API type's stage, When the log group its access logs go to is read
    api_type, synth = each_api_type
    group_id = access_log_of(api_type, synth)["DestinationArn"]["Fn::GetAtt"][0]
    name = synth.resources("AWS::Logs::LogGroup")[group_id]["Properties"]["LogGroupName"]

    # Then it lives under /aws/vendedlogs/ (API Gateway then leaves the account's 5,120-
    # character CloudWatch Logs resource policy alone: a few APIs of the account would fill it
    # and this stage's create would fail), named for its stack and the stack id's UUID, so a
    # group kept after a failed create never blocks the next one
    [_, parts] = name["Fn::Join"]
    assert parts == ["/aws/vendedlogs/apigateway/Umavez-test-webhooks-access-", CREATION_UUID]


def test_no_variant_repoints_the_regions_api_gateway_logging_role(
    each_variant: Synthesized,
) -> None:
    # Given every synthesized variant
    synth = each_variant

    # Then none sets the region's API Gateway account (its CloudWatch role is shared by every
    # REST API of the region: the last stack deployed would win), nor makes a role for it
    assert synth.resources("AWS::ApiGateway::Account") == {}
    trusted = [
        statement["Principal"]
        for role in synth.resources("AWS::IAM::Role").values()
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    ]
    assert {"Service": "apigateway.amazonaws.com"} not in trusted
    # And a REST stage still access-logs and execution-logs its errors
    for stage in synth.resources("AWS::ApiGateway::Stage").values():
        props = stage["Properties"]
        assert "DestinationArn" in props["AccessLogSetting"]
        assert props["MethodSettings"][0]["LoggingLevel"] == "ERROR"


def schedule_rule(synth: Synthesized) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The reconciliation's schedule rule, and the role (logical id, resource) its target
    starts executions with."""
    [rule] = [r for r in synth.resources("AWS::Events::Rule").values() if "StateMachine" in str(r)]
    [target] = rule["Properties"]["Targets"]
    role_id = target["RoleArn"]["Fn::GetAtt"][0]
    return rule, role_id, synth.resources("AWS::IAM::Role")[role_id]


def eventbridge_assuming(rule_arn: str, account: str = ACCOUNT) -> Request:
    """EventBridge assuming a target's role for one rule, as STS sees the call."""
    return Request(
        principal={"Service": "events.amazonaws.com"},
        action="sts:AssumeRole",
        resource=f"arn:{PARTITION}:iam::{ACCOUNT}:role/schedule",
        context={"aws:SourceArn": rule_arn, "aws:SourceAccount": account},
    )


def test_the_schedules_role_trusts_eventbridge_for_this_stacks_rule_alone(
    prod: Synthesized,
) -> None:
    # Given the rule that starts the books check and the role it starts it with
    rule, role_id, role = schedule_rule(prod)
    trust = Resolver().resolve(role["Properties"]["AssumeRolePolicyDocument"])
    name = rule["Properties"]["Name"]
    rule_arn = f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:rule/{name}"
    assert name == "Umavez-test-reconcile"

    # When EventBridge assumes it for this rule, Then STS lets it
    assert evaluate(trust, eventbridge_assuming(rule_arn)) == Decision.ALLOW
    # And not for another rule of the account, nor for a rule of another account's (the
    # confused deputy: anyone's rule could otherwise start this stack's executions)
    other_rule = f"arn:{PARTITION}:events:{REGION}:{ACCOUNT}:rule/theirs"
    elsewhere = f"arn:{PARTITION}:events:{REGION}:{OTHER_ACCOUNT}:rule/{name}"
    assert evaluate(trust, eventbridge_assuming(other_rule)) == Decision.IMPLICIT_DENY
    assert evaluate(trust, eventbridge_assuming(elsewhere, OTHER_ACCOUNT)) == (
        Decision.IMPLICIT_DENY
    )
    # And the role may start this state machine's executions, nothing else
    statements = [
        s
        for policy in prod.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    ]
    assert [s["Action"] for s in statements] == ["states:StartExecution"]


def test_schedule_rules_of_long_stack_names_fit_and_never_collide() -> None:
    long_a, long_b = "Umavez-" + "a" * 60, "Umavez-" + "a" * 59 + "b"

    assert schedule_rule_name("Umavez-prod") == "Umavez-prod-reconcile"
    assert len(schedule_rule_name(long_a)) == 64
    assert schedule_rule_name(long_a) != schedule_rule_name(long_b)


def test_every_role_a_service_assumes_is_guarded_against_the_confused_deputy(
    each_variant: Synthesized,
) -> None:
    # Given every trust statement of every role of the variant
    unguarded = []
    for logical_id, role in each_variant.resources("AWS::IAM::Role").items():
        for statement in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
            service = statement["Principal"].get("Service")
            if service is None or service in TRUSTED_WITHOUT_CONDITION:
                continue
            keys = {key for keys in statement.get("Condition", {}).values() for key in keys}
            # Then a service may assume it on behalf of this account's own resource only
            if not {"aws:SourceArn", "aws:SourceAccount"} <= keys:
                unguarded.append(f"{logical_id}: {service}")

    assert unguarded == []


def test_prod_by_default_is_a_rest_api_behind_the_per_ip_rate_limit(
    prod_by_default: Synthesized,
) -> None:
    # Given prod as `-c stage=prod` synthesizes it, no API type or WAF chosen
    synth = prod_by_default

    # Then ingest is fronted by a REST API, its stage associated with a web ACL whose first
    # rule blocks an address above its rate (one sender cannot take the stage's throttle)
    assert synth.resources("AWS::ApiGatewayV2::Api") == {}
    [(api_id, _)] = synth.resources("AWS::ApiGateway::RestApi").items()
    [(stage_id, _)] = synth.resources("AWS::ApiGateway::Stage").items()
    [association] = synth.resources("AWS::WAFv2::WebACLAssociation").values()
    [acl] = synth.resources("AWS::WAFv2::WebACL").values()
    stage_arn = Resolver(physical={api_id: "a1b2c3d4e5", stage_id: "live"}).resolve(
        association["Properties"]["ResourceArn"]
    )
    assert stage_arn == f"arn:{PARTITION}:apigateway:{REGION}::/restapis/a1b2c3d4e5/stages/live"
    rate = acl["Properties"]["Rules"][0]
    assert rate["Name"] == "rate-per-ip"
    assert rate["Action"] == {"Block": {}}
    assert rate["Statement"]["RateBasedStatement"]["AggregateKeyType"] == "IP"


@pytest.mark.parametrize(
    ("fixture", "sender"),
    [("prod", "loja@example.com"), ("prod_by_default", "Loja <loja@example.com>")],
)
@pytest.mark.parametrize("name", ["Outbox", "Sweeper"])
def test_a_sender_with_or_without_a_display_name_may_send_as_its_address_and_domain(
    request: pytest.FixtureRequest, fixture: str, sender: str, name: str
) -> None:
    # Given a stack whose emailSender is a bare address, or one with a display name (both
    # are what SES's FromEmailAddress takes, and the senders pass it as given)
    synth: Synthesized = request.getfixturevalue(fixture)
    policy = {"Statement": Resolver().resolve(role_statements(synth, name))}
    [function] = [
        f
        for k, f in synth.resources("AWS::Lambda::Function").items()
        if k.startswith(f"Pipeline{name}")
    ]
    assert function["Properties"]["Environment"]["Variables"]["EMAIL_SENDER"] == sender

    # Then the role may send as the address and as its domain, whichever SES authorizes
    identities = f"arn:{PARTITION}:ses:{REGION}:{ACCOUNT}:identity"
    for identity in ("loja@example.com", "example.com"):
        asked = Request({"AWS": "role"}, "ses:SendEmail", f"{identities}/{identity}")
        assert evaluate(policy, asked) == Decision.ALLOW, identity
    # And as no identity made of the display name's pieces
    for identity in ("example.com>", "Loja <loja@example.com>"):
        asked = Request({"AWS": "role"}, "ses:SendEmail", f"{identities}/{identity}")
        assert evaluate(policy, asked) == Decision.IMPLICIT_DENY, identity
