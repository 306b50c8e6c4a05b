"""The run's records in the ledger, beside each other: its checkpoint (where the last run's two
passes stopped) and its summary (what `umavez status` shows an operator)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from functions.reconcile.report import Report
from functions.shared import tables
from functions.shared.dynamo import from_attributes, to_attributes
from functions.shared.items import RunCheckpoint
from functions.store import checkpoints

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CHECKPOINT_PK: Final = "RECONCILIATION"
CHECKPOINT_SK: Final = "CHECKPOINT"
# The last run's summary, beside its checkpoint: what `umavez status` shows an operator.
LAST_RUN_SK: Final = "LAST_RUN"


def read(db: DynamoDBClient, ledger: str) -> RunCheckpoint:
    """Where the last run's two passes stopped (`checked_until`, `lagged_until`)."""
    response = db.get_item(
        TableName=ledger,
        Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: CHECKPOINT_SK}),
        ConsistentRead=True,
    )
    return RunCheckpoint.of(from_attributes(response.get("Item", {})))


def save(
    db: DynamoDBClient, ledger: str, read: str, checked_until: str, lagged_until: str, now: str
) -> bool:
    """Saved only if it is still the one this run started from. Two runs that overlap (a
    manual run beside the scheduled one) read the same checkpoint; the first to finish
    saves, and the other's save is refused rather than writing over it with the window it
    had read. False when refused. Saving the same checkpoint again succeeds: a finish step
    retried after its save went through is not an overlap."""
    item = {
        tables.PARTITION_KEY: CHECKPOINT_PK,
        tables.SORT_KEY: CHECKPOINT_SK,
        "checked_until": checked_until,
        "lagged_until": lagged_until,
        "saved_at": now,
    }
    return checkpoints.save_passes(db, ledger, item, read)


def record_run(db: DynamoDBClient, ledger: str, report: Report, now: str) -> None:
    """The run's summary beside the checkpoint, when its checkpoint was saved (an
    overlapping run's is not shown over a newer one); and, whenever a run found
    mismatches, when and what: kept until a later run finds some again, so that a finding
    is still shown after the runs that follow it find nothing (each order is checked by
    one run only)."""
    sets: dict[str, object] = {}
    if report.checkpoint_saved:
        sets |= {
            "ran_at": now,
            "checked_from": report.checked_from,
            "checked_until": report.checked_until,
            "orders_checked": report.orders_checked,
            "mismatches": report.by_kind,
            "caught_up": report.caught_up,
        }
    if any(report.by_kind.values()):
        sets |= {"last_mismatch_at": now, "last_mismatches": report.by_kind}
    if not sets:
        return
    names = {f"#{name}": name for name in sets}
    db.update_item(
        TableName=ledger,
        Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: LAST_RUN_SK}),
        UpdateExpression="SET " + ", ".join(f"#{name} = :{name}" for name in sets),
        ExpressionAttributeNames=names,
        ExpressionAttributeValues=to_attributes({f":{k}": v for k, v in sets.items()}),
    )
