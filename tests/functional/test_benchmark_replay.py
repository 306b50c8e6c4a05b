"""The throughput benchmark's floor is the same work: the requests it records from process (the
read before writing and the transaction), replayed in order on fresh tables, leave exactly the
items process left (benchmarks/process_throughput.py). No timing here; speed is measured by
`make bench`."""

from __future__ import annotations

import time
from typing import Any

import boto3
from moto import mock_aws

from benchmarks.process_throughput import Recorder, payments, replay
from functions.process.service import EffectProcessor
from functions.shared.domain import Outcome
from functions.shared.dynamo import scan_items
from functions.shared.tables import TableNames, create_table_requests

NAMES = TableNames(ledger="bench-ledger", outbox="bench-outbox")


def fresh_tables() -> Any:
    dynamodb = boto3.client("dynamodb")
    for request in create_table_requests(NAMES):
        dynamodb.create_table(**request)
    return dynamodb


def contents(dynamodb: Any) -> dict[str, list[dict[str, Any]]]:
    return {
        table: sorted(scan_items(dynamodb, table), key=lambda item: repr(sorted(item.items())))
        for table in (NAMES.ledger, NAMES.outbox)
    }


def test_replaying_the_recorded_transactions_leaves_what_process_left() -> None:
    recorder = Recorder()
    with mock_aws():
        dynamodb = fresh_tables()
        recorder.attach(dynamodb)
        processor = EffectProcessor(dynamodb, NAMES, time.time)
        for body in payments(0, 5):
            assert [p.outcome for p in processor.process("stripe", body)] == [Outcome.APPLIED]
        # Nothing else to replay
        assert dict(recorder.operations) == {"BatchGetItem": 5, "TransactWriteItems": 5}
        processed = contents(dynamodb)
    assert len(recorder.transactions) == 5

    with mock_aws():
        dynamodb = fresh_tables()
        for operation, params in recorder.requests:
            replay(dynamodb, operation, params)
        replayed = contents(dynamodb)

    assert replayed == processed
    assert len(processed[NAMES.ledger]) == 5 * 3  # per payment: its order, entry and binding
    assert len(processed[NAMES.outbox]) == 5
