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

import aws_cdk as cdk
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from functions.reconcile.units import CHECK, FINISH, PLAN
from infra.constructs.lambdas import retained_log_group
from infra.nag import acknowledge_state_machine_findings
from infra.reconciliation import (
    RETRY_ATTEMPTS,
    RETRY_BACKOFF_RATE,
    RETRY_FIRST_WAIT_SECONDS,
    ReconciliationSettings,
)

UNIT_FAILED = "ReconciliationUnitFailed"


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

        def invoke(name: str, payload: sfn.TaskInput | None = None) -> tasks.LambdaInvoke:
            """The function, handed `payload` (by default the state's whole input), answering
            with its own result as the state's output."""
            return tasks.LambdaInvoke(
                self,
                name,
                lambda_function=function,
                payload=payload,
                payload_response_only=True,
                # Retried below, by the state machine's own policy, on any error.
                retry_on_service_exceptions=False,
            )

        def retried(task: tasks.LambdaInvoke) -> tasks.LambdaInvoke:
            task.add_retry(
                errors=[sfn.Errors.ALL],
                max_attempts=RETRY_ATTEMPTS,
                interval=cdk.Duration.seconds(RETRY_FIRST_WAIT_SECONDS),
                backoff_rate=RETRY_BACKOFF_RATE,
            )
            return task

        # Plan and Finish are retried too: the plan only reads, and the finish's checkpoint
        # save succeeds again when it is the same checkpoint (a retry after it went through).
        plan = retried(invoke("Plan", sfn.TaskInput.from_object({"step": PLAN})))
        # A unit's state is its own event: the Map's item first, then what the last invocation
        # returned (the unit resumed at its cursor, its totals so far).
        check = retried(invoke("CheckUnit"))
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
        finish = retried(
            invoke(
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
        # Step Functions adds each log group it writes to the account's CloudWatch Logs
        # resource policy, which holds 5,120 characters; groups under /aws/vendedlogs/ are let
        # in without it (AWS's advice). Named, so unique per stack creation: the stack id's
        # UUID, since a group kept after a failed create would make the next create fail.
        stack = cdk.Stack.of(self)
        creation = cdk.Fn.select(2, cdk.Fn.split("/", stack.stack_id))
        self.logs = retained_log_group(
            self,
            "Logs",
            retain_logs,
            name=f"/aws/vendedlogs/states/{stack.stack_name}-reconciliation-{creation}",
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="umavez: the hourly books check, its units side by side",
            definition_body=sfn.DefinitionBody.from_chainable(plan.next(units).next(finish)),
            timeout=cdk.Duration.seconds(settings.run_budget_seconds),
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.logs, level=sfn.LogLevel.ALL, include_execution_data=True
            ),
        )
        self.schedule = events.Rule(
            self,
            "ReconcileSchedule",
            schedule=events.Schedule.rate(every),
            targets=[targets.SfnStateMachine(self.state_machine, retry_attempts=2)],
        )
        acknowledge_state_machine_findings(self.state_machine, function)
