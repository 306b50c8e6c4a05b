"""Where a scheduled run stopped, moved only by the run that read it: two runs that overlap
(a manual one beside the scheduled one) read the same checkpoint, and the second to finish is
refused instead of writing over the first with the window it had read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from functions.shared import tables
from functions.shared.dynamo import to_attributes
from functions.store.transaction import is_condition_failure

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def advance(
    db: DynamoDBClient, ledger: str, pk: str, sk: str, previous: int | None, until: int
) -> bool:
    """`checked_until` moved from `previous` (None: never set) to `until`; False when another
    run moved it first."""
    condition = (
        "attribute_not_exists(checked_until)" if previous is None else "checked_until = :previous"
    )
    values = {":until": {"N": str(until)}}
    if previous is not None:
        values[":previous"] = {"N": str(previous)}
    try:
        db.update_item(
            TableName=ledger,
            Key={tables.PARTITION_KEY: {"S": pk}, tables.SORT_KEY: {"S": sk}},
            UpdateExpression="SET checked_until = :until",
            ConditionExpression=condition,
            ExpressionAttributeValues=values,
        )
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise
    return True


def save_passes(db: DynamoDBClient, ledger: str, item: Mapping[str, object], read: str) -> bool:
    """The item (with its `checked_until` and `lagged_until`) saved only if the checkpoint is
    still `read` (empty: none yet); False when refused. Saving the same passes again succeeds:
    a finish step retried after its save went through is not an overlap."""
    same = "(checked_until = :until AND lagged_until = :lagged)"
    values = {":until": item["checked_until"], ":lagged": item["lagged_until"]}
    condition: dict[str, Any]
    if read:
        condition = {
            "ConditionExpression": f"checked_until = :read OR {same}",
            "ExpressionAttributeValues": to_attributes({":read": read, **values}),
        }
    else:
        condition = {
            "ConditionExpression": f"attribute_not_exists(checked_until) OR {same}",
            "ExpressionAttributeValues": to_attributes(values),
        }
    try:
        db.put_item(TableName=ledger, Item=to_attributes(item), **condition)
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise
    return True
