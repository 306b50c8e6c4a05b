"""The functions and how events reach them: ingest -> SQS -> process -> outbox stream -> sender,
plus the scheduled sweeper, waiting and statement pass, and the function the reconciliation's
state machine runs (infra/constructs/reconciliation.py). Each function gets only the actions it
uses (grants.py); the mappings, schedules and Stripe's partner bus that start them are
triggers.py's."""

from __future__ import annotations

from dataclasses import replace

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from functions.ingest.environment import IngestSettings
from functions.shared import tables
from functions.shared.environment import (
    ProcessSettings,
    ReconcileSettings,
    SenderSettings,
    StatementSettings,
    SweeperSettings,
    WaitingSettings,
)
from functions.shared.observability import stage_metrics_namespace
from infra import settings
from infra.config import PROVIDERS, ApiType, StackConfig
from infra.constructs.grants import allow, grant, ses_configuration_sets, ses_identities
from infra.constructs.lambdas import FunctionSpec, UmavezFunction, powertools_layer
from infra.constructs.queues import WebhookQueues, secure_queue
from infra.constructs.secrets import ProviderSecrets
from infra.constructs.storage import Storage
from infra.constructs.triggers import (
    STATEMENT_EVERY,
    SWEEP_EVERY,
    WAITING_EVERY,
    outbox_stream_source,
    schedules,
    stripe_by_eventbridge,
    webhook_queue_source,
)
from infra.removal import kept

PROCESS_TIMEOUT = cdk.Duration.seconds(settings.PROCESS_TIMEOUT_SECONDS)

# Keyword arguments of a settings model's `variables` (functions/shared/environment.py): each
# function's environment is written from the model it reads, so a name is spelled once.
SettingValues = dict[str, object]


