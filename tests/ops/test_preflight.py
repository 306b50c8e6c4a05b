"""`umavez preflight` against moto's account (and, where moto does not answer an API, that
call answered as AWS documents it): what it finds before and after a deploy."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from devstack.provider_apis import FakeProviderApis
from devstack.resources import ASAAS_DEVELOPMENT_API_KEY
from infra.settings import (
    API_CREDENTIAL_PLACEHOLDER,
    BOOTSTRAP_VERSION_PARAMETER,
    WEBHOOK_SECRET_PLACEHOLDER,
    concurrency_needed,
    pinned_powertools_version,
    powertools_layer_parameter,
)
from ops.preflight import Preflight, command
from ops.preflight_calls import Finding, Options, Verdict
from tests.ops.conftest import STRIPE_SOURCE
from tests.support.asaas import asaas_webhook
from tests.support.clients import answering
from tests.support.clock import FakeClock

STACK = "Umavez-prod"
LAYER = powertools_layer_parameter(pinned_powertools_version())
LAYER_ARN = (
    "arn:aws:lambda:us-east-1:017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:20"
)


class Account:
    """moto's account, with the calls moto does not implement answered as AWS would."""

    def __init__(self) -> None:
        self.made: dict[str, Any] = {}
        self.unreserved_concurrency = 1000
        self.ses = {"ProductionAccessEnabled": True, "SendingEnabled": True}
        self.layer_published = True
        self.alarm_history: list[dict[str, Any]] = []
        self.alarms_set: list[dict[str, Any]] = []

    def client(self, service: str) -> Any:
        if service not in self.made:
            made = boto3.client(service)  # type: ignore[call-overload]
            self._answer_what_moto_cannot(service, made)
            self.made[service] = made
        return self.made[service]

    def _answer_what_moto_cannot(self, service: str, client: Any) -> None:
        if service == "lambda":
            answering(
                client,
                "GetAccountSettings",
                lambda _: {
                    "AccountLimit": {
                        "ConcurrentExecutions": self.unreserved_concurrency,
                        "UnreservedConcurrentExecutions": self.unreserved_concurrency,
                    },
                    "AccountUsage": {},
                },
            )
        if service == "sesv2":
            answering(
                client,
                "GetAccount",
                lambda _: {
                    **self.ses,
                    "SendQuota": {"Max24HourSend": 50000.0, "MaxSendRate": 14.0},
                },
            )
        if service == "ssm":
            # AWS's public parameters cannot be written in moto (a reserved name, as in AWS).
            answering(
                client,
                "GetParameter",
                lambda params: (
                    {"Parameter": {"Name": LAYER, "Value": LAYER_ARN, "Type": "String"}}
                    if params.get("Name") == LAYER and self.layer_published
                    else None
                ),
            )
        if service == "cloudwatch":
            answering(
                client, "DescribeAlarmHistory", lambda _: {"AlarmHistoryItems": self.alarm_history}
            )


@pytest.fixture
def account() -> Iterator[Account]:
    with mock_aws():
        ready = Account()
        ready.client("ssm").put_parameter(
            Name=BOOTSTRAP_VERSION_PARAMETER, Value="21", Type="String"
        )
        identities = ready.client("sesv2")
        identities.create_email_identity(EmailIdentity="example.com")
        set_api_logging_role(ready, API_LOGGING_ROLE_ARN)
        yield ready


API_LOGGING_ROLE_ARN = "arn:aws:iam::123456789012:role/apigateway-cloudwatch-logs"


def set_api_logging_role(account: Account, role_arn: str) -> None:
    """The region's API Gateway account setting, as `aws apigateway update-account` sets it."""
    account.client("apigateway").update_account(
        patchOperations=[{"op": "replace", "path": "/cloudwatchRoleArn", "value": role_arn}]
    )


# The outputs and resources preflight reads, named as the stack names them (a test in
# tests/infra holds these names against the synthesized template).
SECRETS = {
    "umavez/prod/stripe/webhook": WEBHOOK_SECRET_PLACEHOLDER,
    "umavez/prod/mercadopago/webhook": WEBHOOK_SECRET_PLACEHOLDER,
    "umavez/prod/asaas/webhook": WEBHOOK_SECRET_PLACEHOLDER,
    "umavez/prod/mercadopago/access-token": API_CREDENTIAL_PLACEHOLDER,
    "umavez/prod/stripe/api-key": API_CREDENTIAL_PLACEHOLDER,
    "umavez/prod/asaas/api-key": API_CREDENTIAL_PLACEHOLDER,
}


