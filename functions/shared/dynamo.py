"""DynamoDB plumbing shared by the functions: typed values and error classification in one place."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final, NoReturn

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from functions.shared.errors import UnexpectedWriteError, WriteContendedError

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import AttributeValueTypeDef

_serializer: Final = TypeSerializer()
_deserializer: Final = TypeDeserializer()

# Codes of a failed request that mean "nothing was written, the same request may succeed later".
CONTENDED_ERRORS: Final = frozenset(
    {
        "ThrottlingException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
    }
)


# DynamoDB numbers have 38 significant digits; boto3 refuses larger ints (so does the fallback).
_NUMBER_LIMIT: Final = 10**38


def to_attributes(values: Mapping[str, object]) -> dict[str, AttributeValueTypeDef]:
    """Plain values to DynamoDB's typed form; `None` values are left out, not stored as NULL."""
    return {name: typed(value) for name, value in values.items() if value is not None}


def typed(value: object) -> AttributeValueTypeDef:
    """boto3's TypeSerializer, exactly, with a shortcut for the plain str, bool and int that
    make up nearly every item here: the serializer's type probing was most of the time process
    spent building a transaction (benchmarks/process_throughput.py)."""
    kind = type(value)
    if kind is str:
        return {"S": value}  # type: ignore[typeddict-item]  # narrowed by `kind is str`
    if kind is bool:
        return {"BOOL": value}  # type: ignore[typeddict-item]
    if kind is int and -_NUMBER_LIMIT < value < _NUMBER_LIMIT:  # type: ignore[operator]
        return {"N": str(value)}
    serialized: AttributeValueTypeDef = _serializer.serialize(value)
    return serialized


def from_attributes(item: Mapping[str, Any]) -> dict[str, Any]:
    """DynamoDB's typed form to plain values (numbers come back as Decimal; ints are converted)."""
    plain = {name: _deserializer.deserialize(value) for name, value in item.items()}
    return {name: _plain_number(value) for name, value in plain.items()}


def scan_items(
    dynamodb: Any, table: str, *, consistent_read: bool = False
) -> Iterator[dict[str, Any]]:
    """Every item of `table`, page after page, as plain values."""
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table, **({"ConsistentRead": True} if consistent_read else {})
    )
    for page in pages:
        for item in page["Items"]:
            yield from_attributes(item)


def _plain_number(value: Any) -> Any:
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return value


def raise_unclassified(exc: ClientError, operation: str) -> NoReturn:
    code = exc.response.get("Error", {}).get("Code", "")
    if code in CONTENDED_ERRORS:
        raise WriteContendedError(f"{operation}: {code}") from exc
    raise UnexpectedWriteError(f"{operation}: {code or 'unknown error'}") from exc
