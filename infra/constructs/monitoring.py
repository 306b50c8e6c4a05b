"""Alarms (each one has a runbook entry in the README) and a dashboard; alarms go to SNS."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from functions.shared.observability import METRICS_NAMESPACE
from infra.constructs.api import WebhookApi
from infra.constructs.pipeline import Pipeline

FIVE_MINUTES = cdk.Duration.minutes(5)
PROCESS_OUTCOMES = (
    "applied",
    "duplicate",
    "stale",
    "voided",
    "bound",
    "conflict",
    "waiting",
    "ignored",
    "unroutable",
    "retried",
    "failed",
)


def app_metric(
    service: str, name: str, period: cdk.Duration = FIVE_MINUTES, statistic: str = "Sum"
) -> cloudwatch.Metric:
    """A metric the functions publish through Powertools (EMF, dimension `service`)."""
    return cloudwatch.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
    )


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: Pipeline,
        api: WebhookApi,
        alarm_email: str | None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.topic = sns.Topic(
            self,
            "Alarms",
            display_name="umavez alarms",
            enforce_ssl=True,
            master_key=kms.Alias.from_alias_name(self, "SnsKey", "alias/aws/sns"),
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        p = pipeline

        self._alarm(
            "DeadLetters",
            "Webhooks failed 5 times: see runbook 'DeadLetters'",
            p.queues.dead_letters.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum"
            ),
        )
        self._alarm(
            "OutboxStreamFailures",
            "Stream gave up on outbox records (sweeper continues)",
            p.outbox_failures.metric_approximate_number_of_messages_visible(
                period=cdk.Duration.minutes(1), statistic="Maximum"
            ),
        )
        self._alarm(
            "OutboxIteratorAge",
            "The outbox stream is falling behind",
            p.outbox.metric("IteratorAge", statistic="Maximum", period=FIVE_MINUTES),
            threshold=5 * 60 * 1000,
        )
        for name, function in self._functions(p):
            self._alarm(
                f"{name}Errors",
                f"{name} Lambda errors",
                function.metric_errors(period=FIVE_MINUTES),
            )
            self._alarm(
                f"{name}Throttles",
                f"{name} Lambda throttles",
                function.metric_throttles(period=FIVE_MINUTES),
            )
        self._alarm(
            "ProcessFailed",
            "Records failed for a non-transient reason (heading to the DLQ)",
            app_metric("process", "failed"),
        )
        self._alarm(
            "DuplicateSurge",
            "Providers are retrying a lot: is ingest slower than their timeout?",
            app_metric("process", "duplicate"),
            threshold=100,
        )
        self._alarm(
            "WaitingOverAnHour",
            "A delivery has waited over an hour for the order its payment belongs to",
            app_metric("waiting", "waiting_over_an_hour", statistic="Maximum"),
        )
        self._alarm(
            "UnmatchedPayments",
            "Money nobody could route after 3 days: attach it to its order",
            app_metric("waiting", "unmatched_open", statistic="Maximum"),
        )
        self._alarm(
            "PaymentConflicts",
            "An event named a payment for another order than the one it is bound to",
            app_metric("process", "conflict"),
        )
        self._alarm(
            "AmountDisagreements",
            "Two event types named one payment or refund with different amounts",
            app_metric("process", "amount_disagreements"),
        )
        self._alarm(
            "StaleSurge",
            "Many events arrive out of order",
            app_metric("process", "stale"),
            threshold=100,
        )
        self._alarm(
            "SignatureFailures",
            "Many unauthenticated requests: secret rotated, or someone probing",
            app_metric("ingest", "rejected"),
            threshold=20,
        )
        self._alarm(
            "IngestUnavailable",
            "Ingest answered 5xx: enqueue or secrets failing",
            app_metric("ingest", "unavailable"),
        )
        self._alarm("Api5xx", "API Gateway 5xx", api.api.metric_server_error(period=FIVE_MINUTES))
        self._alarm(
            "ReconciliationMismatches",
            "The books do not balance or notifications are stuck",
            app_metric("reconciliation", "reconciliation_mismatches", cdk.Duration.hours(1)),
            # Missing data means the hourly check did not run: that is an alarm too.
            missing=cloudwatch.TreatMissingData.BREACHING,
            periods=2,
        )
        self._alarm(
            "DeadOutboxItems",
            "Notifications gave up after max attempts",
            cloudwatch.MathExpression(
                expression="stream + sweep",
                using_metrics={
                    "stream": app_metric("outbox", "outbox_dead"),
                    "sweep": app_metric("sweeper", "sweep_dead"),
                },
                period=FIVE_MINUTES,
            ),
        )
        self.dashboard = self._dashboard(p, api)

    def _alarm(
        self,
        name: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float = 0,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
        periods: int = 1,
    ) -> None:
        alarm = cloudwatch.Alarm(
            self,
            name,
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data=missing,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm

    @staticmethod
    def _functions(p: Pipeline) -> Sequence[tuple[str, lambda_.IFunction]]:
        return [
            ("Ingest", p.ingest),
            ("Process", p.process),
            ("Outbox", p.outbox),
            ("Sweeper", p.sweeper),
            ("Reconciliation", p.reconciliation),
            ("Waiting", p.waiting),
        ]

    def _dashboard(self, p: Pipeline, api: WebhookApi) -> cloudwatch.Dashboard:
        dashboard = cloudwatch.Dashboard(
            self, "Dashboard", dashboard_name=f"umavez-{cdk.Aws.STACK_NAME}"
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Outcomes per delivery",
                left=[app_metric("process", outcome) for outcome in PROCESS_OUTCOMES],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Ingest",
                left=[app_metric("ingest", n) for n in ("accepted", "rejected", "unavailable")],
                right=[api.api.metric_latency(period=FIVE_MINUTES, statistic="p99")],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Queues",
                left=[
                    p.queues.queue.metric_approximate_number_of_messages_visible(),
                    p.queues.queue.metric_approximate_age_of_oldest_message(),
                    p.queues.dead_letters.metric_approximate_number_of_messages_visible(),
                    p.outbox_failures.metric_approximate_number_of_messages_visible(),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Outbox",
                left=[
                    app_metric("outbox", f"outbox_{r}")
                    for r in ("sent", "retry_later", "dead", "skipped")
                ],
                right=[p.outbox.metric("IteratorAge", statistic="Maximum")],
                width=12,
            ),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(
                title="Books",
                left=[
                    app_metric("reconciliation", "reconciliation_mismatches", cdk.Duration.hours(1))
                ],
                right=[app_metric("reconciliation", "orders_checked", cdk.Duration.hours(1))],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Lambda duration p99",
                left=[f.metric_duration(statistic="p99") for _, f in self._functions(p)],
                width=12,
            ),
        )
        return dashboard
