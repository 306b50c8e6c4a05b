"""What the alarms and the dashboard both watch: the functions' own metrics (in the stage's
namespace, an absent one read as 0), their periods, and the pipeline's functions by name."""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_

from infra.constructs.pipeline import Pipeline

FIVE_MINUTES = cdk.Duration.minutes(5)
FIFTEEN_MINUTES = cdk.Duration.minutes(15)
HOUR = cdk.Duration.hours(1)


def app_metric(
    namespace: str,
    service: str,
    name: str,
    period: cdk.Duration = FIVE_MINUTES,
    statistic: str = "Sum",
) -> cloudwatch.Metric:
    """A metric the functions publish through Powertools (EMF, dimension `service`), in their
    stage's namespace."""
    return cloudwatch.Metric(
        namespace=namespace,
        metric_name=name,
        dimensions_map={"service": service},
        statistic=statistic,
        period=period,
    )


def filled(metric: cloudwatch.Metric) -> cloudwatch.MathExpression:
    """App metrics are published only when something happens: an absent one is 0, so its
    alarm reads OK rather than sitting in INSUFFICIENT_DATA."""
    return cloudwatch.MathExpression(
        expression="FILL(m, 0)",
        using_metrics={"m": metric},
        label=metric.metric_name,
        period=metric.period,
    )


def functions_of(p: Pipeline) -> Sequence[tuple[str, lambda_.IFunction]]:
    return [
        ("Ingest", p.ingest),
        ("Process", p.process),
        ("Outbox", p.outbox),
        ("Sweeper", p.sweeper),
        ("Reconciliation", p.reconciliation),
        ("Waiting", p.waiting),
        ("Statement", p.statement),
    ]
