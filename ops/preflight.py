"""`umavez preflight`: what a first deploy needs from the account, checked before and after
`cdk deploy` (docs/deploy.md is the checklist this runs).

Before the deploy (the stack does not exist yet): CDK's bootstrap, AWS's Powertools layer
parameter in the region, the account's Lambda concurrency against what the stack may use, and
SES (production access, the sender's identity verified, its configuration set). After it: the
same, plus the secrets the stack created never set since (their placeholder), Asaas's
webhooks (read with the stack's Asaas key, when one is set: umavez's must exist, be enabled
and its queue running), a confirmed subscription on the alarm topic, and (`--test-alarm`) one
alarm set to ALARM to see whether its notification was published. What the account does not
answer (an API not allowed, an endpoint that does not implement it) is said as such, never
guessed.

Long on purpose: one check per thing a first deploy needs from the account, each with the
advice it prints; docs/deploy.md lists them in the same order.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
from functions.shared.errors import UmavezError
from functions.shared.provider_api import ProviderApiRefusedError
from infra.config import (
    PROCESS_MAX_CONCURRENCY_RANGE,
    PROVIDERS,
    ApiType,
    ConfigError,
    sender_identities,
)
from infra.settings import (
    BOOTSTRAP_VERSION_PARAMETER,
    TEST_ALARM,
    concurrency_needed,
    pinned_powertools_version,
    powertools_layer_parameter,
)
from ops.asaas_webhooks import advice, no_webhook_to_umavez, read_webhooks

# The oldest bootstrap the synthesized template accepts (its CheckBootstrapVersion rule refuses
# 1 to 5); the parameter is CDK's default bootstrap qualifier's (infra/settings.py).
MIN_BOOTSTRAP_VERSION: Final = 6
DEFAULT_PROCESS_MAX_CONCURRENCY: Final = 5
# The alarm `--test-alarm` sets (TEST_ALARM, named `<stack>-DeadLetters`): its runbook entry is
# the one an operator knows first.
TEST_ALARM_REASON: Final = (
    "umavez preflight: a test of the alarm topic; back to OK at its next evaluation"
)


API_LOGGING_ROLE: Final = "api gateway logging role"
ASAAS_WEBHOOKS: Final = "asaas webhooks"
STRIPE_EVENT_SOURCE: Final = "stripe event source"


class Verdict(StrEnum):
    OK = "ok"
    PROBLEM = "PROBLEM"  # the deploy, or the stack once deployed, would not work as it should
    NOTE = "note"  # worth knowing; nothing is wrong
    UNKNOWN = "unknown"  # the account did not answer: checked by hand (docs/deploy.md)


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: Verdict
    detail: str


class PreflightError(Exception):
    """The checks cannot run at all (no credentials, no region, no endpoint): one line says
    what to do."""


Clients = Callable[[str], Any]


@dataclass(frozen=True)
class Options:
    stack_name: str
    providers: tuple[str, ...] = PROVIDERS
    # Before the deploy, what the stack will be deployed with; after it, its outputs say.
    email_sender: str | None = None
    email_configuration_set: str | None = None
    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    test_alarm: bool = False
    alarm_wait_seconds: float = 90.0
    poll_seconds: float = 5.0
    asaas_api_url: str = ASAAS_BASE_URL


@dataclass(frozen=True)
class Stack:
    """A deployed stack, as its outputs describe it."""

    outputs: dict[str, str]


class _Unanswered(Exception):
    """A call the account would not answer; its finding says so."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.detail)
        self.finding = finding


