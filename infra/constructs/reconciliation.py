"""The hourly reconciliation as a Step Functions state machine, so that its units run side by
side and its capacity grows with the traffic, not with one Lambda's timeout:

    schedule (hourly) -> Plan -> CheckUnits (Map, `max_concurrency` at once:
                                  CheckUnit -> UnitDone? -> CheckUnit again / UnitChecked)
                          -> Finish (the run's totals, LAST_RUN, the checkpoint)

All three are the reconciliation function, invoked with the step's name
(functions/reconcile/units.py). A check invocation only reads, so it is retried; a unit that
still fails is caught and the execution fails with `ReconciliationUnitFailed`: Finish never
runs, the checkpoint stays, and the next run checks the same window again. The execution's
timeout is the run's budget (infra/reconciliation.py); a run that outlasts it fails too. Either
failure is the `ReconciliationRunFailed` alarm (infra/constructs/monitoring.py).
"""

from __future__ import annotations

import hashlib

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from functions.reconcile.units import CHECK, FINISH, PLAN
from infra.constructs.lambdas import retained_log_group, vended_log_group_name
from infra.nag import acknowledge_state_machine_findings
from infra.reconciliation import (
    RETRY_ATTEMPTS,
    RETRY_BACKOFF_RATE,
    RETRY_FIRST_WAIT_SECONDS,
    ReconciliationSettings,
)

UNIT_FAILED = "ReconciliationUnitFailed"
# What EventBridge accepts as a rule's name.
RULE_NAME_LENGTH = 64


def schedule_rule_name(stack_name: str) -> str:
    """The schedule's rule, named for its stack: rule names are the account's, and a long
    stack name keeps its start and a hash of the whole, so two never collide."""
    name = f"{stack_name}-reconcile"
    if len(name) <= RULE_NAME_LENGTH:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: RULE_NAME_LENGTH - 9]}-{digest}"


class ReconciliationRuns(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.Function,
        settings: ReconciliationSettings,
        every: cdk.Duration,
        retain_logs: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        definition = self._definition(function, settings)
        # Step Functions delivers its logs itself: a vended group keeps the account's
        # CloudWatch Logs resource policy out of it.
        self.logs = retained_log_group(
            self,
            "Logs",
            retain_logs,
            name=vended_log_group_name(self, "states", "reconciliation"),
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="umavez: the hourly books check, its units side by side",
            definition_body=sfn.DefinitionBody.from_chainable(definition),
            timeout=cdk.Duration.seconds(settings.run_budget_seconds),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.logs, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
        )
        self.schedule = self._schedule(every)
        acknowledge_state_machine_findings(self.state_machine, function)

    def _definition(
        self, function: lambda_.Function, settings: ReconciliationSettings
    ) -> sfn.IChainable:
        """Plan, then the units side by side, then Finish."""
        plan = retried(self._invoke(function, "Plan", sfn.TaskInput.from_object({"step": PLAN})))
        units = self._check_units(function, settings)
        finish = retried(
            self._invoke(
                function,
                "Finish",
                sfn.TaskInput.from_object(
                    {
                        "step": FINISH,
                        "run": sfn.JsonPath.object_at("$.run"),
                        "totals": sfn.JsonPath.list_at("$.checked.totals"),
                    }
                ),
            )
        )
        return plan.next(units).next(finish)

    def _check_units(self, function: lambda_.Function, settings: ReconciliationSettings) -> sfn.Map:
        """Each unit checked again until it is done; one that still fails ends the run."""
        # A unit's state is its own event: the Map's item first, then what the last invocation
        # returned (the unit resumed at its cursor, its totals so far).
        check = retried(self._invoke(function, "CheckUnit"))
        unit_done = (
            sfn.Choice(self, "UnitDone?")
            .when(sfn.Condition.boolean_equals("$.done", False), check)
            .otherwise(sfn.Succeed(self, "UnitChecked"))
        )
        check.next(unit_done)
        units = sfn.Map(
            self,
            "CheckUnits",
            items_path="$.units",
            item_selector={"step": CHECK, "unit.$": "$$.Map.Item.Value"},
            max_concurrency=settings.max_concurrency,
            # Only the units' totals go on (the state stays within 256 KB).
            result_selector={"totals.$": "$[*].totals"},
            result_path="$.checked",
        )
        units.item_processor(check)
        units.add_catch(
            sfn.Fail(
                self,
                "UnitFailed",
                error=UNIT_FAILED,
                cause=(
                    "a unit of the books check still failed after its retries: the checkpoint "
                    "was not moved, the next run checks this window again "
                    "(docs/operations.md, ReconciliationRunFailed)"
                ),
            ),
            errors=[sfn.Errors.ALL],
        )
        return units

    def _invoke(
        self, function: lambda_.Function, name: str, payload: sfn.TaskInput | None = None
    ) -> tasks.LambdaInvoke:
        """The function, handed `payload` (by default the state's whole input), answering
        with its own result as the state's output."""
        return tasks.LambdaInvoke(
            self,
            name,
            lambda_function=function,
            payload=payload,
            payload_response_only=True,
            # Retried by the state machine's own policy (`retried`), on any error.
            retry_on_service_exceptions=False,
        )

    def _schedule(self, every: cdk.Duration) -> events.Rule:
        # Named, so the role that starts the executions can trust EventBridge for this rule
        # alone (its ARN cannot be read from the rule: the rule's target names the role).
        stack = cdk.Stack.of(self)
        rule_name = schedule_rule_name(stack.stack_name)
        rule_arn = stack.format_arn(service="events", resource="rule", resource_name=rule_name)
        starter = iam.Role(
            self,
            "ScheduleRole",
            description="umavez: the hourly schedule starts the books check",
            # The confused deputy: EventBridge assumes it for this stack's rule only.
            assumed_by=iam.ServicePrincipal(
                "events.amazonaws.com",
                conditions={
                    "StringEquals": {"aws:SourceAccount": cdk.Aws.ACCOUNT_ID},
                    "ArnEquals": {"aws:SourceArn": rule_arn},
                },
            ),
        )
        return events.Rule(
            self,
            "ReconcileSchedule",
            rule_name=rule_name,
            schedule=events.Schedule.rate(every),
            targets=[targets.SfnStateMachine(self.state_machine, retry_attempts=2, role=starter)],
        )


def retried(task: tasks.LambdaInvoke) -> tasks.LambdaInvoke:
    """Any error of a step is retried: Plan and a unit's check only read, and Finish's
    checkpoint save succeeds again when it is the same checkpoint (a retry after it went
    through)."""
    task.add_retry(
        errors=[sfn.Errors.ALL],
        max_attempts=RETRY_ATTEMPTS,
        interval=cdk.Duration.seconds(RETRY_FIRST_WAIT_SECONDS),
        backoff_rate=RETRY_BACKOFF_RATE,
    )
    return task