class Pipeline(Construct):
    """The tables, queues and secrets, then each function with exactly what it may do."""

    def __init__(self, scope: Construct, construct_id: str, *, config: StackConfig) -> None:
        super().__init__(scope, construct_id)
        retain = config.retain_data
        self.metrics_namespace = stage_metrics_namespace(config.stage)
        self.storage = Storage(self, "Storage", retain=retain)
        self.queues = WebhookQueues(self, "Queues", consumer_timeout=PROCESS_TIMEOUT, retain=retain)
        self.secrets = self._secrets(config)
        self.bus = events.EventBus(self, "Bus", description="umavez domain events")
        self.stripe_bus = stripe_by_eventbridge(self, config, self.queues)
        self.stripe_event_source = config.stripe_event_source if self.stripe_bus else None
        self.functions: list[UmavezFunction] = []
        self._layer = powertools_layer(self)
        stored = stored_settings(self.storage, config)
        self.ingest = self._ingest(config)
        self.process = self._process(config, stored)
        self.waiting = self._waiting(config, stored)
        senders = self._sender_settings(config, stored)
        self.outbox, self.outbox_failures = self._outbox(config, senders)
        self.sweeper = self._sweeper(config, senders)
        self.reconciliation = self._reconciliation_worker(config, stored)
        self.statement = self._statement(config, stored)
        schedules(self, self.sweeper, self.waiting, self.statement)

    def _secrets(self, config: StackConfig) -> ProviderSecrets:
        return ProviderSecrets(
            self,
            "Secrets",
            stage=config.stage,
            providers=PROVIDERS,
            retain=config.retain_data,
            notify_signing=bool(config.notify_url),
        )

    def _function(
        self, construct_id: str, spec: FunctionSpec, config: StackConfig
    ) -> lambda_.Function:
        """Each function of the stack, listed in `functions` (its log group, its tracing policy).
        One started by the outbox stream or a schedule starts a trace of its own."""
        if config.xray_sampling <= 0:  # `xraySampling=0`: nothing is traced
            spec = replace(spec, tracing="PassThrough")
        created = UmavezFunction(
            self,
            construct_id,
            spec,
            self._layer,
            config.retain_data,
            metrics_namespace=self.metrics_namespace,
        )
        self.functions.append(created)
        return created.function

    def _ingest(self, config: StackConfig) -> lambda_.Function:
        # Who starts a trace (docs/observability.md): the REST API's stage samples by the
        # stack's rule and ingest continues; the HTTP API does not trace, so ingest starts it
        # at Lambda's fixed rate.
        ingest = self._function(
            "Ingest",
            FunctionSpec(
                name="ingest",
                description="Verifies provider signatures and enqueues; answers fast",
                timeout=cdk.Duration.seconds(5),
                environment={
                    **IngestSettings.variables(
                        webhook_queue_url=self.queues.queue.queue_url,
                        provider_secrets=self.secrets.names_by_provider,
                        # Which mode's events count: a test event never moves money on a live
                        # deployment.
                        payment_mode=config.payment_mode.value,
                        asaas_source_ips=config.asaas_source_ips,
                    ),
                    # Lambda's active tracing records ingest's invocation; the X-Ray SDK's
                    # finer segments are not worth ~170 ms on every cold start of the function
                    # providers wait on (docs/performance.md).
                    "POWERTOOLS_TRACE_DISABLED": "true",
                },
                tracing="Active" if config.api_type is ApiType.HTTP else "PassThrough",
            ),
            config,
        )
        # Exactly what the code calls (tests/infra/test_permissions.py holds each role to its
        # function's recorded calls): CDK's grants would add GetQueueAttributes, GetQueueUrl
        # and DescribeSecret, which nothing calls.
        grant(ingest, ["sqs:SendMessage"], [self.queues.queue.queue_arn])
        grant(
            ingest,
            ["secretsmanager:GetSecretValue"],
            [secret.secret_arn for secret in self.secrets.webhook.values()],
        )
        return ingest

    def _process(self, config: StackConfig, stored: SettingValues) -> lambda_.Function:
        # Process continues ingest's trace (the message's AWSTraceHeader): an event is one trace.
        process = self._function(
            "Process",
            FunctionSpec(
                name="process",
                description="Applies each effect once: one DynamoDB transaction per effect",
                timeout=PROCESS_TIMEOUT,
                environment=ProcessSettings.variables(
                    **stored,
                    payment_mode=config.payment_mode.value,
                    **self._provider_api_key_names(),
                ),
                tracing="PassThrough",
            ),
            config,
        )
        # TransactWriteItems is authorized item by item as PutItem / UpdateItem.
        # ConditionCheckItem: a reversal's transaction checks the entry it reverses.
        # DeleteItem: a re-check that finds its charge settled ends the charge's watch.
        # Query: a stale entry reads its order's entries (is a newer one of its payment told?);
        # an Asaas cash receipt or undo reads the payment's cash entries of its order.
        # GetItem: a payment captured again reads its capture mark.
        allow(
            process,
            self.storage.ledger,
            "PutItem",
            "UpdateItem",
            "DeleteItem",
            "BatchGetItem",
            "ConditionCheckItem",
            "Query",
            "GetItem",
        )
        # UpdateItem: a notification that left before the order knew its customer goes back
        # to the sweeper for the e-mail once the address is learnt.
        allow(process, self.storage.outbox, "PutItem", "UpdateItem")
        self._read_provider_api_keys(process)
        process.add_event_source(webhook_queue_source(self.queues, config))
        return process

    def _waiting(self, config: StackConfig, stored: SettingValues) -> lambda_.Function:
        waiting = self._function(
            "Waiting",
            FunctionSpec(
                name="waiting",
                scheduled_every=WAITING_EVERY,
                description="Re-drives deliveries whose order is now bound; unmatched after 3 days",
                timeout=cdk.Duration.seconds(settings.WAITING_TIMEOUT_SECONDS),
                environment=WaitingSettings.variables(
                    **stored, webhook_queue_url=self.queues.queue.queue_url
                ),
            ),
            config,
        )
        # Parked and unmatched deliveries live in two partitions of the ledger.
        allow(
            waiting,
            self.storage.ledger,
            "Query",
            "BatchGetItem",
            "PutItem",
            "DeleteItem",
            "UpdateItem",
        )
        grant(waiting, ["sqs:SendMessage"], [self.queues.queue.queue_arn])
        return waiting

    def _sender_settings(self, config: StackConfig, stored: SettingValues) -> SettingValues:
        """What the outbox and the sweeper both send with."""
        return {
            **stored,
            "outbox_give_up_hours": config.outbox_give_up_hours,
            "event_bus_name": self.bus.event_bus_name,
            # Each sink only when configured (None leaves the variable out).
            "email_sender": config.email_sender or None,
            "email_configuration_set": config.email_configuration_set or None,
            "notify_url": config.notify_url or None,
            "notify_signing_secret": (
                self.secrets.notify_signing_name if config.notify_url else None
            ),
        }

    def _outbox(
        self, config: StackConfig, senders: SettingValues
    ) -> tuple[lambda_.Function, sqs.Queue]:
        """The sender on the outbox's stream, and the queue of the records it gave up on."""
        outbox = self._function(
            "Outbox",
            FunctionSpec(
                name="outbox",
                description="Sends each new outbox item once, keyed by its id",
                timeout=cdk.Duration.seconds(settings.OUTBOX_TIMEOUT_SECONDS),
                environment=SenderSettings.variables(**senders),
            ),
            config,
        )
        failures = secure_queue(
            self,
            "OutboxStreamFailures",
            retention_period=cdk.Duration.days(14),
            removal_policy=kept(config.retain_data),
        )
        outbox.add_event_source(outbox_stream_source(self.storage.outbox, failures))
        # The first try reads the item with its order in one BatchGetItem, and writes once.
        allow(outbox, self.storage.outbox, "BatchGetItem", "UpdateItem")
        # The order's financial status and recipient as of sending.
        # GetItem: a try sent without a recipient reads its order again (learnt meanwhile?).
        allow(outbox, self.storage.ledger, "BatchGetItem", "GetItem")
        self._allow_sending(outbox, config)
        return outbox, failures

    def _sweeper(self, config: StackConfig, senders: SettingValues) -> lambda_.Function:
        sweeper = self._function(
            "Sweeper",
            FunctionSpec(
                name="sweeper",
                scheduled_every=SWEEP_EVERY,
                description="Re-drives outbox items the stream did not finish",
                timeout=cdk.Duration.seconds(settings.SWEEPER_TIMEOUT_SECONDS),
                environment=SweeperSettings.variables(
                    **senders, outbox_failures_queue_url=self.outbox_failures.queue_url
                ),
            ),
            config,
        )
        allow(sweeper, self.storage.outbox, "UpdateItem")
        allow(sweeper, self.storage.ledger, "GetItem")  # the order, as the outbox reads it
        # Records the stream gave up on: their coordinates from the on-failure queue, the
        # records themselves from the stream, so their items are parked for the sweep.
        grant(
            sweeper,
            ["sqs:ReceiveMessage", "sqs:DeleteMessage"],
            [self.outbox_failures.queue_arn],
        )
        outbox_stream = self.storage.outbox.table_stream_arn
        if outbox_stream is None:
            raise ValueError("the outbox table has no stream: the outbox mapping reads it")
        grant(sweeper, ["dynamodb:GetShardIterator", "dynamodb:GetRecords"], [outbox_stream])
        allow(sweeper, self.storage.outbox, "Query", index=tables.OUTBOX_DUE_INDEX)
        self._allow_sending(sweeper, config)
        return sweeper

    def _allow_sending(self, sender: lambda_.Function, config: StackConfig) -> None:
        """The sinks a notification goes to: the bus always, the HTTP sink and SES when set."""
        self.bus.grant_put_events_to(sender)
        if self.secrets.notify_signing is not None:
            grant(
                sender,
                ["secretsmanager:GetSecretValue"],
                [self.secrets.notify_signing.secret_arn],
            )
        if config.email_sender:
            sender.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["ses:SendEmail"],
                    resources=[
                        *ses_identities(config.email_sender),
                        *ses_configuration_sets(config.email_configuration_set),
                    ],
                )
            )

    def _reconciliation_worker(
        self, config: StackConfig, stored: SettingValues
    ) -> lambda_.Function:
        """Each step of the hourly run, invoked by its state machine (infra/constructs/
        reconciliation.py): the plan, a unit's share of orders, the finish. The timeout is
        sized from a unit's share (infra/reconciliation.py)."""
        reconciliation = self._function(
            "Reconciliation",
            FunctionSpec(
                name="reconciliation",
                description="Proves the books balance and nothing is stuck, a unit at a time",
                timeout=cdk.Duration.seconds(settings.RECONCILIATION_TIMEOUT_SECONDS),
                environment=ReconcileSettings.variables(**stored),
            ),
            config,
        )
        # Incremental: the orders changed since its checkpoint (an item of the ledger it
        # writes), each order's partition, and their outbox items; stuck or dead
        # notifications through the due index.
        allow(reconciliation, self.storage.ledger, "Query", index=tables.LEDGER_CHANGES_INDEX)
        # BatchGetItem on the ledger: an outbox item found without its counted entry is
        # confirmed by reading the entry back. PutItem: the checkpoint; UpdateItem: the runs'
        # summary (the last run, and the last mismatches found, kept apart).
        allow(
            reconciliation,
            self.storage.ledger,
            "Query",
            "GetItem",
            "PutItem",
            "UpdateItem",
            "BatchGetItem",
        )
        allow(reconciliation, self.storage.outbox, "BatchGetItem")
        allow(reconciliation, self.storage.outbox, "Query", index=tables.OUTBOX_DUE_INDEX)
        return reconciliation

    def _statement(self, config: StackConfig, stored: SettingValues) -> lambda_.Function:
        """Each provider's books, read back from its checkpoint (functions/statement/
        schedule.py), booked with the webhooks' keys and matched."""
        statement = self._function(
            "Statement",
            FunctionSpec(
                name="statement",
                scheduled_every=STATEMENT_EVERY,
                description="Reads the providers' own books: books what webhooks missed, matches",
                timeout=cdk.Duration.seconds(settings.STATEMENT_TIMEOUT_SECONDS),
                environment=StatementSettings.variables(**stored, **self._provider_api_key_names()),
            ),
            config,
        )
        # Booking a line is process's transaction (PutItem, UpdateItem, ConditionCheckItem);
        # BatchGetItem: its binding and the processor's read; Query: a payment's entries, and an
        # order's for the match; GetItem: the checkpoint, and a payment's capture mark;
        # PutItem: the pass's record. The match finds the orders changed through the index.
        allow(
            statement,
            self.storage.ledger,
            "PutItem",
            "UpdateItem",
            "ConditionCheckItem",
            "BatchGetItem",
            "Query",
            "GetItem",
        )
        allow(statement, self.storage.ledger, "Query", index=tables.LEDGER_CHANGES_INDEX)
        allow(statement, self.storage.outbox, "PutItem", "UpdateItem")
        self._read_provider_api_keys(statement)
        return statement

    def _provider_api_key_names(self) -> SettingValues:
        """The secrets process and statement call the providers' APIs with."""
        return {
            "mercadopago_access_token_secret": self.secrets.mercadopago_access_token_name,
            "stripe_api_key_secret": self.secrets.stripe_api_key_name,
            "asaas_api_key_secret": self.secrets.asaas_api_key_name,
        }

    def _read_provider_api_keys(self, function: lambda_.Function) -> None:
        grant(
            function,
            ["secretsmanager:GetSecretValue"],
            [
                self.secrets.mercadopago_access_token.secret_arn,
                self.secrets.stripe_api_key.secret_arn,
                self.secrets.asaas_api_key.secret_arn,
            ],
        )


def stored_settings(storage: Storage, config: StackConfig) -> SettingValues:
    """Where every function's data lives, and how long what may expire is kept."""
    return {
        "ledger_table": storage.ledger.table_name,
        "outbox_table": storage.outbox.table_name,
        # What expires: delivery audits and sent notifications, after this many days.
        "retention_days": config.retention_days,
    }
