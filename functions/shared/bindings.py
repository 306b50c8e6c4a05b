"""Reading bindings: which order each provider object is bound to (consistent reads)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

from botocore.exceptions import ClientError

from functions.shared import tables
from functions.shared.dynamo import from_attributes, raise_unclassified, to_attributes

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

BATCH_GET_LIMIT: Final = 100
UNPROCESSED_ATTEMPTS: Final = 3
# A ledger item's (partition key, sort key).
Key = tuple[str, str]


def binding_key(provider: str, ref: str) -> Key:
    return (tables.ref_pk(provider, ref), tables.REF_SORT)


def ledger_items(
    dynamodb: DynamoDBClient, ledger: str, keys: Iterable[Key]
) -> tuple[dict[Key, dict[str, Any]], set[Key]]:
    """Consistent reads of the ledger items that exist, 100 keys a request (a page of work
    is one read, not one each). Keys DynamoDB leaves unprocessed (throttling) are asked again
    a few times; those it still left are returned, unread."""
    wanted = sorted(set(keys))  # BatchGetItem refuses a key asked twice
    found: dict[Key, dict[str, Any]] = {}
    unread: set[Key] = set()
    for start in range(0, len(wanted), BATCH_GET_LIMIT):
        request: Any = {
            ledger: {
                "Keys": [
                    to_attributes({tables.PARTITION_KEY: pk, tables.SORT_KEY: sk})
                    for pk, sk in wanted[start : start + BATCH_GET_LIMIT]
                ],
                "ConsistentRead": True,
            }
        }
        for _ in range(UNPROCESSED_ATTEMPTS):
            # A refused request raises botocore's own error, as the callers' callers expect.
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in map(from_attributes, response["Responses"].get(ledger, [])):
                found[(item[tables.PARTITION_KEY], item[tables.SORT_KEY])] = item
            request = response.get("UnprocessedKeys")
            if not request:
                break
        else:
            unread |= {
                (from_attributes(k)[tables.PARTITION_KEY], from_attributes(k)[tables.SORT_KEY])
                for k in request[ledger]["Keys"]
            }
    return found, unread


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
        # BatchGetItem refuses a key asked twice (a movement named as its own payment)
        for ref in dict.fromkeys(objects)
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
