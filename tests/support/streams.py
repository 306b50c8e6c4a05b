"""Read a table's DynamoDB Stream from moto and shape records as Lambda delivers them."""

from __future__ import annotations

from typing import Any

import boto3

from devstack.stream_poller import StreamRecords


class StreamReader:
    """Reads a table's stream (in-process moto) from where it last stopped."""

    def __init__(self, table_name: str) -> None:
        arn = boto3.client("dynamodb").describe_table(TableName=table_name)["Table"]
        self._records = StreamRecords(boto3.client("dynamodbstreams"), arn["LatestStreamArn"])

    def new_records(self) -> list[dict[str, Any]]:
        return self._records.next_records()


def stream_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}
