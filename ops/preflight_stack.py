"""Preflight's checks of the deployed stack: the secrets it created never set since (their
placeholder), Asaas's webhooks (read with the stack's Asaas key, when one is set: umavez's must
exist, be enabled and its queue running), Stripe's partner event source, a confirmed
subscription on the alarm topic, and (`--test-alarm`) one alarm set to ALARM to see whether its
notification was published."""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from functions.shared.errors import UmavezError
from functions.shared.provider_api import ProviderApiRefusedError
from infra.settings import TEST_ALARM
from ops.asaas_webhooks import advice, no_webhook_to_umavez, read_webhooks
from ops.preflight_calls import AccountCalls, Finding, Missing, Options, Stack, Verdict

# The alarm `--test-alarm` sets (TEST_ALARM, named `<stack>-DeadLetters`): its runbook entry is
# the one an operator knows first.
TEST_ALARM_REASON: Final = (
    "umavez preflight: a test of the alarm topic; back to OK at its next evaluation"
)

ASAAS_WEBHOOKS: Final = "asaas webhooks"
STRIPE_EVENT_SOURCE: Final = "stripe event source"


class StackChecks:
    """One finding per check of the deployed stack, each with the advice it prints."""

    def __init__(
        self,
        calls: AccountCalls,
        options: Options,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._calls = calls
        self._options = options
        self._sleep = sleep
        self._clock = clock

    def deployed(self) -> Stack | None:
        name = self._options.stack_name
        try:
            [described] = self._calls.call(
                "cloudformation", "describe_stacks", "cloudformation:DescribeStacks", StackName=name
            )["Stacks"]
        except Missing:
            return None
        return Stack({o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])})

    def secrets(self, stack: Stack) -> list[Finding]:
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
            self._calls.guarded(f"secret {name}", functools.partial(self.secret, *secret))
            for secret in wanted
            for name in secret[:1]
        ]

    def secret(self, name: str, why: str, unset: Verdict) -> Finding:
        """Set or not, told from the secret's versions, never its value: the stack creates it
        with one (its placeholder), and an operator's put-secret-value adds the next. The live
        keys are never read for it (the Asaas webhooks check reads Asaas's, to ask Asaas)."""
        described = self._calls.call(
            "secretsmanager", "describe_secret", "secretsmanager:DescribeSecret", SecretId=name
        )
        if len(described.get("VersionIdsToStages", {})) <= 1:
            return Finding(f"secret {name}", unset, f"not set: {why} (docs/deploy.md)")
        return Finding(f"secret {name}", Verdict.OK, "set")

    def asaas_webhooks(self, stack: Stack) -> Finding:
        """Asaas's webhooks API, with the stack's key (read: the one secret preflight reads,
        for Asaas answers only to it): umavez's webhook exists, is enabled, and its queue is
        not interrupted (ops/asaas_webhooks.py)."""
        name = stack.outputs.get("SecretAsaasApiKey")
        if not name:
            return Finding(ASAAS_WEBHOOKS, Verdict.PROBLEM, "the stack has no SecretAsaasApiKey")
        key = self._calls.call(
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

    def stripe_event_source(self, stack: Stack) -> Finding:
        """With `stripeIngress=eventbridge|both`: the partner event source Stripe's destination
        created exists and the stack's bus associates it (ACTIVE); a pending one delivers
        nothing, and AWS deletes it 7 days after its creation."""
        source = stack.outputs["StripeEventSource"]
        try:
            found = self._calls.call(
                "events", "describe_event_source", "events:DescribeEventSource", Name=source
            )
        except Missing:
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

    def subscribed(self, stack: Stack) -> Finding:
        topic = stack.outputs.get("AlarmTopicArn")
        if not topic:
            return Finding("alarm subscription", Verdict.PROBLEM, "the stack has no AlarmTopicArn")
        subscriptions = self._calls.call(
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

    def alarm(self, stack: Stack) -> Finding:
        check = "alarm reaches the topic"
        alarm = f"{self._options.stack_name}-{TEST_ALARM}"
        found = self._calls.call(
            "cloudwatch", "describe_alarms", "cloudwatch:DescribeAlarms", AlarmNames=[alarm]
        )["MetricAlarms"]
        if not found:
            return Finding(check, Verdict.PROBLEM, f"the stack has no alarm {alarm} to test")
        if found[0].get("StateValue") == "ALARM":
            # Actions run on a change of state: from ALARM to ALARM nothing would be sent.
            self._calls.call(
                "cloudwatch",
                "set_alarm_state",
                "cloudwatch:SetAlarmState",
                AlarmName=alarm,
                StateValue="OK",
                StateReason=TEST_ALARM_REASON,
            )
        started = datetime.fromtimestamp(self._clock(), tz=UTC) - timedelta(seconds=5)
        self._calls.call(
            "cloudwatch",
            "set_alarm_state",
            "cloudwatch:SetAlarmState",
            AlarmName=alarm,
            StateValue="ALARM",
            StateReason=TEST_ALARM_REASON,
        )
        deadline = self._clock() + self._options.alarm_wait_seconds
        while True:
            items = self._calls.call(
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


def _history_error(item: dict[str, Any]) -> str:
    try:
        data = json.loads(item.get("HistoryData", "{}"))
    except ValueError:
        return str(item.get("HistoryData", ""))
    return str(data.get("error") or data.get("actionState") or data)
