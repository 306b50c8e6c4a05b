"""The effect transaction by named slots, without DynamoDB: a cancellation's reasons are read
back by the slot each item occupies, whatever its position, and `decide` turns them into
what happened, in the order that keeps the books right."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from functions.process.verdict import Verdict, decide
from functions.store.transaction import CONDITION_FAILED, Cancellation, Placed, Slot, Transaction

if TYPE_CHECKING:
    from mypy_boto3_dynamodb.type_defs import TransactWriteItemTypeDef

NONE = "None"


def item(name: str) -> TransactWriteItemTypeDef:
    return {"Put": {"TableName": name, "Item": {"pk": {"S": name}}}}


def effect_transaction(bindings: int = 1, reversal: bool = False) -> Transaction:
    return Transaction.of(
        Placed(Slot.KEY, item("key")),
        Placed(Slot.ORDER, item("order")),
        Placed(Slot.OUTBOX, item("outbox")),
        [Placed(Slot.REVERSED, item("reversed"))] if reversal else [],
        [Placed(Slot.BINDING, item(f"ref-{n}"), f"pi_{n}") for n in range(bindings)],
    )


def cancelled(
    transaction: Transaction, failing: dict[int, dict[str, Any] | None], code: str = NONE
) -> Cancellation:
    """DynamoDB's answer: a reason per item, by position; ALL_OLD items where returned."""
    codes: list[str | None] = [
        CONDITION_FAILED if n in failing else code for n in range(len(transaction.placed))
    ]
    items = [
        {k: {"S": str(v)} for k, v in (failing.get(n) or {}).items()} or None
        for n in range(len(transaction.placed))
    ]
    return Cancellation(tuple(None if c == NONE else c for c in codes), tuple(items))


def test_a_binding_refused_is_named_by_its_object_whatever_its_position() -> None:
    # Given a reversal's transaction binding three objects, the third bound to another order
    transaction = effect_transaction(bindings=3, reversal=True)

    # When DynamoDB cancels it on the last item
    refusal = transaction.refusal(cancelled(transaction, {6: {"order_id": "ord_other"}}))

    # Then the refusal names that binding's object and the order holding it: a conflict
    refused = refusal.binding()
    assert refused is not None
    assert (refused.ref, refused.found) == ("pi_2", {"order_id": "ord_other"})
    assert decide(refusal, stale_attempt=False) is Verdict.CONFLICT


@pytest.mark.parametrize(
    ("failing", "verdict"),
    [
        # the key says the entry exists, whatever else failed with it
        ({0: {"event_id": "evt_first"}, 1: None, 4: None}, Verdict.DUPLICATE),
        # a binding held by another order is a conflict before the order's guard is read
        ({1: None, 4: {"order_id": "ord_other"}}, Verdict.CONFLICT),
        # and before the reversal is voided: the order holding the binding keeps its money
        ({3: None, 4: {"order_id": "ord_other"}}, Verdict.CONFLICT),
        # a reversal of what never counted is void, before the guard makes it stale
        ({1: None, 3: None}, Verdict.VOID),
        ({1: {"currency": "brl"}}, Verdict.STALE),
        ({2: None}, Verdict.UNEXPECTED),
    ],
)
def test_the_decision_follows_the_slots_in_the_order_that_keeps_the_books(
    failing: dict[int, dict[str, Any] | None], verdict: Verdict
) -> None:
    # Given a reversal's transaction with one binding (key, order, outbox, reversed, binding)
    transaction = effect_transaction(bindings=1, reversal=True)

    # When it is cancelled with these conditions failing
    refusal = transaction.refusal(cancelled(transaction, failing))

    # Then the decision is the one the first failing slot in precedence says
    assert decide(refusal, stale_attempt=False) is verdict


def test_contention_is_retried_before_anything_is_concluded_from_the_guards() -> None:
    # Given the order's guard failing while another item was in a conflicting transaction
    transaction = effect_transaction()
    cancellation = cancelled(transaction, {1: None}, code="TransactionConflict")

    # When it is decided, Then it is retried (the guard may not hold once the other commits)
    assert decide(transaction.refusal(cancellation), stale_attempt=False) is Verdict.RETRY


def test_the_stale_transaction_is_never_stale_again() -> None:
    # Given the stale attempt's order condition (the order exists, same currency) failing
    transaction = effect_transaction()
    refusal = transaction.refusal(cancelled(transaction, {1: None}))

    # When it is decided, Then it fails loudly instead of trying stale forever
    assert decide(refusal, stale_attempt=True) is Verdict.UNEXPECTED


def test_an_audit_refused_alone_is_told_apart_from_a_binding_refused() -> None:
    # Given a binding-only transaction: two bindings, then the delivery's audit record
    transaction = Transaction.of(
        [Placed(Slot.BINDING, item(f"ref-{n}"), f"sub_{n}") for n in range(2)],
        Placed(Slot.AUDIT, item("audit")),
    )

    # When only the audit's condition failed (this delivery was recorded before)
    resend = transaction.refusal(cancelled(transaction, {2: {"outcome": "bound"}}))
    # or a binding's did
    conflict = transaction.refusal(cancelled(transaction, {1: {"order_id": "ord_other"}}))

    # Then each is read as what it is
    assert resend.only_audit_refused
    assert resend.found(Slot.AUDIT) == {"outcome": "bound"}
    assert not conflict.only_audit_refused
    assert conflict.binding() is not None
