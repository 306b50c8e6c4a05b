"""`umavez status`'s readings of the books: the last reconciliation run (its summary beside its
checkpoint, and the state machine's failed runs) and each provider's last statement pass."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from functions.reconcile.checkpoint import CHECKPOINT_PK, LAST_RUN_SK
from functions.shared import tables
from functions.shared.dynamo import from_attributes, to_attributes
from functions.statement.service import LAST_RUN_PK as STATEMENT_RUNS_PK
from ops.status_reading import Reading, age_text

# A run's mismatches stay on the screen this long after it found them.
MISMATCHES_SHOWN_SECONDS: Final = 86_400


def reconciliation(
    dynamodb: Any,
    ledger_table: str,
    every_seconds: float,
    now: float,
    failed_runs: Sequence[str] = (),
    created_at: float | None = None,
) -> Reading:
    """The last run's summary, the last mismatches any run found, and the runs that failed.
    A person is needed when the last run found mismatches or stopped behind, when it is older
    than two periods (the schedule stopped), when a run found mismatches in the last day (each
    order is checked by one run only: the runs after it say nothing of it), or when a run
    failed (its window is checked again by the next, which may fail the same way)."""
    item = dynamodb.get_item(
        TableName=ledger_table,
        Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: LAST_RUN_SK}),
        ConsistentRead=True,
    ).get("Item")
    run = from_attributes(item) if item else {}
    problems: list[str] = []
    facts: dict[str, Any] = {"ran_at": run.get("ran_at"), "failed_runs": list(failed_runs)}
    if run.get("ran_at"):
        age = now - datetime.fromisoformat(str(run["ran_at"])).timestamp()
        mismatches = _counts(run.get("mismatches"))
        caught_up = bool(run.get("caught_up", True))
        problems += [f"{k} {v}" for k, v in sorted(mismatches.items())]
        problems += [] if caught_up else ["stopped at its cap, behind"]
        problems += [f"no run for {age_text(age)}"] if age > 2 * every_seconds else []
        text = f"last run {age_text(age)} ago, {int(run.get('orders_checked', 0))} orders"
        facts |= {
            "orders_checked": int(run.get("orders_checked", 0)),
            "mismatches": mismatches,
            "caught_up": caught_up,
            "age_seconds": int(age),
        }
    elif created_at is not None and now - created_at > 2 * every_seconds:
        text = "no run recorded"
        problems.append(f"none since the stack was created {age_text(now - created_at)} ago")
    else:
        text = "no run recorded yet"
    if run.get("last_mismatch_at") and run.get("last_mismatch_at") != run.get("ran_at"):
        found_age = now - datetime.fromisoformat(str(run["last_mismatch_at"])).timestamp()
        found = _counts(run.get("last_mismatches"))
        facts |= {"last_mismatch_at": str(run["last_mismatch_at"]), "last_mismatches": found}
        if found_age <= MISMATCHES_SHOWN_SECONDS and found:
            listed = ", ".join(f"{k} {v}" for k, v in sorted(found.items()))
            problems.append(
                f"{listed} found {age_text(found_age)} ago (the logs' `books mismatch` lines)"
            )
    if failed_runs:
        problems.append(f"{len(failed_runs)} runs failed: {', '.join(failed_runs[:3])}")
    text += ", " + ("; ".join(problems) if problems else "0 mismatches")
    return Reading("reconciliation", text, bool(problems), facts)


def statement(dynamodb: Any, ledger_table: str, now: float) -> Reading:
    """Each provider's last statement pass (`umavez statement`): what it booked that no
    delivery brought, and its mismatches. A person is needed while a last pass found any: each
    is a movement booked wrong, or money the provider never moved."""
    response = dynamodb.query(
        TableName=ledger_table,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": tables.PARTITION_KEY},
        ExpressionAttributeValues={":pk": {"S": STATEMENT_RUNS_PK}},
        ConsistentRead=True,
    )
    runs = [from_attributes(item) for item in response.get("Items", [])]
    if not runs:
        return Reading("statement", "no pass recorded yet (`umavez statement PROVIDER`)", False)
    told, problems, facts = [], [], {}
    for run in runs:
        provider = str(run[tables.SORT_KEY])
        age = now - datetime.fromisoformat(str(run["ran_at"])).timestamp()
        found = _counts(run.get("mismatches"))
        told.append(
            f"{provider} {age_text(age)} ago: {int(run.get('booked', 0))} booked that no delivery "
            f"brought, {sum(found.values())} mismatches"
        )
        problems += [f"{provider} {kind} {n}" for kind, n in sorted(found.items())]
        facts[provider] = {
            "ran_at": str(run["ran_at"]),
            "since": run.get("since"),
            "until": run.get("until"),
            "booked": int(run.get("booked", 0)),
            "mismatches": found,
            "details": run.get("details", []),
        }
    text = "; ".join(told) + (" (" + ", ".join(problems) + ")" if problems else "")
    return Reading("statement", text, bool(problems), facts)


def failed_runs(stepfunctions: Any, state_machine_arn: str, since: float) -> list[str]:
    """The state machine's executions that failed, timed out or were stopped since `since`
    (the newest first, as ListExecutions answers)."""
    failed = []
    for status in ("FAILED", "TIMED_OUT", "ABORTED"):
        pages = stepfunctions.get_paginator("list_executions").paginate(
            stateMachineArn=state_machine_arn, statusFilter=status
        )
        for page in pages:
            started = [e for e in page["executions"] if e["startDate"].timestamp() >= since]
            failed += [f"{e['name']} {status.lower()}" for e in started]
            if len(started) < len(page["executions"]):
                break  # older ones follow: the newest come first
    return failed


def _counts(value: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in dict(value or {}).items() if int(v)}
