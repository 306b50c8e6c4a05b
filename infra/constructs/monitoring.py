"""Alarms (each one has a runbook entry in docs/operations.md) and a dashboard; alarms go to
SNS, encrypted with a key CloudWatch may use (it cannot use the AWS-managed SNS key:
alarm_topic.py).

Every alarm with its metric math and threshold, grouped by what it watches; the dashboard
(dashboard.py) is built from the same metrics (watched.py), so that an alarm and its graph
cannot disagree.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.constructs.alarm_topic import alarm_topic, alarm_topic_key
from infra.constructs.api import WebhookApi
from infra.constructs.dashboard import dashboard
from infra.constructs.pipeline import Pipeline
from infra.constructs.reconciliation import ReconciliationRuns
from infra.constructs.watched import (
    FIFTEEN_MINUTES,
    FIVE_MINUTES,
    HOUR,
    app_metric,
    filled,
    functions_of,
)
from infra.settings import MAX_RECEIVE_COUNT

# Three hourly windows unread: a run that could not read one is retried by the next.
STATEMENT_BEHIND_SECONDS = 3 * 3600


class Monitoring(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pipeline: Pipeline,
        reconciliation: ReconciliationRuns,
        api: WebhookApi,
        alarm_email: str | None,
        retain: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = alarm_topic_key(self, retain)
        self.topic = alarm_topic(self, self.key)
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.metrics_namespace = pipeline.metrics_namespace
        self._queue_alarms(pipeline)
        self._function_alarms(pipeline)
        self._processing_alarms()
        self._payment_alarms()
        self._ingress_alarms(api)
        self._reconciliation_alarms(reconciliation)
        self._statement_alarms()
        self._sender_alarms()
        # After the alarms: the dashboard graphs some of them (their own metric math).
        self.dashboard = dashboard(self, pipeline, api, self.alarms)

    def _queue_alarms(self, p: Pipeline) -> None:
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
        # A record is received at most MAX_RECEIVE_COUNT times, a visibility timeout apart,
        # before it is processed, parked or dead-lettered: anything older was never received.
        queue_lifetime = p.queues.visibility_timeout.to_seconds() * MAX_RECEIVE_COUNT
        self._alarm(
            "WebhookQueueAge",
            "Accepted webhooks are not being processed: process is down, throttled or behind",
            p.queues.queue.metric_approximate_age_of_oldest_message(
                period=FIVE_MINUTES, statistic="Maximum"
            ),
            threshold=queue_lifetime,
        )

    def _function_alarms(self, p: Pipeline) -> None:
        for name, function in functions_of(p):
            if function is p.reconciliation:
                # Its state machine retries a failed step: an error the retry clears is no
                # one's to fix, and one it does not is ReconciliationRunFailed's.
                continue
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

    def _processing_alarms(self) -> None:
        self._alarm(
            "ProcessFailed",
            "Records failed for a non-transient reason (heading to the DLQ)",
            filled(self._app_metric("process", "failed")),
        )
        self._alarm(
            "ProcessBatchesCutShort",
            "Process ran out of time and handed records back to the queue unprocessed",
            filled(self._app_metric("process", "batch_cut_short")),
        )
        # One payment is announced by up to five event types (payment_intent.succeeded,
        # charge.succeeded, charge.captured, checkout.session.completed, invoice_payment.paid):
        # one applied effect and up to four duplicates is normal traffic. More than five per
        # effect over 15 minutes (and more than 20 in all, so a quiet hour's resend of a few old
        # events stays quiet) is providers retrying: the incident of docs/design.md.
        self._alarm(
            "DuplicateSurge",
            "Providers are retrying a lot: is ingest slower than their timeout?",
            cloudwatch.MathExpression(
                expression=(
                    "IF(FILL(duplicates, 0) > 20, FILL(duplicates, 0) / (FILL(applied, 0) + 1), 0)"
                ),
                using_metrics={
                    "duplicates": self._app_metric("process", "duplicate", FIFTEEN_MINUTES),
                    "applied": self._app_metric("process", "applied", FIFTEEN_MINUTES),
                },
                label="duplicates per applied effect",
                period=FIFTEEN_MINUTES,
            ),
            threshold=5,
        )

    def _payment_alarms(self) -> None:
        """Payments that need a person: unbound, unroutable, contradictory or stuck."""
        self._alarm(
            "WaitingOverAnHour",
            "A delivery has waited over an hour for the order its payment belongs to",
            filled(self._app_metric("waiting", "waiting_over_an_hour", statistic="Maximum")),
        )
        self._alarm(
            "RefundPendingOverAWeek",
            "A refund has been pending a week: its charge is still read again, nothing settles it",
            filled(self._app_metric("waiting", "rechecks_over_a_week", statistic="Maximum")),
        )
        self._alarm(
            "UnroutablePayments",
            "An event named neither an order nor anything to find one by",
            filled(self._app_metric("process", "unroutable")),
        )
        self._alarm(
            "UnmatchedPayments",
            "Money nobody could route after 3 days: attach it to its order",
            filled(self._app_metric("waiting", "unmatched_open", statistic="Maximum")),
        )
        self._alarm(
            "PaymentConflicts",
            "An event named a payment for another order than the one it is bound to",
            filled(self._app_metric("process", "conflict")),
        )
        self._alarm(
            "AmountDisagreements",
            "Two event types named one payment or refund with different amounts",
            filled(self._app_metric("process", "amount_disagreements")),
        )
        self._alarm(
            "StaleSurge",
            "Many events arrive out of order",
            filled(self._app_metric("process", "stale")),
            threshold=100,
        )

    def _ingress_alarms(self, api: WebhookApi) -> None:
        """What the providers' requests meet: the API, then ingest."""
        self._alarm(
            "SignatureFailures",
            "Many unauthenticated requests: secret rotated, or someone probing",
            filled(self._app_metric("ingest", "rejected")),
            threshold=20,
        )
        self._alarm(
            "IngestUnavailable",
            "Ingest answered 5xx: enqueue or secrets failing",
            filled(self._app_metric("ingest", "unavailable")),
        )
        self._alarm("Api5xx", "API Gateway 5xx", api.api.metric_server_error(period=FIVE_MINUTES))
        # Providers send signed, well-formed requests: they normally never get a 4xx. Throttling
        # (429) and WAF blocks are answered by API Gateway and never reach ingest's metrics.
        # More than 5% of requests over 15 minutes, once there are at least 10 of them.
        self._alarm(
            "Api4xx",
            "Over 5% of webhook requests refused (throttled, WAF, or refused by ingest)",
            cloudwatch.MathExpression(
                expression=(
                    "IF(FILL(refused, 0) >= 10, 100 * FILL(refused, 0) / FILL(requests, 1), 0)"
                ),
                using_metrics={
                    "refused": api.api.metric_client_error(period=FIFTEEN_MINUTES),
                    "requests": api.api.metric_count(period=FIFTEEN_MINUTES, statistic="Sum"),
                },
                label="% of requests answered 4xx",
                period=FIFTEEN_MINUTES,
            ),
            threshold=5,
        )

    def _reconciliation_alarms(self, reconciliation: ReconciliationRuns) -> None:
        self._alarm(
            "ReconciliationMismatches",
            "The books do not balance or notifications are stuck",
            self._app_metric("reconciliation", "reconciliation_mismatches", HOUR),
            # An hour without a run is ReconciliationStopped's to say: read as breaching here,
            # it paged within the hour after every first deploy, before the first run.
            # One datapoint: each order is checked by one run only, so a mismatch found is
            # in that run's datapoint alone, and two periods in a row would never page.
            missing=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        # Every run publishes one `reconciliation_mismatches` datapoint, 0 included. Two hours
        # without one leave the alarm with no data: INSUFFICIENT_DATA, and that transition
        # notifies (its only way to: a sample count is never below 1 when there is data). A
        # new alarm starts in INSUFFICIENT_DATA, so the hours before the first run of a new
        # stack notify nobody. No OK action: the next run's datapoint clears it silently.
        stopped = self._alarm(
            "ReconciliationStopped",
            "The hourly books check has not run for 2 hours",
            self._app_metric(
                "reconciliation", "reconciliation_mismatches", HOUR, statistic="SampleCount"
            ),
            threshold=1,
            comparison=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            missing=cloudwatch.TreatMissingData.MISSING,
            periods=2,
        )
        stopped.add_insufficient_data_action(actions.SnsAction(self.topic))
        # A run whose unit still failed after its retries, or that outlasted its budget, or
        # was stopped: its checkpoint did not move (the next run checks the window again), and
        # it published nothing, which ReconciliationStopped would only say two hours later.
        runs = reconciliation.state_machine
        self._alarm(
            "ReconciliationRunFailed",
            "The hourly books check failed, timed out or was aborted: its window is checked again",
            cloudwatch.MathExpression(
                expression="FILL(failed, 0) + FILL(timed_out, 0) + FILL(aborted, 0)",
                using_metrics={
                    "failed": runs.metric_failed(period=FIVE_MINUTES),
                    "timed_out": runs.metric_timed_out(period=FIVE_MINUTES),
                    "aborted": runs.metric_aborted(period=FIVE_MINUTES),
                },
                label="books check executions failed, timed out or aborted",
                period=FIVE_MINUTES,
            ),
        )

    def _statement_alarms(self) -> None:
        # Each provider's pass publishes its mismatches, zeros included, every run (hourly;
        # Asaas's daily): a movement booked wrong, missing, or money the provider never moved.
        self._alarm(
            "StatementMismatches",
            "The provider's own books disagree with the ledger: see runbook 'StatementMismatches'",
            self._app_metric("statement", "statement_mismatches", HOUR),
            missing=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        # A provider whose checkpoint is hours behind where its cadence lets it be (its API
        # failing, or the pass cut short run after run): the movements its webhooks missed wait
        # unbooked. The lag is counted past the cadence (functions/statement/schedule.py), so
        # Asaas's daily checkpoint, a day behind the clock when caught up, publishes 0.
        self._alarm(
            "StatementBehind",
            "A provider's statement has not been read whole for 3 hours",
            self._app_metric("statement", "statement_lag_seconds", HOUR, statistic="Maximum"),
            threshold=STATEMENT_BEHIND_SECONDS,
        )

    def _sender_alarms(self) -> None:
        self._alarm(
            "DeadOutboxItems",
            "Notifications given up: still failing outboxGiveUpHours after they were written",
            self._both_senders("outbox_dead", "sweep_dead"),
        )
        self._alarm(
            "NotificationSinkGone",
            "The HTTP sink answered 410 Gone: its notifications are no longer sent there",
            self._both_senders("notify_sink_gone", "notify_sink_gone"),
        )

    def _both_senders(self, stream: str, sweep: str) -> cloudwatch.MathExpression:
        """What the stream's first try and the sweeper count, added (both send items)."""
        return cloudwatch.MathExpression(
            expression="FILL(stream, 0) + FILL(sweep, 0)",
            using_metrics={
                "stream": self._app_metric("outbox", stream),
                "sweep": self._app_metric("sweeper", sweep),
            },
            period=FIVE_MINUTES,
        )

    def _app_metric(
        self,
        service: str,
        name: str,
        period: cdk.Duration = FIVE_MINUTES,
        statistic: str = "Sum",
    ) -> cloudwatch.Metric:
        return app_metric(self.metrics_namespace, service, name, period, statistic)

    def _alarm(
        self,
        name: str,
        description: str,
        metric: cloudwatch.IMetric,
        threshold: float = 0,
        missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
        periods: int = 1,
        comparison: cloudwatch.ComparisonOperator = (
            cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        ),
    ) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            name,
            # `<stack>-<name>`: what the runbook, a pager and `umavez preflight` call it (a
            # generated name is the construct path plus a random suffix).
            alarm_name=f"{cdk.Stack.of(self).stack_name}-{name}",
            alarm_description=description,
            metric=metric,
            threshold=threshold,
            comparison_operator=comparison,
            evaluation_periods=periods,
            datapoints_to_alarm=periods,
            treat_missing_data=missing,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        self.alarms[name] = alarm
        return alarm
