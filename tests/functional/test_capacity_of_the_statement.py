"""What the statement pass's DynamoDB requests consume per line, measured: each request of a
pass over one line is captured against moto and accounted (`devstack/capacity.py`); the cost
model's figures (costmodel/statement.py) must be what is found here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from costmodel.statement import (
    ALREADY_BOOKED,
    BOOKED_NOW,
    LINE_REQUESTS,
    LINE_UNITS,
    ORDER_MATCH_UNITS,
)
from devstack.capacity import Units
from fixtures import stripe
from functions.statement.service import StatementPass
from functions.statement.stripe import line_of
from functions.stripe.balance import ListedBalanceTransaction
from tests.functional.test_capacity_of_processing import T0, Captured, TableStore, billed
from tests.support.clock import FakeClock
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

WINDOW = (T0 - 3600, T0 + 3600)


def _by_kind(units: Units) -> dict[str, float]:
    """Request units by kind, whichever table (`rru_strong:ledger` -> `rru_strong`)."""
    found: dict[str, float] = {}
    for metric, amount in units.items():
        kind = metric.split(":", 1)[0]
        found[kind] = found.get(kind, 0.0) + amount
    return found


def _pass_over_one_line(
    world: World, dynamodb: DynamoDBClient, clock: FakeClock, *, delivered: bool
) -> list[tuple[str, Units]]:
    """One payment's line passed on its own (its order matched only), each request with its
    units; `delivered`: its webhook booked it first."""
    ids = (stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch"))
    paid = stripe.charge_succeeded(*ids, 5000, T0)
    if delivered:
        world.deliver(paid)
    line = line_of(
        ListedBalanceTransaction.model_validate(
            stripe.balance_transaction(paid, "charge", 5000, fee=245)
        )
    )
    captured = Captured(dynamodb)
    before = TableStore(dynamodb)
    processor = world.make_processor(dynamodb, world.tables)
    StatementPass(dynamodb, world.tables, processor, clock).run(
        "stripe", [line], *WINDOW, orders=[ids[0]]
    )
    after = TableStore(dynamodb)
    requests = captured.take()
    # The first transaction is sized on the tables before the pass (an order it creates enters
    # the `changed` index then); every other request on the tables after it
    first = next(i for i, r in enumerate(requests) if r[0] == "TransactWriteItems")
    return [
        (r[0], billed(r, before if i == first else after, after)) for i, r in enumerate(requests)
    ]


def _line_units(requests: list[tuple[str, Any]]) -> dict[str, float]:
    """The line's own: every request but the match (the last Query) and the run's record."""
    *line, match, record = requests
    assert (match[0], record[0]) == ("Query", "PutItem")
    total = Units()
    for _, units in line:
        total.add(units)
    return _by_kind(total)


@pytest.mark.parametrize(("kind", "delivered"), [(ALREADY_BOOKED, True), (BOOKED_NOW, False)])
def test_a_lines_request_units_are_the_cost_models(
    world: World, dynamodb: DynamoDBClient, clock: FakeClock, kind: str, delivered: bool
) -> None:
    # Given a payment its webhook booked, or one no webhook brought
    # When its line is passed
    requests = _pass_over_one_line(world, dynamodb, clock, delivered=delivered)

    # Then the line's requests and units are the cost model's; the match reads the order's
    # entries (one 4 KB page, consistently) and the run's record is one item under 1 KB
    operations: dict[str, int] = {}
    for operation, _ in requests[:-2]:
        operations[operation] = operations.get(operation, 0) + 1
    assert operations == LINE_REQUESTS[kind]
    assert _line_units(requests) == LINE_UNITS[kind]
    assert _by_kind(requests[-2][1]) == ORDER_MATCH_UNITS
    assert _by_kind(requests[-1][1]) == {"wru_standard": 1}
    assert TABLES.ledger in next(iter(requests[-1][1]))
