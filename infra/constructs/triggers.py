"""What starts the functions but a request: the webhook queue's and the outbox stream's mappings
(their one definition, infra/mappings.py, which the local pollers run too), the schedules, and
Stripe's partner event bus."""

from __future__ import annotations

from dataclasses import replace

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.statement.sources import CADENCES, DAILY_SCHEDULED, HOURLY_SCHEDULED, SETTLE_SECONDS
from infra import settings
from infra.config import StackConfig
from infra.constructs.queues import WebhookQueues
from infra.mappings import OUTBOX_MAPPING, PROCESS_MAPPING

SWEEP_EVERY = cdk.Duration.minutes(settings.SCHEDULE_MINUTES["sweeper"])
RECONCILE_EVERY = cdk.Duration.minutes(settings.SCHEDULE_MINUTES["reconciliation"])
# A delivery waiting for its binding is applied within this long of the binding arriving.
WAITING_EVERY = cdk.Duration.minutes(settings.SCHEDULE_MINUTES["waiting"])
STATEMENT_EVERY = cdk.Duration.minutes(settings.SCHEDULE_MINUTES["statement"])


def webhook_queue_source(queues: WebhookQueues, config: StackConfig) -> sources.SqsEventSource:
    """The mapping's one definition (infra/mappings.py), which the local pollers run too;
    its concurrency is the deployment's choice."""
    mapping = replace(PROCESS_MAPPING, max_concurrency=config.process_max_concurrency)
    return sources.SqsEventSource(
        queues.queue,
        batch_size=mapping.batch_size,
        max_batching_window=cdk.Duration.seconds(mapping.max_batching_window_seconds),
        report_batch_item_failures=mapping.report_batch_item_failures,
        max_concurrency=mapping.max_concurrency,
    )


def outbox_stream_source(
    outbox: dynamodb.ITableV2, failures: sqs.IQueue
) -> sources.DynamoEventSource:
    """The mapping's one definition (infra/mappings.py), which the local pollers run too."""
    return sources.DynamoEventSource(
        outbox,
        starting_position=lambda_.StartingPosition(OUTBOX_MAPPING.starting_position),
        batch_size=OUTBOX_MAPPING.batch_size,
        parallelization_factor=OUTBOX_MAPPING.parallelization_factor,
        bisect_batch_on_error=OUTBOX_MAPPING.bisect_batch_on_error,
        retry_attempts=OUTBOX_MAPPING.retry_attempts,
        max_record_age=cdk.Duration.seconds(OUTBOX_MAPPING.max_record_age_seconds),
        report_batch_item_failures=OUTBOX_MAPPING.report_batch_item_failures,
        on_failure=sources.SqsDlq(failures),
        filters=[lambda_.FilterCriteria.filter(dict(OUTBOX_MAPPING.filter_pattern))],
    )


def schedules(
    scope: Construct,
    sweeper: lambda_.IFunction,
    waiting: lambda_.IFunction,
    statement: lambda_.IFunction,
) -> None:
    """What starts the scheduled functions (the reconciliation's run has its own,
    infra/constructs/reconciliation.py)."""
    for construct_id, target, every in (
        ("SweepSchedule", sweeper, SWEEP_EVERY),
        ("WaitingSchedule", waiting, WAITING_EVERY),
    ):
        events.Rule(
            scope,
            construct_id,
            schedule=events.Schedule.rate(every),
            targets=[targets.LambdaFunction(target, retry_attempts=2)],
        )
    # One rule, a target per provider read hourly: each provider's pass is a run of its own.
    _statement_rule(
        scope,
        statement,
        "StatementSchedule",
        events.Schedule.rate(STATEMENT_EVERY),
        HOURLY_SCHEDULED,
    )
    # A provider whose statement lists whole days is read once a day, once the day ended
    # and settled: its rule fires at the first quarter hour after that, in UTC.
    for provider in DAILY_SCHEDULED:
        hour, minute = CADENCES[provider].settled_at_utc(SETTLE_SECONDS[provider])
        _statement_rule(
            scope,
            statement,
            f"StatementDailySchedule{provider.capitalize()}",
            events.Schedule.cron(hour=str(hour), minute=str(minute)),
            (provider,),
        )


def _statement_rule(
    scope: Construct,
    statement: lambda_.IFunction,
    construct_id: str,
    schedule: events.Schedule,
    providers: tuple[str, ...],
) -> None:
    events.Rule(
        scope,
        construct_id,
        schedule=schedule,
        targets=[
            targets.LambdaFunction(
                statement,
                event=events.RuleTargetInput.from_object({"provider": provider}),
                retry_attempts=2,
            )
            for provider in providers
        ],
    )


def stripe_by_eventbridge(
    scope: Construct, config: StackConfig, queues: WebhookQueues
) -> events.EventBus | None:
    """With `-c stripeIngress=eventbridge|both`: the partner event bus of Stripe's event
    destination (its name is the partner event source's, which it associates), and a
    rule that takes every event of that source to the webhook queue, EventBridge's envelope
    as the body (functions/process/eventbridge.py). What EventBridge cannot deliver within a
    day goes to the webhook DLQ, alarmed and redriven like any dead letter."""
    source = config.stripe_event_source
    if not config.stripe_ingress.by_eventbridge or source is None:
        return None
    bus = events.EventBus(scope, "StripeBus", event_source_name=source)
    events.Rule(
        scope,
        "StripeEvents",
        description="Stripe's events from its EventBridge destination to the webhook queue",
        event_bus=bus,
        event_pattern=events.EventPattern(source=[source]),
        targets=[
            targets.SqsQueue(
                queues.queue,
                dead_letter_queue=queues.dead_letters,
                max_event_age=cdk.Duration.hours(24),
                retry_attempts=185,
            )
        ],
    )
    return bus