def deploy(account: Account, api_type: str = "rest", extra: dict[str, str] | None = None) -> None:
    """A stack with the outputs preflight reads, named as the stack names them (a test in
    tests/infra holds those names against the synthesized template), its alarm topic with an
    e-mail subscription, its secrets holding their placeholders and its DeadLetters alarm
    (moto's CloudFormation makes neither secrets nor alarms: they are made directly), with
    the `extra` outputs besides."""
    outputs: dict[str, object] = (extra or {}) | {
        "AlarmTopicArn": {"Ref": "MonitoringAlarms66989066"},
        "SecretStripe": "umavez/prod/stripe/webhook",
        "SecretMercadopago": "umavez/prod/mercadopago/webhook",
        "SecretAsaas": "umavez/prod/asaas/webhook",
        "SecretMercadopagoAccessToken": "umavez/prod/mercadopago/access-token",
        "SecretStripeApiKey": "umavez/prod/stripe/api-key",
        "SecretAsaasApiKey": "umavez/prod/asaas/api-key",
        "ProcessMaxConcurrency": "5",
        "EmailSender": "loja@example.com",
        "ApiType": api_type,
    }
    template = {
        "Resources": {
            "MonitoringAlarms66989066": {
                "Type": "AWS::SNS::Topic",
                "Properties": {
                    "Subscription": [{"Protocol": "email", "Endpoint": "oncall@example.com"}]
                },
            }
        },
        "Outputs": {name: {"Value": value} for name, value in outputs.items()},
    }
    account.client("cloudformation").create_stack(
        StackName=STACK, TemplateBody=json.dumps(template)
    )
    for name, value in SECRETS.items():
        account.client("secretsmanager").create_secret(Name=name, SecretString=value)
    topic = account.client("sns").list_topics()["Topics"][0]["TopicArn"]
    account.client("cloudwatch").put_metric_alarm(
        AlarmName=f"{STACK}-DeadLetters",
        Namespace="AWS/SQS",
        MetricName="ApproximateNumberOfMessagesVisible",
        Statistic="Maximum",
        Period=60,
        EvaluationPeriods=1,
        Threshold=0,
        ComparisonOperator="GreaterThanThreshold",
        AlarmActions=[topic],
    )


def set_secrets(account: Account, *names: str) -> None:
    for name in names:
        account.client("secretsmanager").put_secret_value(
            SecretId=name, SecretString='{"active": ["whsec_fake_for_tests"]}'
        )


def findings_of(
    account: Account, clock: FakeClock | None = None, **options: Any
) -> dict[str, Finding]:
    clock = clock or FakeClock()
    run = Preflight(
        account.client,
        Options(stack_name=STACK, **options),
        sleep=clock.advance,
        clock=lambda: clock.now,
    )
    return {finding.check: finding for finding in run.run()}


def verdicts(found: dict[str, Finding]) -> dict[str, Verdict]:
    return {check: finding.verdict for check, finding in found.items()}


def test_before_the_deploy_a_ready_account_has_no_problem(account: Account) -> None:
    # Given an account bootstrapped, with the layer published, concurrency and SES ready
    # When preflight runs before the stack exists, for the sender the deploy will pass
    found = findings_of(account, email_sender="loja@example.com")

    # Then the account's checks pass, and it says the stack's own checks come after the deploy
    assert verdicts(found) == {
        "bootstrap": Verdict.OK,
        "powertools layer": Verdict.OK,
        "lambda concurrency": Verdict.OK,
        "api gateway logging role": Verdict.OK,
        "ses account": Verdict.OK,
        "ses identity": Verdict.OK,
        "stack": Verdict.NOTE,
    }
    assert LAYER_ARN in found["powertools layer"].detail
    assert "run preflight again" in found["stack"].detail


