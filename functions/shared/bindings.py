"""Reading bindings: which order each provider object is bound to (consistent reads)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from functions.shared import tables
from functions.shared.dynamo import from_attributes, raise_unclassified, to_attributes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def bound_orders(
    dynamodb: DynamoDBClient, ledger: str, provider: str, objects: Sequence[str]
) -> tuple[dict[str, str], bool]:
    """The order of each bound object, and whether DynamoDB left keys unread (throttled)."""
    if not objects:
        return {}, False
    keys = [
        to_attributes(
            {tables.PARTITION_KEY: tables.ref_pk(provider, ref), tables.SORT_KEY: tables.REF_SORT}
        )
        for ref in objects
    ]
    try:
        response = dynamodb.batch_get_item(
            RequestItems={ledger: {"Keys": keys, "ConsistentRead": True}}
        )
    except ClientError as exc:
        raise_unclassified(exc, "BatchGetItem")
    found = {
        str(item["ref"]): str(item["order_id"])
        for item in map(from_attributes, response["Responses"].get(ledger, []))
    }
    return found, bool(response.get("UnprocessedKeys"))