class Preflight:
    def __init__(
        self,
        clients: Clients,
        options: Options,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._clients = clients
        self._options = options
        self._sleep = sleep
        self._clock = clock

    def run(self) -> list[Finding]:
        findings = [self._guarded("bootstrap", self._bootstrap)]
        findings.append(self._guarded("powertools layer", self._powertools_layer))
        stack = self._stack()
        findings.append(self._guarded("lambda concurrency", lambda: self._concurrency(stack)))
        findings.append(self._guarded(API_LOGGING_ROLE, lambda: self._api_logging_role(stack)))
        findings += self._ses(stack)
        if stack is None:
            findings.append(
                Finding(
                    "stack",
                    Verdict.NOTE,
                    f"{self._options.stack_name} is not deployed yet: after `cdk deploy`, run"
                    " preflight again for its secrets and alarms",
                )
            )
            return findings
        findings += self._secrets(stack)
        if "asaas" in self._options.providers:
            findings.append(self._guarded(ASAAS_WEBHOOKS, lambda: self._asaas_webhooks(stack)))
        if stack.outputs.get("StripeEventSource"):
            findings.append(
                self._guarded(STRIPE_EVENT_SOURCE, lambda: self._stripe_event_source(stack))
            )
        findings.append(self._guarded("alarm subscription", lambda: self._subscribed(stack)))
        if self._options.test_alarm:
            findings.append(self._guarded("alarm reaches the topic", lambda: self._alarm(stack)))
        else:
            findings.append(
                Finding(
                    "alarm reaches the topic",
                    Verdict.NOTE,
                    "not tested: pass --test-alarm to set one alarm to ALARM and see its"
                    " notification published (the subscribers get one e-mail)",
                )
            )
        return findings

    # -- the account -----------------------------------------------------------------------

    def _bootstrap(self) -> Finding:
        try:
            value = self._call(
                "ssm", "get_parameter", "ssm:GetParameter", Name=BOOTSTRAP_VERSION_PARAMETER
            )["Parameter"]["Value"]
        except _Missing:
            return Finding(
                "bootstrap",
                Verdict.PROBLEM,
                "this account and region are not bootstrapped for CDK: run `npx cdk bootstrap`",
            )
        if int(value) < MIN_BOOTSTRAP_VERSION:
            return Finding(
                "bootstrap",
                Verdict.PROBLEM,
                f"CDK bootstrap version {value}, the template needs {MIN_BOOTSTRAP_VERSION} or"
                " later: run `npx cdk bootstrap` again",
            )
        return Finding("bootstrap", Verdict.OK, f"CDK bootstrap version {value}")

    def _powertools_layer(self) -> Finding:
        version = pinned_powertools_version()
        name = powertools_layer_parameter(version)
        try:
            arn = self._call("ssm", "get_parameter", "ssm:GetParameter", Name=name)["Parameter"][
                "Value"
            ]
        except _Missing:
            return Finding(
                "powertools layer",
                Verdict.PROBLEM,
                f"AWS has not published Powertools {version} here ({name}): the deploy would"
                " fail; deploy in another region, or pin a release published here",
            )
        return Finding("powertools layer", Verdict.OK, f"Powertools {version}: {arn}")

    def _concurrency(self, stack: Stack | None) -> Finding:
        process = self._options.process_max_concurrency
        if stack and stack.outputs.get("ProcessMaxConcurrency", "").isdigit():
            process = int(stack.outputs["ProcessMaxConcurrency"])
        needed = concurrency_needed(process)
        settings = self._call("lambda", "get_account_settings", "lambda:GetAccountSettings")
        limit = settings["AccountLimit"]
        unreserved = int(limit.get("UnreservedConcurrentExecutions", 0))
        total = sum(needed.values())
        parts = ", ".join(f"{name} {n}" for name, n in needed.items())
        if unreserved < total:
            return Finding(
                "lambda concurrency",
                Verdict.PROBLEM,
                f"the account leaves {unreserved} concurrent executions to unreserved functions"
                f" (of {limit.get('ConcurrentExecutions')}); the stack may use {total} at the"
                f" API's limit ({parts}): request an increase of the Lambda quota 'Concurrent"
                " executions' in Service Quotas (new accounts may start at 10)",
            )
        return Finding(
            "lambda concurrency",
            Verdict.OK,
            f"{unreserved} unreserved concurrent executions; the stack may use {total} ({parts})",
        )

    def _api_logging_role(self, stack: Stack | None) -> Finding:
        """A REST API logs with the role the region's API Gateway account names (the stack
        does not set it: it is every REST API's of the region). Without it the stage's create
        fails and the deploy rolls back."""
        if stack is not None and stack.outputs.get("ApiType") == ApiType.HTTP.value:
            return Finding(
                API_LOGGING_ROLE, Verdict.NOTE, "an HTTP API: its access logs need no such role"
            )
        account = self._call("apigateway", "get_account", "apigateway:GET")
        role = account.get("cloudwatchRoleArn")
        if not role:
            return Finding(
                API_LOGGING_ROLE,
                Verdict.PROBLEM,
                "the region's API Gateway account names no CloudWatch role: a REST API's stage"
                " (prod's default) fails to create ('CloudWatch Logs role ARN must be set in"
                " account settings to enable logging') and the deploy rolls back. Set it once"
                " per region (docs/deploy.md, API Gateway's CloudWatch role), or deploy an HTTP"
                " API with -c allowUnprotectedProd=true",
            )
        return Finding(API_LOGGING_ROLE, Verdict.OK, f"REST stages log with {role}")

    def _ses(self, stack: Stack | None) -> list[Finding]:
        outputs = stack.outputs if stack else {}
        sender = outputs.get("EmailSender") or self._options.email_sender
        configuration_set = (
            outputs.get("EmailConfigurationSet") or self._options.email_configuration_set
        )
        if not sender:
            return [
                Finding(
                    "ses",
                    Verdict.NOTE,
                    "no emailSender: notifications go to EventBridge (and notifyUrl) only",
                )
            ]
        return [
            self._guarded("ses account", self._ses_account),
            self._guarded("ses identity", lambda: self._ses_identity(sender, configuration_set)),
        ]

    def _ses_account(self) -> Finding:
        account = self._call("sesv2", "get_account", "ses:GetAccount")
        quota = account.get("SendQuota", {})
        if not account.get("SendingEnabled", True):
            return Finding(
                "ses account", Verdict.PROBLEM, "sending is paused for this account in SES"
            )
        if not account.get("ProductionAccessEnabled"):
            return Finding(
                "ses account",
                Verdict.PROBLEM,
                "SES is in the sandbox here: only verified recipients, at most"
                f" {quota.get('Max24HourSend', 200):.0f} a day; customers' e-mails are refused,"
                " backed off and given up after outboxGiveUpHours. Request production access"
                " (SES console > Account dashboard)",
            )
        return Finding(
            "ses account",
            Verdict.OK,
            f"production access; {quota.get('MaxSendRate', 0):.0f} e-mails a second,"
            f" {quota.get('Max24HourSend', 0):.0f} a day",
        )

    def _ses_identity(self, sender: str, configuration_set: str | None) -> Finding:
        try:
            # The bare address, then its domain: a display name is no identity of SES's.
            candidates = sender_identities(sender)
        except ConfigError as malformed:
            return Finding("ses identity", Verdict.PROBLEM, str(malformed))
        identity = None
        for candidate in candidates:
            try:
                identity = self._call(
                    "sesv2", "get_email_identity", "ses:GetEmailIdentity", EmailIdentity=candidate
                )
            except _Missing:
                continue
            if _verified(identity):
                break
        if identity is None or not _verified(identity):
            return Finding(
                "ses identity",
                Verdict.PROBLEM,
                f"neither {sender} nor its domain is a verified SES identity here: verify one"
                " (SES console > Identities) before customers' e-mails can leave",
            )
        default_set = identity.get("ConfigurationSetName")
        # A set named on each send overrides the identity's default (and is the one granted).
        if default_set and not configuration_set:
            return Finding(
                "ses identity",
                Verdict.PROBLEM,
                f"the identity sends with the configuration set {default_set!r}, which the"
                " senders are not granted: deploy with"
                f" -c emailConfigurationSet={default_set} (every e-mail is AccessDenied"
                " otherwise)",
            )
        return Finding("ses identity", Verdict.OK, f"{sender} may send (verified)")

    # -- the deployed stack ----------------------------------------------------------------

    def _stack(self) -> Stack | None:
        name = self._options.stack_name
        try:
            [described] = self._call(
                "cloudformation", "describe_stacks", "cloudformation:DescribeStacks", StackName=name
            )["Stacks"]
        except _Missing:
            return None
        return Stack({o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])})

    def _secrets(self, stack: Stack) -> list[Finding]:
        wanted: list[tuple[str, str, Verdict]] = []
        for provider in self._options.providers:
            name = stack.outputs.get(f"Secret{provider.capitalize()}")
            if name:
                why = f"ingest answers 503 to every {provider} webhook until it is set"
                wanted.append((name, why, Verdict.PROBLEM))
        if "mercadopago" in self._options.providers and (
            name := stack.outputs.get("SecretMercadopagoAccessToken")
        ):
            why = "every Mercado Pago notification fails (the payment is read with it)"
            wanted.append((name, why, Verdict.PROBLEM))
        if "asaas" in self._options.providers and (name := stack.outputs.get("SecretAsaasApiKey")):
            why = "every Asaas webhook fails (its payment is read with it)"
            wanted.append((name, why, Verdict.PROBLEM))
        if "stripe" in self._options.providers and (
            name := stack.outputs.get("SecretStripeApiKey")
        ):
            why = "needed only by endpoints on a Stripe API version before 2024-10-28.acacia"
            wanted.append((name, why, Verdict.NOTE))
        if name := stack.outputs.get("SecretNotifySigning"):
            why = "nothing is sent to notifyUrl unsigned: every HTTP notification backs off"
            wanted.append((name, why, Verdict.PROBLEM))
        return [
            self._guarded(f"secret {name}", functools.partial(self._secret, *secret))
            for secret in wanted
            for name in secret[:1]
        ]

    def _secret(self, name: str, why: str, unset: Verdict) -> Finding:
        """Set or not, told from the secret's versions, never its value: the stack creates it
        with one (its placeholder), and an operator's put-secret-value adds the next. The live
        keys are never read for it (the Asaas webhooks check reads Asaas's, to ask Asaas)."""
        described = self._call(
            "secretsmanager", "describe_secret", "secretsmanager:DescribeSecret", SecretId=name
        )
        if len(described.get("VersionIdsToStages", {})) <= 1:
            return Finding(f"secret {name}", unset, f"not set: {why} (docs/deploy.md)")
        return Finding(f"secret {name}", Verdict.OK, "set")

    def _asaas_webhooks(self, stack: Stack) -> Finding:
        """Asaas's webhooks API, with the stack's key (read: the one secret preflight reads,
        for Asaas answers only to it): umavez's webhook exists, is enabled, and its queue is
        not interrupted (ops/asaas_webhooks.py)."""
        name = stack.outputs.get("SecretAsaasApiKey")
        if not name:
            return Finding(ASAAS_WEBHOOKS, Verdict.PROBLEM, "the stack has no SecretAsaasApiKey")
        key = self._call(
            "secretsmanager", "get_secret_value", "secretsmanager:GetSecretValue", SecretId=name
        )["SecretString"]
        try:
            state = read_webhooks(lambda: str(key), self._options.asaas_api_url)
        except ProviderApiRefusedError as exc:
            return Finding(ASAAS_WEBHOOKS, Verdict.PROBLEM, f"{exc}: the key in {name} is wrong")
        except UmavezError as exc:
            return Finding(ASAAS_WEBHOOKS, Verdict.UNKNOWN, f"not answered: {exc}")
        if not state.configured:
            return Finding(ASAAS_WEBHOOKS, Verdict.NOTE, f"not read: {name} is not set yet")
        if not state.umavez:
            return Finding(ASAAS_WEBHOOKS, Verdict.PROBLEM, no_webhook_to_umavez(state))
        if state.stopped:
            now = self._clock()
            return Finding(
                ASAAS_WEBHOOKS, Verdict.PROBLEM, "; ".join(advice(w, now) for w in state.stopped)
            )
        shown = ", ".join(f"{w.shown()} to {w.url}" for w in state.umavez)
        return Finding(ASAAS_WEBHOOKS, Verdict.OK, f"{shown}: enabled, queue running")

    def _stripe_event_source(self, stack: Stack) -> Finding:
        """With `stripeIngress=eventbridge|both`: the partner event source Stripe's destination
        created exists and the stack's bus associates it (ACTIVE); a pending one delivers
        nothing, and AWS deletes it 7 days after its creation."""
        source = stack.outputs["StripeEventSource"]
        try:
            found = self._call(
                "events", "describe_event_source", "events:DescribeEventSource", Name=source
            )
        except _Missing:
            return Finding(
                STRIPE_EVENT_SOURCE,
                Verdict.PROBLEM,
                f"{source} does not exist in this account and region: create the Stripe event "
                "destination for it (Workbench > Event destinations > Amazon EventBridge), or "
                "deploy with the source it created (-c stripeEventSource=...)",
            )
        state = str(found.get("State", ""))
        if state == "ACTIVE":
            return Finding(STRIPE_EVENT_SOURCE, Verdict.OK, f"{source}: associated (ACTIVE)")
        return Finding(
            STRIPE_EVENT_SOURCE,
            Verdict.PROBLEM,
            f"{source} is {state or 'in no state'}: no Stripe event reaches the stack. PENDING: "
            "deploy the stack (its bus associates the source) within 7 days of the "
            "destination's creation; DELETED: create a new destination and deploy with its "
            "source",
        )

    def _subscribed(self, stack: Stack) -> Finding:
        topic = stack.outputs.get("AlarmTopicArn")
        if not topic:
            return Finding("alarm subscription", Verdict.PROBLEM, "the stack has no AlarmTopicArn")
        subscriptions = self._call(
            "sns", "list_subscriptions_by_topic", "sns:ListSubscriptionsByTopic", TopicArn=topic
        )["Subscriptions"]
        confirmed = [s for s in subscriptions if s["SubscriptionArn"].startswith("arn:")]
        if not confirmed:
            pending = len(subscriptions)
            return Finding(
                "alarm subscription",
                Verdict.PROBLEM,
                f"nobody receives the alarms: {pending} subscription(s), none confirmed. Confirm"
                " the e-mail AWS sent to alarmEmail, or subscribe a pager to AlarmTopicArn",
            )
        endpoints = ", ".join(sorted(f"{s['Protocol']}:{s['Endpoint']}" for s in confirmed))
        return Finding("alarm subscription", Verdict.OK, f"confirmed: {endpoints}")

    def _alarm(self, stack: Stack) -> Finding:
        check = "alarm reaches the topic"
        alarm = f"{self._options.stack_name}-{TEST_ALARM}"
        found = self._call(
            "cloudwatch", "describe_alarms", "cloudwatch:DescribeAlarms", AlarmNames=[alarm]
        )["MetricAlarms"]
        if not found:
            return Finding(check, Verdict.PROBLEM, f"the stack has no alarm {alarm} to test")
        if found[0].get("StateValue") == "ALARM":
            # Actions run on a change of state: from ALARM to ALARM nothing would be sent.
            self._call(
                "cloudwatch",
                "set_alarm_state",
                "cloudwatch:SetAlarmState",
                AlarmName=alarm,
                StateValue="OK",
                StateReason=TEST_ALARM_REASON,
            )
        started = datetime.fromtimestamp(self._clock(), tz=UTC) - timedelta(seconds=5)
        self._call(
            "cloudwatch",
            "set_alarm_state",
            "cloudwatch:SetAlarmState",
            AlarmName=alarm,
            StateValue="ALARM",
            StateReason=TEST_ALARM_REASON,
        )
        deadline = self._clock() + self._options.alarm_wait_seconds
        while True:
            items = self._call(
                "cloudwatch",
                "describe_alarm_history",
                "cloudwatch:DescribeAlarmHistory",
                AlarmName=alarm,
                HistoryItemType="Action",
                StartDate=started,
            )["AlarmHistoryItems"]
            for item in items:
                summary = item.get("HistorySummary", "")
                if summary.startswith("Successfully executed action"):
                    return Finding(check, Verdict.OK, f"{alarm}: {summary}")
                if summary.startswith("Failed to execute action"):
                    return Finding(
                        check,
                        Verdict.PROBLEM,
                        f"{alarm}: {summary}: {_history_error(item)}. No alarm reaches anyone:"
                        " check the topic's policy and key policy (docs/deploy.md)",
                    )
            if self._clock() >= deadline:
                return Finding(
                    check,
                    Verdict.UNKNOWN,
                    f"{alarm} was set to ALARM but no action was recorded within"
                    f" {self._options.alarm_wait_seconds:.0f} s: look at its history in the"
                    " CloudWatch console",
                )
            self._sleep(self._options.poll_seconds)

    # -- calls -----------------------------------------------------------------------------

    def _guarded(self, check: str, run: Callable[[], Finding]) -> Finding:
        try:
            return run()
        except _Unanswered as unanswered:
            return Finding(check, unanswered.finding.verdict, unanswered.finding.detail)
        except _Missing as missing:
            return Finding(check, Verdict.PROBLEM, f"does not exist ({missing})")

    def _call(self, service: str, operation: str, action: str, **params: Any) -> Any:
        """One call; a resource that does not exist is _Missing, anything else the account
        will not answer is _Unanswered (its finding names the IAM action), and missing
        credentials, region or endpoint stop the run (PreflightError)."""
        try:
            return getattr(self._clients(service), operation)(**params)
        except (NoCredentialsError, NoRegionError) as exc:
            raise PreflightError(
                f"{exc}: run `aws configure` (or `aws sso login`), or pass --profile and --region"
            ) from exc
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = exc.response.get("Error", {}).get("Message", "")
            if code in MISSING_CODES or (code == "ValidationError" and "does not exist" in message):
                raise _Missing(code) from exc
            if "AccessDenied" in code or code in {"UnauthorizedOperation", "AuthorizationError"}:
                detail = f"not allowed to call {action}: {message}"
            else:
                detail = f"{action} was not answered ({code}): {message}"
            raise _Unanswered(Finding("", Verdict.UNKNOWN, detail)) from exc
        except BotoCoreError as exc:
            raise PreflightError(f"cannot reach AWS: {exc}") from exc


