"""`umavez outbox revive` against the local server: one item by id, or every dead one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from devstack.local_aws import LocalAws
from devstack.resources import client
from functions.outbox.channels import ChannelError
from functions.outbox.sender import OutboxSender, SendPolicy, SendResult
from functions.shared import tables
from functions.shared.outbox import OutboxItem
from functions.shared.tables import TableNames, create_table_requests
from ops.cli import main
from tests.support.outbox import in_bucket, one_id_per_shard, put_parked

NAMES = TableNames(ledger="cli-ledger", outbox="cli-outbox")
NOW = 1_764_460_800.0


class Refusing:
    name = "eventbridge"

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        raise ChannelError("the sink refused (injected)")


@dataclass(frozen=True)
class Local:
    endpoint_url: str
    dynamodb: Any


@pytest.fixture(scope="module")
def local() -> Iterator[Local]:
    server = LocalAws().start()
    dynamodb = client("dynamodb", server.endpoint_url)
    for request in create_table_requests(NAMES):
        dynamodb.create_table(**request)
    yield Local(server.endpoint_url, dynamodb)
    server.stop()


def dead(local: Local, outbox_id: str) -> str:
    """A new item whose only sink refused it, given up at once (a give-up age of zero)."""
    put_parked(local.dynamodb, NAMES.outbox, outbox_id, NOW)
    sender = OutboxSender(
        local.dynamodb, NAMES.outbox, [Refusing()], lambda: NOW, SendPolicy(give_up_seconds=0)
    )
    assert sender.deliver(outbox_id, only_if_due=False).result is SendResult.DEAD
    return outbox_id


def revive(local: Local, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    capsys.readouterr()
    code = main(
        [
            "outbox",
            "revive",
            *args,
            "--json",
            "--endpoint-url",
            local.endpoint_url,
            "--outbox-table",
            NAMES.outbox,
        ]
    )
    return code, json.loads(capsys.readouterr().out)


def status(local: Local, outbox_id: str) -> str:
    key = {tables.OUTBOX_KEY: {"S": outbox_id}}
    return str(local.dynamodb.get_item(TableName=NAMES.outbox, Key=key)["Item"]["status"]["S"])


def test_revive_one_item_by_id(local: Local, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a dead item
    [outbox_id, *_] = one_id_per_shard()
    dead(local, outbox_id)

    # When the operator revives it, twice, and an id that names nothing
    first_code, [first] = revive(local, capsys, outbox_id)
    again_code, [again] = revive(local, capsys, outbox_id)
    missing_code, [missing] = revive(local, capsys, "obx_" + "f" * 64)

    # Then it is pending in its shard; the second time it was not dead; nothing was found
    assert (first_code, first["result"], first["attempts"]) == (0, "revived", 1)
    assert status(local, outbox_id) == "pending"
    assert outbox_id in in_bucket(local.dynamodb, NAMES.outbox, tables.due_bucket(outbox_id))
    assert (again_code, again["result"], again["status"]) == (1, "not_dead", "pending")
    assert (missing_code, missing["result"]) == (1, "not_found")


def test_revive_all_dead(local: Local, capsys: pytest.CaptureFixture[str]) -> None:
    # Given two dead items and a pending one
    [_, first, second, pending, *_] = one_id_per_shard()
    dead(local, first)
    dead(local, second)
    put_parked(local.dynamodb, NAMES.outbox, pending, NOW)

    # When the operator revives every dead item
    code, report = revive(local, capsys, "--all-dead")

    # Then both are pending again, the dead bucket is empty, and the pending one untouched
    assert code == 0
    assert sorted((r["outbox_id"], r["result"]) for r in report) == sorted(
        [(first, "revived"), (second, "revived")]
    )
    assert in_bucket(local.dynamodb, NAMES.outbox, tables.OUTBOX_DEAD_BUCKET) == []
    assert [status(local, i) for i in (first, second, pending)] == ["pending"] * 3


def test_revive_needs_an_id_or_all_dead_and_a_table_against_aws(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["outbox", "revive"])
    with pytest.raises(SystemExit):
        main(["outbox", "revive", "obx_x", "--all-dead"])
    assert main(["outbox", "revive", "--all-dead", "--endpoint-url", "aws"]) == 2
