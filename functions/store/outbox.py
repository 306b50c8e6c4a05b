"""The outbox's conditional writes: an item claimed only when free (or its holder's lease ran
out), changed only by its claim holder (or, on the first try, while still new), revived only
when dead or stranded, and re-opened for its e-mail only once it was sent without one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from functions.shared import tables
from functions.shared.dynamo import from_attributes, raise_unclassified, to_attributes
from functions.shared.outbox import EMAIL_CHANNEL, EMAIL_OWED, OutboxStatus, iso_time, outbox_id_for
from functions.store.reads import order_entries
from functions.store.transaction import is_condition_failure

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

# The condition of every write of the first try: the item is still new (pending, in no index).
# It fails only if an earlier try of the same stream record handed the item to the sweeper.
STILL_NEW: Final = "#status = :pending AND attribute_not_exists(#bucket)"

_NAMES: Final = {
    "#status": "status",
    "#bucket": tables.OUTBOX_DUE_BUCKET,
    "#due": tables.OUTBOX_DUE_AT,
    "#expires": tables.EXPIRES_AT,
}


@dataclass(frozen=True)
class Conditional:
    """Whether a conditional write held, and the item as it was before it (or as found, when
    the condition did not hold; empty if there was none)."""

    held: bool
    item: dict[str, Any] = field(default_factory=dict)


def _key(outbox_id: str) -> Any:
    return to_attributes({tables.OUTBOX_KEY: outbox_id})


def claim(
    db: DynamoDBClient,
    table: str,
    outbox_id: str,
    token: str,
    *,
    now: int,
    lease_end: int,
    only_if_due: bool,
) -> dict[str, Any] | None:
    """Take the item for one try: the item as it was before, or None if it is not free (sent,
    dead, not due, or held by a sender whose lease has not run out)."""
    pending = "#status = :pending" + (" AND #due <= :now" if only_if_due else "")
    try:
        response = db.update_item(
            TableName=table,
            Key=_key(outbox_id),
            # The bucket is set again so a lease that runs out is found by the sweeper.
            UpdateExpression=(
                "SET #status = :sending, claim_token = :token, #due = :lease_end, "
                "#bucket = :bucket ADD attempts :one"
            ),
            ConditionExpression=(
                f"attribute_exists(#id) AND (({pending}) OR (#status = :sending AND #due <= :now))"
            ),
            ExpressionAttributeNames={
                "#id": tables.OUTBOX_KEY,
                "#status": "status",
                "#due": tables.OUTBOX_DUE_AT,
                "#bucket": tables.OUTBOX_DUE_BUCKET,
            },
            ExpressionAttributeValues=to_attributes(
                {
                    ":sending": OutboxStatus.SENDING.value,
                    ":pending": OutboxStatus.PENDING.value,
                    ":token": token,
                    ":lease_end": lease_end,
                    ":bucket": tables.due_bucket(outbox_id),
                    ":now": now,
                    ":one": 1,
                }
            ),
            ReturnValues="ALL_OLD",
        )
    except ClientError as exc:
        if is_condition_failure(exc):
            return None
        raise_unclassified(exc, "UpdateItem")
    return from_attributes(response["Attributes"])


def update_held(
    db: DynamoDBClient,
    table: str,
    outbox_id: str,
    token: str | None,
    expression: str,
    values: Mapping[str, object],
) -> bool:
    """An update that only the current claim holder may make; without a claim (the first
    try), only while the item is still new, and it records the attempt. False if the condition
    did not hold: someone else owns the item now."""
    if token is None:
        expression = expression.replace("SET ", "SET attempts = :attempts, ", 1)
        values = {**values, ":attempts": 1, ":pending": OutboxStatus.PENDING.value}
        condition = STILL_NEW
    else:
        values = {**values, ":token": token}
        condition = "claim_token = :token"
    try:
        db.update_item(
            TableName=table,
            Key=_key(outbox_id),
            UpdateExpression=expression,
            ConditionExpression=condition,
            ExpressionAttributeNames={
                k: v for k, v in _NAMES.items() if k in expression or k in condition
            },
            ExpressionAttributeValues=to_attributes(values),
        )
    except ClientError as exc:
        if is_condition_failure(exc):
            return False
        raise_unclassified(exc, "UpdateItem")
    return True


def revive(db: DynamoDBClient, table: str, outbox_id: str, now: float) -> Conditional:
    """Pending again, due now, in its shard of the due index, with its attempts counted from 0;
    only a dead item, or one stranded outside the due index."""
    try:
        response = db.update_item(
            TableName=table,
            Key=_key(outbox_id),
            UpdateExpression=(
                "SET #status = :pending, #bucket = :bucket, #due = :now, "
                "revived_at = :revived_at, attempts = :zero ADD revivals :one"
            ),
            # Dead, or stuck outside the due index: pending, never handed to the sweeper
            # (its first try was lost; reconciliation reports it as stuck).
            ConditionExpression=(
                "#status = :dead OR (#status = :pending AND attribute_not_exists(#bucket))"
            ),
            ExpressionAttributeNames={
                "#status": "status",
                "#bucket": tables.OUTBOX_DUE_BUCKET,
                "#due": tables.OUTBOX_DUE_AT,
            },
            ExpressionAttributeValues=to_attributes(
                {
                    ":pending": OutboxStatus.PENDING.value,
                    ":dead": OutboxStatus.DEAD.value,
                    ":bucket": tables.due_bucket(outbox_id),
                    ":now": int(now),
                    ":revived_at": iso_time(now),
                    ":zero": 0,
                    ":one": 1,
                }
            ),
            ReturnValues="ALL_OLD",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except ClientError as exc:
        if not is_condition_failure(exc):
            raise_unclassified(exc, "UpdateItem")
        old: Mapping[str, Any] = exc.response.get("Item", {})  # type: ignore[assignment]
        return Conditional(held=False, item=from_attributes(old))
    return Conditional(held=True, item=from_attributes(response.get("Attributes", {})))


def reopen_for_email(db: DynamoDBClient, outbox_table: str, outbox_id: str, now: float) -> bool:
    """A notification sent before its order knew whom to e-mail (its try found no recipient
    and sent EventBridge only) goes back to the sweeper, which sends it through the channels
    that have not taken it, the e-mail once (the sender decides, by the e-mail policy, whether
    it is e-mailed at all). Only a sent item the policy owes the e-mail (`email_owed`, set by
    the try that lacked a recipient): one not sent yet reads the recipient when it is, one not
    e-mailed by policy is never re-opened. Both sides call it: process once it taught the
    order its recipient, the sender once its try is recorded, if the order learned one
    meanwhile; whichever comes second finds the item sent. Whether this call re-opened it."""
    try:
        db.update_item(
            TableName=outbox_table,
            Key=_key(outbox_id),
            UpdateExpression=(
                "SET #status = :pending, #bucket = :bucket, #due = :now, "
                f"revived_at = :revived_at REMOVE sent_at, #expires, {EMAIL_OWED}"
            ),
            ConditionExpression=(
                f"#status = :sent AND {EMAIL_OWED} = :owed AND NOT contains(channels_sent, :email)"
            ),
            ExpressionAttributeNames={
                "#status": "status",
                "#bucket": tables.OUTBOX_DUE_BUCKET,
                "#due": tables.OUTBOX_DUE_AT,
                "#expires": tables.EXPIRES_AT,
            },
            ExpressionAttributeValues=to_attributes(
                {
                    ":pending": OutboxStatus.PENDING.value,
                    ":sent": OutboxStatus.SENT.value,
                    ":email": EMAIL_CHANNEL,
                    ":owed": True,
                    ":bucket": tables.due_bucket(outbox_id),
                    ":now": int(now),
                    ":revived_at": iso_time(now),
                }
            ),
        )
    except ClientError as exc:
        if not is_condition_failure(exc):
            raise_unclassified(exc, "UpdateItem")
        return False
    return True


def reopen_the_orders_owed_emails(
    db: DynamoDBClient, ledger: str, outbox_table: str, order_id: str, now: float, *, but: str
) -> int:
    """An order has just learned whom to e-mail: every notification of its entries that went
    out without the e-mail it is owed goes back to the sweeper (`reopen_for_email`), not only
    the one of the entry that taught it (`but`, whose item the caller handles). A part capture
    naming the customer, booked after the final capture's notification left without an
    address, must still bring that notification its e-mail. Read after the recipient is
    written, the entries include every item the sender may have marked owed before reading
    the order (the sender marks, then reads; this writes, then reads). How many it re-opened."""
    reopened = 0
    for entry in order_entries(db, ledger, order_id):
        key = str(entry.get("effect_key", ""))
        if key and key != but:
            reopened += reopen_for_email(db, outbox_table, outbox_id_for(key), now)
    return reopened
