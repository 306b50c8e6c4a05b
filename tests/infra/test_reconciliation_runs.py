"""The hourly books check as deployed: a state machine that fans its units out, retries them,
fails loudly, runs on its schedule and is alarmed (infra/constructs/reconciliation.py)."""

from __future__ import annotations

import json
from typing import Any

from functions.reconcile.units import CHECK, FINISH, PLAN
from infra.constructs.reconciliation import UNIT_FAILED
from infra.reconciliation import RECONCILIATION, RETRY_ATTEMPTS
from tests.infra.conftest import Synthesized
from tests.infra.test_monitoring import alarm, metric_stats, returned_expression
from tests.infra.test_stack import function, logical_id


def machine(synth: Synthesized) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The state machine's logical id, its properties and its definition (the function's ARN
    as `FUNCTION`)."""
    [(machine_id, resource)] = synth.resources("AWS::StepFunctions::StateMachine").items()
    function_id = logical_id(synth, "AWS::Lambda::Function", "Reconciliation")
    parts = resource["Properties"]["DefinitionString"]["Fn::Join"][1]
    assert all(
        isinstance(part, str) or part == {"Fn::GetAtt": [function_id, "Arn"]} for part in parts
    )
    definition = json.loads("".join(p if isinstance(p, str) else "FUNCTION" for p in parts))
    return machine_id, resource["Properties"], definition


def test_a_run_is_plan_then_its_units_side_by_side_then_finish(prod: Synthesized) -> None:
    _, _, definition = machine(prod)
    states = definition["States"]

    # Plan, then the Map of units, then Finish: each a step of the reconciliation function
    assert definition["StartAt"] == "Plan"
    assert states["Plan"]["Parameters"] == {"step": PLAN}
    assert states["Plan"]["Next"] == "CheckUnits"
    units = states["CheckUnits"]
    assert (units["Type"], units["ItemsPath"], units["Next"]) == ("Map", "$.units", "Finish")
    assert units["ItemSelector"] == {"step": CHECK, "unit.$": "$$.Map.Item.Value"}
    assert states["Finish"]["Parameters"] == {
        "step": FINISH,
        "run.$": "$.run",
        "totals.$": "$.checked.totals",
    }
    assert {states[s]["Resource"] for s in ("Plan", "Finish")} == {"FUNCTION"}
    # The Map's concurrency is the setting the capacity model counts
    assert units["MaxConcurrency"] == RECONCILIATION.max_concurrency
    # Only the units' totals go on to Finish (a state holds at most 256 KB)
    assert units["ResultSelector"] == {"totals.$": "$[*].totals"}
    assert units["ResultPath"] == "$.checked"


def test_a_unit_is_invoked_again_until_done_and_retried_when_it_fails(prod: Synthesized) -> None:
    _, _, definition = machine(prod)
    processor = definition["States"]["CheckUnits"]["ItemProcessor"]
    check = processor["States"]["CheckUnit"]

    # Each unit: the function on the unit's own state, again while it says it is not done
    assert processor["StartAt"] == "CheckUnit"
    assert check["Resource"] == "FUNCTION"
    assert "Parameters" not in check  # its whole state: the unit, its cursor, its totals so far
    assert processor["States"][check["Next"]]["Choices"] == [
        {"Variable": "$.done", "BooleanEquals": False, "Next": "CheckUnit"}
    ]
    # And a failed invocation is retried, with backoff, whatever the error
    [retry] = check["Retry"]
    assert retry["ErrorEquals"] == ["States.ALL"]
    assert retry["MaxAttempts"] == RETRY_ATTEMPTS
    assert retry["BackoffRate"] > 1
    assert all(s["Retry"] for s in (definition["States"]["Plan"], definition["States"]["Finish"]))


def test_a_unit_that_still_fails_fails_the_execution_before_finish(prod: Synthesized) -> None:
    _, _, definition = machine(prod)
    states = definition["States"]

    [catch] = states["CheckUnits"]["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    failed = states[catch["Next"]]
    assert (failed["Type"], failed["Error"]) == ("Fail", UNIT_FAILED)
    assert "checkpoint was not moved" in failed["Cause"]


def test_a_run_ends_within_its_budget_before_the_next_is_due_and_is_recorded(
    prod: Synthesized,
) -> None:
    machine_id, props, definition = machine(prod)
    [rule] = [
        r
        for r in prod.resources("AWS::Events::Rule").values()
        if r["Properties"]["Targets"][0]["Arn"] == {"Ref": machine_id}
    ]

    assert rule["Properties"]["ScheduleExpression"] == "rate(1 hour)"
    assert definition["TimeoutSeconds"] == RECONCILIATION.run_budget_seconds < 3600
    assert props["TracingConfiguration"] == {"Enabled": True}
    assert props["LoggingConfiguration"]["Level"] == "ALL"


def test_the_function_outlasts_one_invocations_share_of_a_unit(prod: Synthesized) -> None:
    timeout = function(prod, "Reconciliation")["Timeout"]
    share = RECONCILIATION.orders_per_invocation * RECONCILIATION.seconds_per_order_checked

    assert timeout == RECONCILIATION.check_timeout_seconds
    assert timeout >= 3 * share
    assert timeout <= 900  # Lambda's longest


def test_a_failed_timed_out_or_aborted_run_pages_through_the_alarm_topic(
    prod: Synthesized,
) -> None:
    machine_id, _, _ = machine(prod)
    props = alarm(prod, "ReconciliationRunFailed")
    [topic] = prod.resources("AWS::SNS::Topic")

    read = metric_stats(props)
    dimensions = [{"Name": "StateMachineArn", "Value": {"Ref": machine_id}}]
    assert read == {
        "failed": ("AWS/States", "ExecutionsFailed", dimensions),
        "timed_out": ("AWS/States", "ExecutionsTimedOut", dimensions),
        "aborted": ("AWS/States", "ExecutionsAborted", dimensions),
    }
    assert returned_expression(props) == ("FILL(failed, 0) + FILL(timed_out, 0) + FILL(aborted, 0)")
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")
    assert props["AlarmActions"] == [{"Ref": topic}]


def test_the_state_machine_may_invoke_the_reconciliation_function_only(
    prod: Synthesized,
) -> None:
    role_id = logical_id_of_machine_role(prod)
    function_id = logical_id(prod, "AWS::Lambda::Function", "Reconciliation")
    statements = [
        s
        for p in prod.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    [invoke] = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]

    arn = {"Fn::GetAtt": [function_id, "Arn"]}
    assert invoke["Resource"] == [arn, {"Fn::Join": ["", [arn, ":*"]]}]


def logical_id_of_machine_role(synth: Synthesized) -> str:
    _, props, _ = machine(synth)
    return str(props["RoleArn"]["Fn::GetAtt"][0])


def test_its_log_group_is_a_vended_one_named_once_per_stack_creation(prod: Synthesized) -> None:
    # Given the synthesized stack, When the state machine's log group is read
    _, props, _ = machine(prod)
    [destination] = props["LoggingConfiguration"]["Destinations"]
    group_id = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    name = prod.resources("AWS::Logs::LogGroup")[group_id]["Properties"]["LogGroupName"]

    # Then it lives under /aws/vendedlogs/ (Step Functions then leaves the account's 5,120-
    # character CloudWatch Logs resource policy alone), and its name ends with the stack id's
    # UUID: a group kept after a failed create does not block the next create
    [_, parts] = name["Fn::Join"]
    assert parts[0].startswith("/aws/vendedlogs/states/Umavez-")
    assert parts[1:] == [{"Fn::Select": [2, {"Fn::Split": ["/", {"Ref": "AWS::StackId"}]}]}]
