"""Read a table's DynamoDB Stream from moto and shape records as Lambda delivers them."""

from __future__ import annotations

from typing import Any

import boto3

from local_stack.pollers import lambda_stream_record


class StreamReader:
    """Reads every shard of a table's stream from where it last stopped."""

    def __init__(self, table_name: str) -> None:
        self._ddb = boto3.client("dynamodb")
        self._streams = boto3.client("dynamodbstreams")
        self._arn = self._ddb.describe_table(TableName=table_name)["Table"]["LatestStreamArn"]
        self._iterators: dict[str, str | None] = {}

    def new_records(self) -> list[dict[str, Any]]:
        shards = self._streams.describe_stream(StreamArn=self._arn)["StreamDescription"]["Shards"]
        records: list[dict[str, Any]] = []
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self._arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            iterator = self._iterators[shard_id]
            if iterator is None:
                continue
            response = self._streams.get_records(ShardIterator=iterator)
            self._iterators[shard_id] = response.get("NextShardIterator")
            records += [lambda_stream_record(dict(r), self._arn) for r in response["Records"]]
        return records


def stream_event(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"Records": records}
