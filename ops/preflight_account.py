"""Preflight's checks of the account, before the deploy and after it: CDK's bootstrap, AWS's
Powertools layer parameter in the region, the account's Lambda concurrency against what the
stack may use, API Gateway's logging role, and SES (production access, the sender's identity
verified, its configuration set)."""

from __future__ import annotations

from typing import Any, Final

from infra.config import ApiType, ConfigError, sender_identities
from infra.settings import (
    BOOTSTRAP_VERSION_PARAMETER,
    concurrency_needed,
    pinned_powertools_version,
    powertools_layer_parameter,
)
from ops.preflight_calls import AccountCalls, Finding, Missing, Options, Stack, Verdict

# The oldest bootstrap the synthesized template accepts (its CheckBootstrapVersion rule refuses
# 1 to 5); the parameter is CDK's default bootstrap qualifier's (infra/settings.py).
MIN_BOOTSTRAP_VERSION: Final = 6
API_LOGGING_ROLE: Final = "api gateway logging role"


class AccountChecks:
    """One finding per check of the account, each with the advice it prints."""

    def __init__(self, calls: AccountCalls, options: Options) -> None:
        self._calls = calls
        self._options = options

    def bootstrap(self) -> Finding:
        try:
            value = self._calls.call(
                "ssm", "get_parameter", "ssm:GetParameter", Name=BOOTSTRAP_VERSION_PARAMETER
            )["Parameter"]["Value"]
        except Missing:
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

    def powertools_layer(self) -> Finding:
        version = pinned_powertools_version()
        name = powertools_layer_parameter(version)
        try:
            arn = self._calls.call("ssm", "get_parameter", "ssm:GetParameter", Name=name)[
                "Parameter"
            ]["Value"]
        except Missing:
            return Finding(
                "powertools layer",
                Verdict.PROBLEM,
                f"AWS has not published Powertools {version} here ({name}): the deploy would"
                " fail; deploy in another region, or pin a release published here",
            )
        return Finding("powertools layer", Verdict.OK, f"Powertools {version}: {arn}")

    def concurrency(self, stack: Stack | None) -> Finding:
        process = self._options.process_max_concurrency
        if stack and stack.outputs.get("ProcessMaxConcurrency", "").isdigit():
            process = int(stack.outputs["ProcessMaxConcurrency"])
        needed = concurrency_needed(process)
        settings = self._calls.call("lambda", "get_account_settings", "lambda:GetAccountSettings")
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

    def api_logging_role(self, stack: Stack | None) -> Finding:
        """A REST API logs with the role the region's API Gateway account names (the stack
        does not set it: it is every REST API's of the region). Without it the stage's create
        fails and the deploy rolls back."""
        if stack is not None and stack.outputs.get("ApiType") == ApiType.HTTP.value:
            return Finding(
                API_LOGGING_ROLE, Verdict.NOTE, "an HTTP API: its access logs need no such role"
            )
        account = self._calls.call("apigateway", "get_account", "apigateway:GET")
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

    def ses(self, stack: Stack | None) -> list[Finding]:
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
            self._calls.guarded("ses account", self.ses_account),
            self._calls.guarded(
                "ses identity", lambda: self.ses_identity(sender, configuration_set)
            ),
        ]

    def ses_account(self) -> Finding:
        account = self._calls.call("sesv2", "get_account", "ses:GetAccount")
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

    def ses_identity(self, sender: str, configuration_set: str | None) -> Finding:
        try:
            # The bare address, then its domain: a display name is no identity of SES's.
            candidates = sender_identities(sender)
        except ConfigError as malformed:
            return Finding("ses identity", Verdict.PROBLEM, str(malformed))
        identity = None
        for candidate in candidates:
            try:
                identity = self._calls.call(
                    "sesv2", "get_email_identity", "ses:GetEmailIdentity", EmailIdentity=candidate
                )
            except Missing:
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


def _verified(identity: dict[str, Any]) -> bool:
    return bool(
        identity.get("VerifiedForSendingStatus") or identity.get("VerificationStatus") == "SUCCESS"
    )
