"""The waiting room's items, as DynamoDB takes them: a delivery parked once (its first time
kept), a re-check watch begun, moved or ended only by its own generation, and a parked
delivery moved (to unmatched, or recorded as ignored and kept dormant) only while it is still
parked: a re-drive or an attach in between wins. Plain renderers: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from functions.shared import tables
from functions.shared.domain import Outcome
from functions.shared.dynamo import to_attributes
from functions.store.ledger import LedgerItems
from functions.store.transaction import Placed, Slot, Transaction

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import (
        AttributeValueTypeDef,
        DeleteItemInputTypeDef,
        PutItemInputTypeDef,
        TransactWriteItemTypeDef,
        UpdateItemInputTypeDef,
    )


class WaitingItems:
    """Renders the waiting room's items for one stack's ledger table."""

    def __init__(self, table_names: tables.TableNames, retention_seconds: int) -> None:
        self._ledger = table_names.ledger
        self._retention_seconds = retention_seconds

    def parked(self, item: Mapping[str, object]) -> PutItemInputTypeDef:
        """A delivery parked: written once, so a delivery parked again keeps its first time."""
        # A transaction's Put and a PutItem take the same fields.
        return LedgerItems.first_record(  # type: ignore[return-value]
            {"TableName": self._ledger, "Item": to_attributes(item)}
        )

    def watch_begun(
        self,
        watched: str,
        delivery: Mapping[str, str],
        ref: str,
        now: int,
        next_check_at: int,
        generation: str,
    ) -> UpdateItemInputTypeDef:
        """A watch of `ref` with a new generation; the schedule of one already there is kept."""
        return {
            "TableName": self._ledger,
            "Key": self._recheck_key(watched),
            "UpdateExpression": (
                "SET provider = :provider, event_id = :event, event_type = :type, "
                "body = :body, #object = :object, "
                "watching_since = if_not_exists(watching_since, :now), "
                "next_check_at = if_not_exists(next_check_at, :next), "
                "checks = if_not_exists(checks, :zero), #generation = :generation"
            ),
            "ExpressionAttributeNames": {"#object": "object", "#generation": "generation"},
            "ExpressionAttributeValues": to_attributes(
                {
                    ":provider": delivery["provider"],
                    ":event": delivery["event_id"],
                    ":type": delivery["event_type"],
                    ":body": delivery["body"],
                    ":object": ref,
                    ":now": now,
                    ":next": next_check_at,
                    ":zero": 0,
                    ":generation": generation,
                }
            ),
        }

    def watch_ended(self, watched: str, generation: str) -> DeleteItemInputTypeDef:
        """A re-check watch removed, only if it is still the generation that found its object
        settled (watched again since, the newer one stays)."""
        return {
            "TableName": self._ledger,
            "Key": self._recheck_key(watched),
            "ConditionExpression": "#generation = :generation",
            "ExpressionAttributeNames": {"#generation": "generation"},
            "ExpressionAttributeValues": to_attributes({":generation": generation}),
        }

    def next_check(
        self, watched: str, generation: str, next_check_at: int, checks: int
    ) -> UpdateItemInputTypeDef:
        """A watch's next re-check, only on the generation that was re-driven."""
        return {
            "TableName": self._ledger,
            "Key": self._recheck_key(watched),
            "UpdateExpression": "SET next_check_at = :next, checks = :checks",
            "ConditionExpression": "#generation = :generation",
            "ExpressionAttributeNames": {"#generation": "generation"},
            "ExpressionAttributeValues": to_attributes(
                {":next": next_check_at, ":checks": checks, ":generation": generation}
            ),
        }

    def to_unmatched(self, item: Mapping[str, Any], now: int) -> Transaction:
        """A parked delivery listed as unmatched, only if it still waits."""
        unmatched = {
            **item,
            tables.PARTITION_KEY: tables.UNMATCHED_PK,
            "unmatched_at": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="seconds"),
        }
        put: TransactWriteItemTypeDef = {
            "Put": {"TableName": self._ledger, "Item": to_attributes(unmatched)}
        }
        return Transaction.of(
            Placed(Slot.UNMATCHED, put), self.still_parked_removed(item, tables.WAITING_PK)
        )

    def ignored(self, item: Mapping[str, Any], partition: str, now: int) -> Transaction:
        """A delivery that moves no money and whose objects no order was ever bound to: its
        audit record says so (written once, kept for the retention), and it is kept dormant
        for the retention instead of parked in `partition`."""
        recorded_at = datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds")
        objects = ", ".join(str(ref) for ref in item.get("objects", []))
        record = {
            tables.PARTITION_KEY: tables.delivery_pk(item["provider"], item["event_id"]),
            tables.SORT_KEY: tables.DELIVERY_SORT,
            "outcome": Outcome.IGNORED.value,
            "reason": f"no order was ever bound to {objects}; nothing to bind (moves no money)",
            "provider": item["provider"],
            "event_id": item["event_id"],
            "event_type": item.get("event_type"),
            "recorded_at": recorded_at,
            tables.EXPIRES_AT: now + self._retention_seconds,
        }
        audit: TransactWriteItemTypeDef = {
            "Put": LedgerItems.first_record(
                {"TableName": self._ledger, "Item": to_attributes(record)}
            )
        }
        return Transaction.of(Placed(Slot.AUDIT, audit), self.kept_dormant(item, partition, now))

    def kept_dormant(self, item: Mapping[str, Any], partition: str, now: int) -> list[Placed]:
        """Out of `partition` (only if still there), into the dormant deliveries."""
        dormant = {
            **item,
            tables.PARTITION_KEY: tables.DORMANT_PK,
            "dormant_since": datetime.fromtimestamp(now, tz=UTC).isoformat(timespec="milliseconds"),
            tables.EXPIRES_AT: now + self._retention_seconds,
        }
        keep: TransactWriteItemTypeDef = {
            "Put": {"TableName": self._ledger, "Item": to_attributes(dormant)}
        }
        return [self.still_parked_removed(item, partition), Placed(Slot.DORMANT, keep)]

    def still_parked_removed(self, item: Mapping[str, Any], partition: str) -> Placed:
        """A parked delivery's removal, only if it is still there (one re-driven or attached
        meanwhile is not removed twice)."""
        key = self.parked_key(item, partition)
        delete: TransactWriteItemTypeDef = {
            "Delete": {
                "TableName": self._ledger,
                "Key": key,
                "ConditionExpression": "attribute_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": tables.PARTITION_KEY},
            }
        }
        return Placed(Slot.PARKED, delete)

    def parked_key(
        self, item: Mapping[str, Any], partition: str
    ) -> dict[str, AttributeValueTypeDef]:
        return to_attributes(
            {tables.PARTITION_KEY: partition, tables.SORT_KEY: item[tables.SORT_KEY]}
        )

    @staticmethod
    def _recheck_key(watched: str) -> dict[str, AttributeValueTypeDef]:
        return to_attributes({tables.PARTITION_KEY: tables.RECHECK_PK, tables.SORT_KEY: watched})
