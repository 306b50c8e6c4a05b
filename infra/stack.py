"""The umavez stack: composes the constructs and says what it exposes."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
from constructs import Construct

from infra.config import PROVIDERS, StackConfig
from infra.constructs.api import WebhookApi
from infra.constructs.monitoring import Monitoring
from infra.constructs.operators import OperatorPolicies
from infra.constructs.pipeline import Pipeline
from infra.constructs.reconciliation import ReconciliationRuns
from infra.constructs.triggers import RECONCILE_EVERY
from infra.nag import acknowledge_reviewed_findings
from infra.reconciliation import RECONCILIATION
from infra.settings import TEST_ALARM


class UmavezStack(cdk.Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, config: StackConfig, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.pipeline = Pipeline(self, "Pipeline", config=config)
        self.api = WebhookApi(
            self,
            "Webhooks",
            ingest=self.pipeline.ingest,
            # Stripe by EventBridge alone has no public endpoint.
            providers=[p for p in PROVIDERS if p != "stripe" or config.stripe_ingress.by_webhook],
            api_type=config.api_type,
            waf=config.waf,
            provider_ip_allow_list=config.provider_ip_allow_list,
            retain_logs=config.retain_data,
            xray_sampling=config.xray_sampling,
        )
        self.reconciliation = ReconciliationRuns(
            self,
            "Reconciliation",
            function=self.pipeline.reconciliation,
            settings=RECONCILIATION,
            every=RECONCILE_EVERY,
            retain_logs=config.retain_data,
        )
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            pipeline=self.pipeline,
            reconciliation=self.reconciliation,
            api=self.api,
            alarm_email=config.alarm_email,
            retain=config.retain_data,
        )
        # What on-call attaches to their role to run the operator's commands on this stack.
        self.operators = OperatorPolicies(
            self,
            "Operators",
            pipeline=self.pipeline,
            state_machine=self.reconciliation.state_machine,
            alarm_topic=self.monitoring.topic,
            test_alarm=self.monitoring.alarms[TEST_ALARM],
            email_sender=config.email_sender,
        )
        self._outputs(config)
        acknowledge_reviewed_findings(
            self,
            waf=config.waf,
            tracing_policies=[f.tracing_policy for f in self.pipeline.functions],
            api=self.api,
        )

    def _outputs(self, config: StackConfig) -> None:
        """What the operator's commands and `umavez preflight` read from the deployed stack."""
        for provider, url in self.api.urls.items():
            cdk.CfnOutput(self, f"WebhookUrl{provider.capitalize()}", value=url)
        for name, secret_name in self.pipeline.secrets.names_by_provider.items():
            cdk.CfnOutput(self, f"Secret{name.capitalize()}", value=secret_name)
        outputs: dict[str, str] = {
            "LedgerTable": self.pipeline.storage.ledger.table_name,
            "OutboxTable": self.pipeline.storage.outbox.table_name,
            "WebhookQueueUrl": self.pipeline.queues.queue.queue_url,
            "DeadLetterQueueUrl": self.pipeline.queues.dead_letters.queue_url,
            "DeadLetterQueueArn": self.pipeline.queues.dead_letters.queue_arn,
            "OutboxFailureQueueUrl": self.pipeline.outbox_failures.queue_url,
            "EventBusName": self.pipeline.bus.event_bus_name,
            "AlarmTopicArn": self.monitoring.topic.topic_arn,
            # The hourly books check: its executions, and one started by hand.
            "ReconciliationStateMachineArn": self.reconciliation.state_machine.state_machine_arn,
            # Where `umavez trace` reads the functions' lines (and nothing else of the stack's).
            "FunctionLogGroups": cdk.Fn.join(
                ",", [f.log_group.log_group_name for f in self.pipeline.functions]
            ),
            # Plain names the operator commands read (replay, the refunds of charge.refunded).
            "SecretStripeApiKey": self.pipeline.secrets.stripe_api_key_name,
            "SecretMercadopagoAccessToken": self.pipeline.secrets.mercadopago_access_token_name,
            "SecretAsaasApiKey": self.pipeline.secrets.asaas_api_key_name,
        }
        if self.pipeline.secrets.notify_signing is not None:
            # preflight names it while it holds its placeholder: nothing reaches notifyUrl.
            outputs["SecretNotifySigning"] = self.pipeline.secrets.notify_signing_name
        outputs["OperatorReadPolicyArn"] = self.operators.read.managed_policy_arn
        outputs["OperatorRepairPolicyArn"] = self.operators.repair.managed_policy_arn
        # What `umavez preflight` checks the account against once the stack is deployed.
        outputs["Stage"] = config.stage
        outputs["ApiType"] = config.api_type.value  # a REST stage needs the region's log role
        outputs["ProcessMaxConcurrency"] = str(config.process_max_concurrency)
        if self.pipeline.stripe_bus is not None and config.stripe_event_source:
            # What preflight checks exists and is associated (the bus is named after it).
            outputs["StripeEventSource"] = config.stripe_event_source
        if config.email_sender:
            outputs["EmailSender"] = config.email_sender
        if config.email_configuration_set:
            outputs["EmailConfigurationSet"] = config.email_configuration_set
        for name, value in outputs.items():
            cdk.CfnOutput(self, name, value=value)
