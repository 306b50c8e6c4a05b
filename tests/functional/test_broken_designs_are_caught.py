"""Every broken design makes a guarantee test fail, so nobody can simplify a guarantee away."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

import pytest

from tests.functional import test_bindings as bindings
from tests.functional import test_guarantees as guarantees
from tests.functional import test_ledger as ledger
from tests.support.broken_designs import (
    BROKEN_DESIGNS,
    CheckThenInsert,
    EventIdKey,
    LastBindingWins,
    NoOrderingGuard,
    OutboxOutsideTransaction,
    ReversalWithoutCheck,
    StaleNotAnnounced,
)
from tests.support.clients import serialized
from tests.support.clock import FakeClock
from tests.support.world import TABLES, World

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from functions.process.service import EffectProcessor

GuaranteeTest = Callable[[World], None]

CAUGHT_BY: list[tuple[type[EffectProcessor], GuaranteeTest]] = [
    (CheckThenInsert, guarantees.test_redelivery_while_the_first_is_in_flight_is_a_duplicate),
    (EventIdKey, guarantees.test_one_payment_announced_by_three_event_types_is_one_effect),
    (
        NoOrderingGuard,
        guarantees.test_an_older_payment_that_read_the_order_before_a_newer_refund_landed_is_stale,
    ),
    (
        OutboxOutsideTransaction,
        guarantees.test_crash_after_commit_before_the_queue_delete_redelivers_as_duplicate,
    ),
    (
        StaleNotAnnounced,
        ledger.test_earlier_partial_refund_arriving_last_is_counted_and_announced_late,
    ),
    (LastBindingWins, bindings.test_one_payment_named_for_two_orders_in_parallel_is_credited_once),
    (
        ReversalWithoutCheck,
        ledger.test_refund_that_never_succeeded_never_counts_even_if_its_success_arrives_late,
    ),
]


def test_every_broken_design_has_a_test_that_catches_it() -> None:
    assert {design for design, _ in CAUGHT_BY} == set(BROKEN_DESIGNS)


@pytest.mark.parametrize(
    ("design", "guarantee"), CAUGHT_BY, ids=[design.__name__ for design, _ in CAUGHT_BY]
)
def test_broken_design_fails_its_guarantee_test(
    dynamodb: DynamoDBClient, design: type[EffectProcessor], guarantee: GuaranteeTest
) -> None:
    # Given the guarantee test pointed at a processor with one guarantee simplified away
    world = World(serialized(dynamodb), TABLES, partial(design, clock=FakeClock()))

    # When it runs, Then it fails on the state it finds
    with pytest.raises(AssertionError):
        guarantee(world)
