"""What AWS does on a first deploy that moto does not: resource and key policies evaluated,
names that collide, rollbacks, timeouts, retries and quotas, read from the synthesized stack."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from functions.ingest.adapters import sqs_message_bytes
from functions.ingest.service import MAX_BODY_BYTES, queue_attribute
from functions.outbox.budget import ITEM_RESERVE_MS
from functions.shared.observability import powertools
from infra.config import PROVIDERS, ApiType, ConfigError, StackConfig
from infra.constructs.api import sampling_rule_name
from infra.settings import OUTBOX_BATCH_SIZE, TEST_ALARM
from tests.infra.conftest import Synthesized
from tests.support.aws_policies import (
    ACCOUNT,
    PARTITION,
    REGION,
    Decision,
    Request,
    Resolver,
    evaluate,
)

ALARM_ARN = f"arn:{PARTITION}:cloudwatch:{REGION}:{ACCOUNT}:alarm:Umavez-test-DeadLetters-1A2B"
OTHER_ACCOUNTS_ALARM = f"arn:{PARTITION}:cloudwatch:{REGION}:444455556666:alarm:theirs"


def only(synth: Synthesized, kind: str) -> tuple[str, dict[str, Any]]:
    [(logical_id, found)] = synth.resources(kind).items()
    return logical_id, found


def cloudwatch_alarm_publishing(topic_arn: str, *, alarm: str, tls: bool = True) -> Request:
    """CloudWatch notifying the topic on behalf of one alarm, as SNS sees the call."""
    return Request(
        principal={"Service": "cloudwatch.amazonaws.com"},
        action="sns:Publish",
        resource=topic_arn,
        context={
            "aws:SecureTransport": str(tls).lower(),
            "aws:SourceAccount": alarm.split(":")[4],
            "aws:SourceArn": alarm,
        },
    )


def test_cloudwatch_alarms_of_this_account_may_publish_to_the_alarm_topic(
    prod: Synthesized,
) -> None:
    # Given the alarm topic's policy as deployed in one account and region (a topic policy
    # replaces SNS's default one: what it does not allow, nobody may do)
    topic_id, _ = only(prod, "AWS::SNS::Topic")
    _, policy = only(prod, "AWS::SNS::TopicPolicy")
    topic_arn = f"arn:{PARTITION}:sns:{REGION}:{ACCOUNT}:Umavez-test-Alarms"
    resolver = Resolver(physical={topic_id: topic_arn})
    document = resolver.resolve(policy["Properties"]["PolicyDocument"])
    assert resolver.resolve(policy["Properties"]["Topics"]) == [topic_arn]

    # When CloudWatch publishes for an alarm of this account, over TLS
    # Then SNS lets it: the alarm reaches the topic's subscribers
    assert evaluate(document, cloudwatch_alarm_publishing(topic_arn, alarm=ALARM_ARN)) == (
        Decision.ALLOW
    )
    # And not for another account's alarm (the confused deputy), nor without TLS
    assert evaluate(
        document, cloudwatch_alarm_publishing(topic_arn, alarm=OTHER_ACCOUNTS_ALARM)
    ) == (Decision.IMPLICIT_DENY)
    assert evaluate(
        document, cloudwatch_alarm_publishing(topic_arn, alarm=ALARM_ARN, tls=False)
    ) == (Decision.EXPLICIT_DENY)
    # And nobody else may publish through the resource policy
    anyone = Request(
        principal={"AWS": "arn:aws:iam::444455556666:root"},
        action="sns:Publish",
        resource=topic_arn,
        context={"aws:SecureTransport": "true"},
    )
    assert evaluate(document, anyone) == Decision.IMPLICIT_DENY


def test_cloudwatch_may_encrypt_with_the_topic_key_only_for_this_accounts_alarms(
    prod: Synthesized,
) -> None:
    # Given the key the topic is encrypted with (a key policy is the only grant a key has)
    _, key = only(prod, "AWS::KMS::Key")
    document = Resolver().resolve(key["Properties"]["KeyPolicy"])
    key_arn = f"arn:{PARTITION}:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"

    for action in ("kms:GenerateDataKey", "kms:Decrypt"):
        on_behalf = {"aws:SourceAccount": ACCOUNT, "aws:SourceArn": ALARM_ARN}
        # When CloudWatch asks for a data key to publish an alarm of this account
        asked = Request({"Service": "cloudwatch.amazonaws.com"}, action, key_arn, on_behalf)
        # Then the key allows it, and not for another account's alarm
        assert evaluate(document, asked) == Decision.ALLOW
        theirs = {"aws:SourceAccount": "444455556666", "aws:SourceArn": OTHER_ACCOUNTS_ALARM}
        asked_by_them = Request({"Service": "cloudwatch.amazonaws.com"}, action, key_arn, theirs)
        assert evaluate(document, asked_by_them) == Decision.IMPLICIT_DENY


def test_every_alarm_notifies_the_topic_cloudwatch_may_publish_to(prod: Synthesized) -> None:
    topic_id, _ = only(prod, "AWS::SNS::Topic")
    alarms = prod.resources("AWS::CloudWatch::Alarm")

    assert alarms
    for name, alarm in alarms.items():
        assert {"Ref": topic_id} in alarm["Properties"]["AlarmActions"], name


def functions_of(synth: Synthesized) -> dict[str, dict[str, Any]]:
    return {k: v["Properties"] for k, v in synth.resources("AWS::Lambda::Function").items()}


def alarm_namespaces(synth: Synthesized) -> set[str]:
    """Every custom (not AWS/...) namespace an alarm of the stack reads."""
    found: set[str] = set()
    for alarm in synth.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        stats = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
        found |= {m.get("Namespace") for m in [*stats, props]} - {None}
    return {n for n in found if not n.startswith("AWS/")}


def test_each_stage_publishes_and_alarms_on_its_own_metrics(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    # Given a prod and a dev stack in one account and region
    published = {
        stage: {f["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"] for f in fs}
        for stage, fs in (
            ("prod", functions_of(prod).values()),
            ("dev", functions_of(dev_with_waf).values()),
        )
    }

    # Then each stage's functions publish under one namespace, and its alarms read only that
    assert published == {"prod": {"Umavez/prod"}, "dev": {"Umavez/dev"}}
    assert alarm_namespaces(prod) == {"Umavez/prod"}
    assert alarm_namespaces(dev_with_waf) == {"Umavez/dev"}


def test_a_function_publishes_under_the_namespace_its_stack_gives_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a function deployed by the dev stage
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "Umavez/dev")

    # When it creates its Powertools objects
    _, _, metrics = powertools("process")

    # Then its metrics go to that stage's namespace, where the stage's alarms read
    assert metrics.namespace == "Umavez/dev"


# Properties that give a resource a fixed physical name: a second resource of that name in the
# account and region (one a failed create kept) makes the create fail with "already exists".
FIXED_NAMES = {
    "AWS::SecretsManager::Secret": "Name",
    "AWS::SQS::Queue": "QueueName",
    "AWS::DynamoDB::GlobalTable": "TableName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Events::EventBus": "Name",
    "AWS::KMS::Alias": "AliasName",
}


def test_a_failed_first_deploy_leaves_no_named_resource_behind(prod: Synthesized) -> None:
    # Given every resource the prod stack keeps when the stack is deleted
    resources = prod.template.to_json()["Resources"]
    kept = {k: r for k, r in resources.items() if r.get("DeletionPolicy", "Delete") != "Delete"}
    assert kept

    for logical_id, resource in kept.items():
        named = FIXED_NAMES.get(resource["Type"]) in resource.get("Properties", {})
        # Then a named one is removed when the create that made it rolls back (a retry of
        # the first deploy could not create it again), and kept on delete and replacement
        if named:
            assert resource["DeletionPolicy"] == "RetainExceptOnCreate", logical_id
        assert resource["UpdateReplacePolicy"] == "Retain", logical_id
        # And only the deletion-protected tables (which a rollback could not delete) are kept
        # even then; they have generated names, so a retry creates new ones
        if resource["DeletionPolicy"] == "Retain":
            assert resource["Type"] == "AWS::DynamoDB::GlobalTable", logical_id
            [replica] = resource["Properties"]["Replicas"]
            assert replica["DeletionProtectionEnabled"] is True
            assert not named, logical_id
    names = {r["Properties"].get("Name") for r in kept.values()}
    assert "umavez/prod/stripe/webhook" in names  # the secrets are among them


def test_each_api_is_named_for_its_stack_and_its_alarms_read_that_name(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    # Given both API types (prod: HTTP, dev_with_waf: REST), each deployed as "Umavez-test"
    [(_, http_api)] = prod.resources("AWS::ApiGatewayV2::Api").items()
    [(_, rest_api)] = dev_with_waf.resources("AWS::ApiGateway::RestApi").items()

    # Then neither carries a name another API of the account may share ("Api", "HttpApi")
    assert http_api["Properties"]["Name"] == "Umavez-test-webhooks"
    assert rest_api["Properties"]["Name"] == "Umavez-test-webhooks"
    # And the REST alarms, which select API Gateway's metrics by name, select this one only
    for alarm in dev_with_waf.resources("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        stats = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]
        for metric in [*stats, props]:
            if metric.get("Namespace") == "AWS/ApiGateway":
                assert {"Name": "ApiName", "Value": "Umavez-test-webhooks"} in metric["Dimensions"]


def test_the_sampling_rule_matches_this_stage_alone(dev_with_waf: Synthesized) -> None:
    # Given the REST stack's X-Ray sampling rule (rules are the account's, not the stack's)
    [rule] = dev_with_waf.resources("AWS::XRay::SamplingRule").values()
    props = rule["Properties"]["SamplingRule"]
    [(api_id, _)] = dev_with_waf.resources("AWS::ApiGateway::RestApi").items()
    [(stage_id, _)] = dev_with_waf.resources("AWS::ApiGateway::Stage").items()
    resolver = Resolver(physical={api_id: "a1b2c3d4e5", stage_id: "live"})

    # Then it names this API's stage by X-Ray's service name and by its ARN, not "*"
    assert props["ServiceName"] == "Umavez-test-webhooks/live"
    assert props["ServiceType"] == "AWS::ApiGateway::Stage"
    assert resolver.resolve(props["ResourceARN"]) == (
        f"arn:{PARTITION}:apigateway:{REGION}::/restapis/a1b2c3d4e5/stages/live"
    )
    # And any path of that stage (its one route, whatever prefix the stage adds) is sampled
    assert props["URLPath"] == "*"
    assert props["HTTPMethod"] == "POST"


def test_a_new_stack_pages_nobody_before_its_first_books_check_yet_a_stopped_one_does(
    prod: Synthesized,
) -> None:
    # Given the two alarms on the hourly books check (a new stack has had no run yet)
    alarms = {
        name: prod.template.to_json()["Resources"][
            prod.stack.resolve(alarm.node.default_child.logical_id)  # type: ignore[union-attr]
        ]["Properties"]
        for name, alarm in prod.stack.monitoring.alarms.items()
        if name.startswith("Reconciliation")
    }
    topic_id, _ = only(prod, "AWS::SNS::Topic")
    mismatches, stopped = alarms["ReconciliationMismatches"], alarms["ReconciliationStopped"]

    # Then hours with no run never breach the mismatch alarm (it paged before the first run)
    assert mismatches["TreatMissingData"] == "notBreaching"
    # And two hours with no run leave the stopped alarm without data: a new alarm starts there
    # (no transition, no page), a stack whose runs stopped moves there from OK, and that
    # transition notifies the topic
    assert stopped["TreatMissingData"] == "missing"
    assert stopped["Statistic"] == "SampleCount"
    assert (stopped["EvaluationPeriods"], stopped["Period"]) == (2, 3600)
    assert stopped["InsufficientDataActions"] == [{"Ref": topic_id}]
    assert stopped["AlarmActions"] == [{"Ref": topic_id}]
    assert (stopped["ComparisonOperator"], stopped["Threshold"]) == ("LessThanThreshold", 1)


def test_scheduled_runs_are_never_retried_into_the_next_one(prod: Synthesized) -> None:
    # Given the functions a schedule invokes (asynchronously), and each schedule's interval
    functions = prod.resources("AWS::Lambda::Function")
    rules = prod.resources("AWS::Events::Rule").values()
    # (a function on a daily rule too, the statement, is held to its more frequent one's)
    every = {
        rule["Properties"]["Targets"][0]["Arn"]["Fn::GetAtt"][0]: rule["Properties"][
            "ScheduleExpression"
        ]
        for rule in rules
        if "Fn::GetAtt" in rule["Properties"]["Targets"][0]["Arn"]
        and rule["Properties"]["ScheduleExpression"].startswith("rate(")
    }
    invoke_configs = {
        c["Properties"]["FunctionName"]["Ref"]: c["Properties"]
        for c in prod.resources("AWS::Lambda::EventInvokeConfig").values()
    }
    seconds = {"rate(5 minutes)": 300, "rate(1 hour)": 3600}

    assert len(every) == 3  # the sweeper, the waiting room and the statement pass
    # (the hourly books check starts a state machine, which invokes its function and waits:
    # its retries are its own, and the execution ends before the next one is due)
    [machine] = prod.resources("AWS::StepFunctions::StateMachine").values()
    [hourly] = [r for r in rules if "Ref" in r["Properties"]["Targets"][0]["Arn"]]
    definition = "".join(
        part
        for part in machine["Properties"]["DefinitionString"]["Fn::Join"][1]
        if isinstance(part, str)
    )
    timeout = json.loads(definition)["TimeoutSeconds"]
    assert timeout < seconds[hourly["Properties"]["ScheduleExpression"]]
    for function_id, schedule in every.items():
        assert function_id in functions
        config = invoke_configs[function_id]
        # Then a failed or timed-out run is not retried by Lambda (its async default is two more
        # tries, overlapping the next run), and a run that could not start is dropped once the
        # next one is due
        assert config["MaximumRetryAttempts"] == 0, function_id
        assert config["MaximumEventAgeInSeconds"] == seconds[schedule], function_id
    # And nothing else is invoked asynchronously: no other function has the setting
    assert set(invoke_configs) == set(every)


@pytest.mark.parametrize("concurrency", ["0", "1", "1001", "-5"])
def test_a_process_concurrency_aws_refuses_is_refused_by_the_config(concurrency: str) -> None:
    # Given a maximum concurrency outside what AWS accepts for an SQS event source (2 to 1000)
    context = {"stage": "dev", "processMaxConcurrency": concurrency}

    # Then the config refuses it with the range, before CDK or CloudFormation would
    with pytest.raises(ConfigError, match="processMaxConcurrency must be from 2 to 1000"):
        StackConfig.from_context(context.get)


def test_process_concurrency_at_the_bounds_aws_accepts_is_taken() -> None:
    for concurrency in ("2", "1000"):
        config = StackConfig.from_context(
            {"stage": "dev", "processMaxConcurrency": concurrency}.get
        )
        assert config.process_max_concurrency == int(concurrency)


def test_a_number_that_is_not_one_is_refused_with_its_name() -> None:
    with pytest.raises(ConfigError, match="retentionDays must be a whole number, not 'ninety'"):
        StackConfig.from_context({"stage": "dev", "retentionDays": "ninety"}.get)


def queue_named(synth: Synthesized, part: str) -> dict[str, Any]:
    [queue] = [q for k, q in synth.resources("AWS::SQS::Queue").items() if part in k]
    return queue["Properties"]  # type: ignore[no-any-return]


# SQS's default MaximumMessageSize when a queue names none: the limit a queue made before
# SQS raised its maximum keeps, and the one the issue found ingest's largest body refused at.
SQS_DEFAULT_MAX_BYTES = 256 * 1024


def test_the_largest_body_ingest_accepts_fits_the_queues_with_its_attributes(
    prod: Synthesized,
) -> None:
    # Given the largest message ingest may send: a body at its cap, and attributes at theirs
    # (the longest provider name; an event id and type of 256 four-byte characters, the most
    # ingest keeps of each)
    body = "x" * MAX_BODY_BYTES
    longest = "\U0001f4b8" * 1000
    attributes = {
        "provider": max(PROVIDERS, key=len),
        "event_id": queue_attribute(longest),
        "event_type": queue_attribute(longest),
    }
    size = sqs_message_bytes(body, attributes)
    assert size > SQS_DEFAULT_MAX_BYTES  # what the old default refused (moto counts no attribute)

    # Then the webhook queue and its dead-letter queue hold it as SQS counts it
    for part in ("QueuesWebhooks", "QueuesDeadLetters"):
        limit = queue_named(prod, part).get("MaximumMessageSize", SQS_DEFAULT_MAX_BYTES)
        assert size <= limit, part


def function_named(synth: Synthesized, part: str) -> dict[str, Any]:
    [props] = [p for k, p in functions_of(synth).items() if k.startswith(f"Pipeline{part}")]
    return props


def test_the_senders_have_time_for_a_slow_item_after_a_batch_of_fast_ones(
    prod: Synthesized,
) -> None:
    # Given what one item takes at worst (every sink at its timeouts), which a sender must
    # never start without the time to finish (a timeout mid-item resends what it sent)
    outbox = function_named(prod, "Outbox")["Timeout"]
    sweeper = function_named(prod, "Sweeper")["Timeout"]

    # Then each sender's timeout holds a whole stream batch at a normal pace (a second an
    # item) and one item at its worst, and the sweeper's ends before its next run is due
    assert outbox * 1000 >= OUTBOX_BATCH_SIZE * 1000 + ITEM_RESERVE_MS
    assert sweeper * 1000 >= 2 * ITEM_RESERVE_MS
    assert sweeper < 5 * 60


def test_a_sender_identity_with_a_configuration_set_may_send_through_it(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    # Given a stack whose sender's SES identity sends with a configuration set
    synth = synth_for(
        StackConfig(
            stage="dev",
            email_sender="loja@example.com",
            email_configuration_set="loja-transactional",
        )
    )
    arn = f"arn:{PARTITION}:ses:{REGION}:{ACCOUNT}"

    for name in ("Outbox", "Sweeper"):
        policy = {"Statement": Resolver().resolve(role_statements(synth, name))}
        env = function_named(synth, name)["Environment"]["Variables"]

        # Then the role may send as the identity and through the configuration set, which SES
        # authorizes as well (without it, every e-mail of such an identity is AccessDenied)
        for resource in (
            f"{arn}:identity/loja@example.com",
            f"{arn}:configuration-set/loja-transactional",
        ):
            asked = Request({"AWS": f"arn:aws:iam::{ACCOUNT}:role/x"}, "ses:SendEmail", resource)
            assert evaluate(policy, asked) == Decision.ALLOW, (name, resource)
        # And not through any other configuration set; the senders name theirs on each send
        other = Request({"AWS": "x"}, "ses:SendEmail", f"{arn}:configuration-set/another")
        assert evaluate(policy, other) == Decision.IMPLICIT_DENY
        assert env["EMAIL_CONFIGURATION_SET"] == "loja-transactional"


def test_a_configuration_set_without_a_sender_is_refused() -> None:
    with pytest.raises(ConfigError, match="emailConfigurationSet needs emailSender"):
        StackConfig.from_context({"stage": "dev", "emailConfigurationSet": "tx"}.get)


def role_statements(synth: Synthesized, name: str) -> list[dict[str, Any]]:
    [role] = [k for k in synth.resources("AWS::IAM::Role") if k.startswith(f"Pipeline{name}Role")]
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_preflight_reads_outputs_and_an_alarm_the_stack_has(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    # Given a stack deployed with a sender and a configuration set
    synth = synth_for(
        StackConfig(
            stage="prod",
            alarm_email="oncall@example.com",
            api_type=ApiType.REST,
            waf=True,
            email_sender="loja@example.com",
            email_configuration_set="loja-transactional",
            process_max_concurrency=8,
        )
    )
    outputs = {k: v["Value"] for k, v in synth.template.to_json()["Outputs"].items()}

    # Then every output `umavez preflight` reads is there, with what it expects
    for provider in PROVIDERS:
        assert outputs[f"Secret{provider.capitalize()}"] == f"umavez/prod/{provider}/webhook"
    assert outputs["SecretMercadopagoAccessToken"] == "umavez/prod/mercadopago/access-token"
    assert outputs["SecretStripeApiKey"] == "umavez/prod/stripe/api-key"
    assert outputs["SecretAsaasApiKey"] == "umavez/prod/asaas/api-key"
    assert outputs["ProcessMaxConcurrency"] == "8"
    assert outputs["ApiType"] == "rest"
    assert outputs["EmailSender"] == "loja@example.com"
    assert outputs["EmailConfigurationSet"] == "loja-transactional"
    assert "AlarmTopicArn" in outputs
    # And every alarm is named `<stack>-<name>`, the test alarm among them
    names = {
        a["Properties"]["AlarmName"] for a in synth.resources("AWS::CloudWatch::Alarm").values()
    }
    assert f"Umavez-test-{TEST_ALARM}" in names
    assert names == {f"Umavez-test-{name}" for name in synth.stack.monitoring.alarms}


def test_sampling_rules_of_long_stack_names_never_collide() -> None:
    # Given two stacks whose API names share their first 32 characters
    first = sampling_rule_name("Umavez-merchant-brazil-prod-east-webhooks")
    second = sampling_rule_name("Umavez-merchant-brazil-prod-west-webhooks")

    # Then their X-Ray rules (32 characters at most, account-wide) have different names
    assert first != second
    assert max(len(first), len(second)) <= 32
    assert sampling_rule_name("Umavez-test-webhooks") == "Umavez-test-webhooks"
