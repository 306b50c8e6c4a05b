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
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from typing import Any

from botocore.exceptions import BotoCoreError, NoRegionError

from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
from infra.config import PROCESS_MAX_CONCURRENCY_RANGE, PROVIDERS
from ops.preflight_account import API_LOGGING_ROLE, AccountChecks
from ops.preflight_calls import (
    DEFAULT_PROCESS_MAX_CONCURRENCY,
    AccountCalls,
    Clients,
    Finding,
    Options,
    PreflightError,
    Verdict,
)
from ops.preflight_stack import ASAAS_WEBHOOKS, STRIPE_EVENT_SOURCE, StackChecks


class Preflight:
    def __init__(
        self,
        clients: Clients,
        options: Options,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._options = options
        calls = AccountCalls(clients)
        self._guarded = calls.guarded
        self._account = AccountChecks(calls, options)
        self._deployed = StackChecks(calls, options, sleep=sleep, clock=clock)

    def run(self) -> list[Finding]:
        findings = [self._guarded("bootstrap", self._account.bootstrap)]
        findings.append(self._guarded("powertools layer", self._account.powertools_layer))
        stack = self._deployed.deployed()
        findings.append(
            self._guarded("lambda concurrency", lambda: self._account.concurrency(stack))
        )
        findings.append(
            self._guarded(API_LOGGING_ROLE, lambda: self._account.api_logging_role(stack))
        )
        findings += self._account.ses(stack)
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
        findings += self._deployed.secrets(stack)
        if "asaas" in self._options.providers:
            findings.append(
                self._guarded(ASAAS_WEBHOOKS, lambda: self._deployed.asaas_webhooks(stack))
            )
        if stack.outputs.get("StripeEventSource"):
            findings.append(
                self._guarded(
                    STRIPE_EVENT_SOURCE, lambda: self._deployed.stripe_event_source(stack)
                )
            )
        findings.append(
            self._guarded("alarm subscription", lambda: self._deployed.subscribed(stack))
        )
        if self._options.test_alarm:
            findings.append(
                self._guarded("alarm reaches the topic", lambda: self._deployed.alarm(stack))
            )
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