def test_an_account_not_ready_is_told_what_to_fix(account: Account) -> None:
    # Given an account never bootstrapped, in a region without the pinned layer, with the
    # concurrency of a new account, SES in the sandbox and the sender not verified
    account.client("ssm").delete_parameter(Name=BOOTSTRAP_VERSION_PARAMETER)
    account.layer_published = False
    account.unreserved_concurrency = 10
    account.ses["ProductionAccessEnabled"] = False
    set_api_logging_role(account, "")  # and no API Gateway logging role in the region

    # When preflight runs
    found = findings_of(account, email_sender="loja@other-shop.example")

    # Then each is a problem that says what to do
    assert {c: v for c, v in verdicts(found).items() if v is Verdict.PROBLEM} == {
        "bootstrap": Verdict.PROBLEM,
        "powertools layer": Verdict.PROBLEM,
        "lambda concurrency": Verdict.PROBLEM,
        "api gateway logging role": Verdict.PROBLEM,
        "ses account": Verdict.PROBLEM,
        "ses identity": Verdict.PROBLEM,
    }
    assert "npx cdk bootstrap" in found["bootstrap"].detail
    assert "has not published Powertools" in found["powertools layer"].detail
    needed = sum(concurrency_needed(5).values())
    assert f"may use {needed}" in found["lambda concurrency"].detail
    assert "sandbox" in found["ses account"].detail
    assert "verify one" in found["ses identity"].detail
    assert "-c allowUnprotectedProd=true" in found["api gateway logging role"].detail


def test_a_deployed_http_api_needs_no_api_gateway_logging_role(account: Account) -> None:
    # Given a deployed HTTP API stack, in a region whose API Gateway account names no role
    deploy(account, api_type="http")
    set_api_logging_role(account, "")

    # When preflight runs, Then the role is no problem: only REST stages log with it
    found = findings_of(account)
    assert found["api gateway logging role"].verdict is Verdict.NOTE


def test_a_sender_with_a_display_name_is_looked_up_as_its_address_and_domain(
    account: Account,
) -> None:
    # Given the domain verified, and the sender the deploy passes with a display name
    # When preflight runs
    found = findings_of(account, email_sender="Loja <loja@example.com>")

    # Then it finds the domain verified, as SES would when it authorizes the send
    assert found["ses identity"].verdict is Verdict.OK


def test_a_sender_that_is_not_an_address_is_a_problem_that_says_what_is_expected(
    account: Account,
) -> None:
    found = findings_of(account, email_sender="Loja <loja@example")

    assert found["ses identity"].verdict is Verdict.PROBLEM
    assert "'Loja <loja@example.com>'" in found["ses identity"].detail


def test_an_old_bootstrap_is_a_problem(account: Account) -> None:
    account.client("ssm").put_parameter(
        Name=BOOTSTRAP_VERSION_PARAMETER, Value="5", Type="String", Overwrite=True
    )

    found = findings_of(account)

    assert found["bootstrap"].verdict is Verdict.PROBLEM
    assert "needs 6" in found["bootstrap"].detail


def test_an_identity_sending_with_a_configuration_set_the_stack_is_not_granted(
    account: Account,
) -> None:
    # Given the sender's domain sends with a default configuration set (as SES describes such
    # an identity; moto cannot assign one)
    answering(
        account.client("sesv2"),
        "GetEmailIdentity",
        lambda params: (
            {
                "IdentityType": "DOMAIN",
                "VerifiedForSendingStatus": True,
                "VerificationStatus": "SUCCESS",
                "ConfigurationSetName": "loja-transactional",
            }
            if params.get("EmailIdentity") == "example.com"
            else None
        ),
    )

    # When preflight checks a deploy that names no configuration set, then one that does
    without = findings_of(account, email_sender="loja@example.com")
    named = findings_of(
        account, email_sender="loja@example.com", email_configuration_set="loja-transactional"
    )

    # Then the first is told to pass it (every e-mail would be AccessDenied), the second is fine
    assert without["ses identity"].verdict is Verdict.PROBLEM
    assert "-c emailConfigurationSet=loja-transactional" in without["ses identity"].detail
    assert named["ses identity"].verdict is Verdict.OK


def test_after_the_deploy_secrets_left_unset_are_named(account: Account) -> None:
    # Given the stack deployed, and only the Stripe webhook secret set
    deploy(account)
    set_secrets(account, "umavez/prod/stripe/webhook")

    # When preflight runs for a merchant using Stripe and Mercado Pago
    found = findings_of(account, providers=("stripe", "mercadopago"))

    # Then each secret a used provider needs and that holds its placeholder is a problem;
    # Stripe's API key (for old API versions only) is a note; Asaas's is not asked for
    secrets = {c: f for c, f in found.items() if c.startswith("secret ")}
    assert verdicts(secrets) == {
        "secret umavez/prod/stripe/webhook": Verdict.OK,
        "secret umavez/prod/mercadopago/webhook": Verdict.PROBLEM,
        "secret umavez/prod/mercadopago/access-token": Verdict.PROBLEM,
        "secret umavez/prod/stripe/api-key": Verdict.NOTE,
    }
    assert "503" in secrets["secret umavez/prod/mercadopago/webhook"].detail
    # And the sender is read from the stack's outputs: nothing needs repeating
    assert found["ses identity"].verdict is Verdict.OK