class _Missing(Exception):
    """The resource asked for does not exist."""


MISSING_CODES: Final = frozenset(
    {"ParameterNotFound", "NotFoundException", "ResourceNotFoundException", "NotFound"}
)


def _verified(identity: dict[str, Any]) -> bool:
    return bool(
        identity.get("VerifiedForSendingStatus") or identity.get("VerificationStatus") == "SUCCESS"
    )


def _history_error(item: dict[str, Any]) -> str:
    try:
        data = json.loads(item.get("HistoryData", "{}"))
    except ValueError:
        return str(item.get("HistoryData", ""))
    return str(data.get("error") or data.get("actionState") or data)


# -- the command ---------------------------------------------------------------------------


def add_parser(commands: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        "preflight",
        help="check the account before and after `cdk deploy` (docs/deploy.md)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--stack-name", required=True, help="e.g. Umavez-prod")
    parser.add_argument("--region", help="default: the profile's or AWS_REGION")
    parser.add_argument("--profile", help="an AWS CLI profile")
    parser.add_argument(
        "--providers",
        default=",".join(PROVIDERS),
        help="the providers you use, comma-separated (their secrets must be set)",
    )
    parser.add_argument("--email-sender", help="before the deploy: the emailSender you will pass")
    parser.add_argument(
        "--email-configuration-set", help="before the deploy: the emailConfigurationSet"
    )
    parser.add_argument(
        "--process-max-concurrency",
        type=int,
        default=DEFAULT_PROCESS_MAX_CONCURRENCY,
        choices=range(PROCESS_MAX_CONCURRENCY_RANGE[0], PROCESS_MAX_CONCURRENCY_RANGE[1] + 1),
        metavar="N",
        help="before the deploy: the processMaxConcurrency you will pass (default: 5)",
    )
    parser.add_argument(
        "--test-alarm",
        action="store_true",
        help="after the deploy: set the DeadLetters alarm to ALARM and see it published",
    )
    parser.add_argument(
        "--asaas-api-url",
        default=ASAAS_BASE_URL,
        help="after the deploy: Asaas's API, whose webhooks are read (default: %(default)s)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    return parser


def command(args: argparse.Namespace, clients: Clients | None = None) -> int:
    """Prints one line per check; exits 1 when something must be fixed, 2 when nothing could
    be checked."""
    providers = tuple(p.strip() for p in args.providers.split(",") if p.strip())
    unknown = sorted(set(providers) - set(PROVIDERS))
    if unknown:
        print(f"umavez preflight: unknown provider(s) {', '.join(unknown)}; one of {PROVIDERS}")
        return 2
    options = Options(
        stack_name=args.stack_name,
        providers=providers,
        email_sender=args.email_sender,
        email_configuration_set=args.email_configuration_set,
        process_max_concurrency=args.process_max_concurrency,
        test_alarm=args.test_alarm,
        asaas_api_url=args.asaas_api_url,
    )
    try:
        findings = Preflight(clients or session_clients(args.profile, args.region), options).run()
    except PreflightError as exc:
        print(f"umavez preflight: {exc}")
        return 2
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=2))
    else:
        for line in report(findings):
            print(line)
    if any(f.verdict is Verdict.PROBLEM for f in findings):
        return 1
    answered = [f for f in findings if f.verdict is not Verdict.UNKNOWN]
    return 0 if answered else 2


def report(findings: Sequence[Finding]) -> Iterator[str]:
    width = max(len(f.check) for f in findings)
    for finding in findings:
        yield f"{finding.verdict.value:<8} {finding.check:<{width}}  {finding.detail}"
    problems = sum(f.verdict is Verdict.PROBLEM for f in findings)
    unknown = sum(f.verdict is Verdict.UNKNOWN for f in findings)
    yield (
        f"{problems} problem(s), {unknown} not answered"
        + (": fix each PROBLEM above, then run preflight again" if problems else "")
    )


def session_clients(profile: str | None, region: str | None) -> Clients:
    """Clients of one AWS session (the profile's credentials and region), made once each."""
    try:
        import boto3

        session = boto3.Session(profile_name=profile, region_name=region)
    except BotoCoreError as exc:  # e.g. a profile that does not exist
        raise PreflightError(str(exc)) from exc
    made: dict[str, Any] = {}

    def client(service: str) -> Any:
        if service not in made:
            try:
                made[service] = session.client(service)  # type: ignore[call-overload]
            except NoRegionError as exc:
                raise PreflightError("no region: pass --region or set AWS_REGION") from exc
        return made[service]

    return client
