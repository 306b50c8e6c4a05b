"""The dashboard: rows of two graphs, built from the metrics the alarms watch (and two alarms'
own metric math), so that an alarm and its graph cannot disagree."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from infra.constructs.api import WebhookApi
from infra.constructs.pipeline import Pipeline
from infra.constructs.watched import FIVE_MINUTES, HOUR, app_metric, functions_of

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

# `ignored_test_mode`: a test-mode event reached a live deployment. Shown, not alarmed: it is
# acknowledged and moves no money; it only says a test endpoint points here.
INGEST_OUTCOMES = ("accepted", "rejected", "unavailable", "ignored", "ignored_test_mode")


def dashboard(
    scope: Construct,
    p: Pipeline,
    api: WebhookApi,
    alarms: Mapping[str, cloudwatch.Alarm],
) -> cloudwatch.Dashboard:
    """Rows of two graphs, top to bottom in this order."""
    built = cloudwatch.Dashboard(scope, "Dashboard", dashboard_name=f"umavez-{cdk.Aws.STACK_NAME}")
    rows = _Rows(p, api, alarms)
    for row in (rows.deliveries(), rows.refusals(), rows.queues(), rows.books()):
        built.add_widgets(*row)
    return built


@dataclass
class _Rows:
    p: Pipeline
    api: WebhookApi
    alarms: Mapping[str, cloudwatch.Alarm]

    def _app_metric(
        self, service: str, name: str, period: cdk.Duration = FIVE_MINUTES
    ) -> cloudwatch.Metric:
        return app_metric(self.p.metrics_namespace, service, name, period)

    def deliveries(self) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Outcomes per delivery",
                left=[self._app_metric("process", outcome) for outcome in PROCESS_OUTCOMES],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Ingest",
                left=[self._app_metric("ingest", n) for n in INGEST_OUTCOMES],
                right=[self.api.api.metric_latency(period=FIVE_MINUTES, statistic="p99")],
                width=12,
            ),
        ]

    def refusals(self) -> list[cloudwatch.IWidget]:
        """What the API refused before ingest, and what process flagged for a look."""
        api = self.api.api
        return [
            cloudwatch.GraphWidget(
                title="API requests and refusals (throttling and WAF never reach ingest)",
                left=[
                    api.metric_count(period=FIVE_MINUTES, statistic="Sum"),
                    api.metric_client_error(period=FIVE_MINUTES),
                    api.metric_server_error(period=FIVE_MINUTES),
                ],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Process: needs a look",
                left=[
                    self._app_metric("process", n)
                    for n in ("batch_cut_short", "unroutable", "conflict", "amount_disagreements")
                ],
                right=[self.alarms["DuplicateSurge"].metric],
                width=12,
            ),
        ]

    def queues(self) -> list[cloudwatch.IWidget]:
        p = self.p
        return [
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
                    self._app_metric("outbox", f"outbox_{r}")
                    for r in ("sent", "retry_later", "dead", "skipped")
                ],
                right=[p.outbox.metric("IteratorAge", statistic="Maximum")],
                width=12,
            ),
        ]

    def books(self) -> list[cloudwatch.IWidget]:
        return [
            cloudwatch.GraphWidget(
                title="Books",
                left=[
                    self._app_metric("reconciliation", "reconciliation_mismatches", HOUR),
                    self._app_metric("reconciliation", "reconciliation_behind", HOUR),
                    self.alarms["ReconciliationRunFailed"].metric,
                ],
                right=[self._app_metric("reconciliation", "orders_checked", HOUR)],
                width=12,
            ),
            cloudwatch.GraphWidget(
                title="Lambda duration p99",
                left=[f.metric_duration(statistic="p99") for _, f in functions_of(self.p)],
                width=12,
            ),
        ]