def test_asaas_needs_its_api_key_as_well_as_its_webhook_token(account: Account) -> None:
    # Given the stack deployed, and only Asaas's webhook token set
    deploy(account)
    set_secrets(account, "umavez/prod/asaas/webhook")

    # When preflight runs for a merchant using Asaas
    found = findings_of(account, providers=("asaas",))

    # Then the API key process reads every Asaas payment with is a problem while unset
    secrets = {c: f for c, f in found.items() if c.startswith("secret ")}
    assert verdicts(secrets) == {
        "secret umavez/prod/asaas/webhook": Verdict.OK,
        "secret umavez/prod/asaas/api-key": Verdict.PROBLEM,
    }
    assert "every Asaas webhook fails" in secrets["secret umavez/prod/asaas/api-key"].detail


def umavez_webhook(**state: bool) -> dict[str, Any]:
    """Umavez's webhook in Asaas, as Asaas's webhooks API answers it."""
    url = "https://abc123.execute-api.us-east-1.amazonaws.com/live/webhooks/asaas"
    return asaas_webhook("wh_umavez01", url, **state)


def test_asaas_webhooks_are_read_with_the_stacks_key_and_a_paused_queue_is_a_problem(
    account: Account,
) -> None:
    # Given the stack deployed with its Asaas key set, and Asaas's account sending to umavez
    deploy(account)
    account.client("secretsmanager").put_secret_value(
        SecretId="umavez/prod/asaas/api-key", SecretString=ASAAS_DEVELOPMENT_API_KEY
    )
    apis = FakeProviderApis().start()
    try:
        # When preflight runs with the queue running, paused, with the webhook disabled, and
        # with no webhook to umavez at all
        found = []
        for webhook in (
            umavez_webhook(),
            umavez_webhook(interrupted=True),
            umavez_webhook(enabled=False),
            None,
        ):
            apis.asaas_webhooks = {"wh_umavez01": webhook} if webhook else {}
            found.append(
                findings_of(account, providers=("asaas",), asaas_api_url=apis.url)["asaas webhooks"]
            )
    finally:
        apis.stop()

    # Then a running queue passes; a paused one, a disabled webhook and none at all are
    # problems, each saying what to do
    running, paused, disabled, missing = found
    assert [f.verdict for f in found] == [Verdict.OK] + [Verdict.PROBLEM] * 3
    assert "umavez (wh_umavez01)" in running.detail
    assert 'PUT /v3/webhooks/wh_umavez01 {"interrupted": false}' in paused.detail
    assert "`umavez replay asaas --since" in paused.detail
    assert '{"enabled": true}' in disabled.detail
    assert "Asaas delivers nothing to umavez" in missing.detail


def test_asaas_webhooks_are_not_read_while_the_key_is_unset(account: Account) -> None:
    # Given the stack deployed, its Asaas key still its placeholder
    deploy(account)

    # When preflight runs for a merchant using Asaas (an API that would refuse anything)
    found = findings_of(account, providers=("asaas",), asaas_api_url="http://127.0.0.1:9")

    # Then the webhooks are not read, and that is said, not a failure
    assert found["asaas webhooks"].verdict is Verdict.NOTE
    assert "is not set yet" in found["asaas webhooks"].detail


def test_a_notification_signing_secret_left_unset_is_a_problem(account: Account) -> None:
    # Given a stack notifying an HTTP sink, its signing secret holding its placeholder
    signing = "umavez/prod/notify/signing"
    deploy(account, extra={"SecretNotifySigning": signing})
    secrets = account.client("secretsmanager")
    secrets.create_secret(Name=signing, SecretString=WEBHOOK_SECRET_PLACEHOLDER)

    # When preflight runs before and after the operator sets it
    unset = findings_of(account, providers=("stripe",))[f"secret {signing}"]
    set_secrets(account, signing)
    done = findings_of(account, providers=("stripe",))[f"secret {signing}"]

    # Then it is a problem that says why while unset, and passes once set
    assert unset.verdict is Verdict.PROBLEM
    assert "notifyUrl" in unset.detail
    assert done.verdict is Verdict.OK


def test_an_alarm_topic_nobody_confirmed_is_a_problem(account: Account) -> None:
    # Given the stack deployed, its alarm e-mail not confirmed yet
    deploy(account)
    answering(
        account.client("sns"),
        "ListSubscriptionsByTopic",
        lambda _: {
            "Subscriptions": [
                {
                    "SubscriptionArn": "PendingConfirmation",
                    "Protocol": "email",
                    "Endpoint": "oncall@example.com",
                }
            ]
        },
    )

    found = findings_of(account)

    assert found["alarm subscription"].verdict is Verdict.PROBLEM
    assert "none confirmed" in found["alarm subscription"].detail


def test_a_confirmed_subscription_passes(account: Account) -> None:
    deploy(account)

    found = findings_of(account)

    assert found["alarm subscription"].verdict is Verdict.OK
    assert "email:oncall@example.com" in found["alarm subscription"].detail


def alarm_state(account: Account) -> str:
    [alarm] = account.client("cloudwatch").describe_alarms(AlarmNames=[f"{STACK}-DeadLetters"])[
        "MetricAlarms"
    ]
    return str(alarm["StateValue"])


def history_item(summary: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "AlarmName": f"{STACK}-DeadLetters",
        "AlarmType": "MetricAlarm",
        "Timestamp": datetime(2026, 12, 1, 12, 0, 0),
        "HistoryItemType": "Action",
        "HistorySummary": summary,
        "HistoryData": json.dumps(data),
    }


def test_the_test_alarm_reports_a_notification_the_topic_refused(account: Account) -> None:
    # Given the stack deployed, and a topic that refuses CloudWatch (the history AWS records)
    deploy(account)
    topic = account.client("sns").list_topics()["Topics"][0]["TopicArn"]
    refused = f"CloudWatch Alarms is not authorized to perform: SNS:Publish on resource: {topic}"
    account.alarm_history.append(
        history_item(
            f"Failed to execute action {topic}",
            {"actionState": "Failed", "error": refused},
        )
    )

    # When preflight tests an alarm
    found = findings_of(account, test_alarm=True)

    # Then the alarm was set to ALARM, and the refusal is a problem with AWS's own reason
    assert alarm_state(account) == "ALARM"
    finding = found["alarm reaches the topic"]
    assert finding.verdict is Verdict.PROBLEM
    assert "not authorized to perform: SNS:Publish" in finding.detail


def test_the_test_alarm_reports_a_notification_published(account: Account) -> None:
    deploy(account)
    topic = account.client("sns").list_topics()["Topics"][0]["TopicArn"]
    account.alarm_history.append(
        history_item(f"Successfully executed action {topic}", {"actionState": "Succeeded"})
    )

    found = findings_of(account, test_alarm=True)

    assert found["alarm reaches the topic"].verdict is Verdict.OK


def test_an_alarm_with_no_recorded_action_is_unknown_after_the_wait(account: Account) -> None:
    # Given the stack deployed, and an alarm whose history records nothing
    deploy(account)
    clock = FakeClock()

    # When preflight tests it, waiting on an injected clock
    found = findings_of(account, clock, test_alarm=True, alarm_wait_seconds=30)

    # Then it says it could not tell, after the wait, rather than guessing
    assert found["alarm reaches the topic"].verdict is Verdict.UNKNOWN
    assert clock.now >= 30


def test_an_api_the_caller_may_not_call_is_unknown_not_a_crash(account: Account) -> None:
    # Given a caller not allowed to read Lambda's account settings
    def denied(_: dict[str, Any]) -> dict[str, Any]:
        raise account.client("lambda").exceptions.ClientError(
            {"Error": {"Code": "AccessDeniedException", "Message": "User is not authorized"}},
            "GetAccountSettings",
        )

    account.client("lambda").meta.events.register_first(
        "before-call.lambda.GetAccountSettings", lambda **_: denied({})
    )

    found = findings_of(account)

    assert found["lambda concurrency"].verdict is Verdict.UNKNOWN
    assert "not allowed to call lambda:GetAccountSettings" in found["lambda concurrency"].detail


def run_command(account: Account, *argv: str) -> int:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command")
    from ops.preflight import add_parser

    add_parser(commands)
    return command(parser.parse_args(["preflight", "--stack-name", STACK, *argv]), account.client)


def test_the_command_exits_non_zero_only_when_something_must_be_fixed(
    account: Account, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a deployed stack whose Mercado Pago and Asaas secrets are unset
    deploy(account)
    set_secrets(account, "umavez/prod/stripe/webhook")

    # When the merchant checks with all providers, then with Stripe only
    all_providers = run_command(account)
    printed = capsys.readouterr().out
    stripe_only = run_command(account, "--providers", "stripe", "--json")
    rows = json.loads(capsys.readouterr().out)

    # Then the first fails and names the problems; the second passes, as JSON
    assert all_providers == 1
    assert "PROBLEM  secret umavez/prod/asaas/webhook" in printed
    assert "PROBLEM  secret umavez/prod/asaas/api-key" in printed
    assert printed.rstrip().splitlines()[-1].startswith("4 problem(s)")
    assert stripe_only == 0
    assert {row["verdict"] for row in rows} <= {"ok", "note"}


def test_no_credentials_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a machine with no AWS credentials at all
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    from ops.preflight import session_clients

    clients: Callable[[str], Any] = session_clients(None, "us-east-1")

    # When preflight runs
    exit_code = command(
        argparse.Namespace(
            stack_name=STACK,
            providers="stripe",
            email_sender=None,
            email_configuration_set=None,
            process_max_concurrency=5,
            test_alarm=False,
            asaas_api_url="https://api.asaas.com",
            json=False,
        ),
        clients,
    )

    # Then one line says what to do, and it exits 2 (nothing could be checked)
    out = capsys.readouterr().out.strip().splitlines()
    assert exit_code == 2
    assert len(out) == 1
    assert "aws configure" in out[0]


def test_an_alarm_already_in_alarm_is_moved_so_its_action_runs(account: Account) -> None:
    # Given the stack deployed, its DeadLetters alarm already in ALARM (actions run on a change)
    deploy(account)
    alarm = f"{STACK}-DeadLetters"
    cloudwatch = account.client("cloudwatch")
    cloudwatch.set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="a real one")
    topic = account.client("sns").list_topics()["Topics"][0]["TopicArn"]
    account.alarm_history.append(
        history_item(f"Successfully executed action {topic}", {"actionState": "Succeeded"})
    )
    states: list[str] = []
    cloudwatch.meta.events.register(
        "before-parameter-build.cloudwatch.SetAlarmState",
        lambda params, **_: states.append(params["StateValue"]),
    )

    # When preflight tests it
    found = findings_of(account, test_alarm=True)

    # Then it went through OK back to ALARM, and the published action is read
    assert states == ["OK", "ALARM"]
    assert found["alarm reaches the topic"].verdict is Verdict.OK


def test_stripe_by_eventbridge_needs_its_partner_source_associated(account: Account) -> None:
    # Given a stack deployed with Stripe through EventBridge, its partner source associated
    deploy(account, extra={"StripeEventSource": STRIPE_SOURCE})
    events = account.client("events")
    events.create_partner_event_source(Name=STRIPE_SOURCE, Account="123456789012")
    events.create_event_bus(Name=STRIPE_SOURCE, EventSourceName=STRIPE_SOURCE)

    # When preflight runs
    associated = findings_of(account)["stripe event source"]

    # Then it passes, naming the source
    assert (associated.verdict, STRIPE_SOURCE in associated.detail) == (Verdict.OK, True)


@pytest.mark.parametrize(("state", "told"), [("PENDING", "within 7 days"), (None, "create")])
def test_a_partner_source_pending_or_missing_is_a_problem_that_says_what_to_do(
    account: Account, state: str | None, told: str
) -> None:
    # Given a stack deployed with Stripe through EventBridge, its source pending or absent
    deploy(account, extra={"StripeEventSource": STRIPE_SOURCE})
    events = account.client("events")
    if state is not None:
        answering(events, "DescribeEventSource", lambda _: {"Name": STRIPE_SOURCE, "State": state})
    else:

        def absent(**_: Any) -> None:
            raise ClientError(
                {"Error": {"Code": "ResourceNotFoundException", "Message": "not found"}},
                "DescribeEventSource",
            )

        events.meta.events.register("before-call.events.DescribeEventSource", absent)

    # When preflight runs
    found = findings_of(account)["stripe event source"]

    # Then it is a problem, saying what to do
    assert found.verdict is Verdict.PROBLEM
    assert told in found.detail


def test_a_webhook_only_stack_has_no_stripe_event_source_to_check(account: Account) -> None:
    deploy(account)

    assert "stripe event source" not in findings_of(account)
