"""The processor's decisions as plain code (functions/process/core.py): which path an entry
takes from what was read, and what a refused transaction means for it. No DynamoDB here."""

from __future__ import annotations

from dataclasses import replace

import pytest

from functions.process import core
from functions.shared.domain import (
    Delivery,
    Effect,
    Money,
    Outcome,
    RoutedEffect,
    Transition,
    effect_key,
)
from functions.shared.errors import (
    CurrencyMismatchError,
    UnexpectedWriteError,
    WriteContendedError,
)
from functions.shared.items import Entry, Order
from functions.store.reads import Known
from functions.store.transaction import CONDITION_FAILED, Refusal, Refused, Slot

ORDER = "ord_1"
NOTHING_READ = Known(key_item=None, order=None, bound={})


def routed(
    transition: Transition = Transition.PAID,
    amount: int = 5000,
    created: int = 1_700_000_000,
    **fields: object,
) -> RoutedEffect:
    effect = Effect(
        delivery=Delivery("stripe", f"evt_{created}", "payment_intent.succeeded", created),
        transition=transition,
        external_ref=str(fields.pop("external_ref", "pi_1")),
        amount=Money(amount, "brl"),
        order_id=ORDER,
        payment="pi_1",
        **fields,  # type: ignore[arg-type]
    )
    return RoutedEffect(effect, ORDER, effect_key(effect, ORDER))


def counted_entry(amount: int = 5000, currency: str = "brl") -> Entry:
    return Entry("key_1", ORDER, Outcome.APPLIED.value, amount=amount, currency=currency)


def refusal(*slots: Slot, found: dict[str, object] | None = None, code: str = "") -> Refusal:
    refused = tuple(
        Refused(slot, "pi_1" if slot is Slot.BINDING else None, found) for slot in slots
    )
    codes = tuple(CONDITION_FAILED for _ in slots) + ((code,) if code else ())
    return Refusal(refused, contended=code == "TransactionConflict", codes=codes)


def test_an_entry_nothing_was_read_for_is_applied_with_its_bindings() -> None:
    # Given a payment of an order, and a read that found nothing
    entry = routed()

    # When it is planned
    plan = core.plan(entry, NOTHING_READ)

    # Then it takes the guarded transaction, binding its payment to the order
    assert plan == core.Apply(entry, ("pi_1",))


def test_a_key_read_as_reserved_is_a_duplicate_without_a_transaction() -> None:
    # Given a read that found the entry's key counted
    entry = routed()
    known = replace(NOTHING_READ, key_item=counted_entry())

    # When it is planned
    plan = core.plan(entry, known)

    # Then it is a duplicate of what counted
    assert plan == core.Duplicate(entry, counted_entry(), "effect key already reserved", None)


def test_a_payment_bound_to_another_order_is_a_conflict() -> None:
    # Given a read that found the payment bound to another order
    known = replace(NOTHING_READ, bound={"pi_1": "ord_other"})

    # When it is planned
    plan = core.plan(routed(), known)

    # Then it is recorded as a conflict naming both orders, and nothing is applied
    assert isinstance(plan, core.Conflict)
    assert (plan.ref, plan.bound_order, plan.routed.order_id) == ("pi_1", "ord_other", ORDER)


def test_a_binding_the_order_holds_already_is_not_written_again() -> None:
    # Given a read that found the payment bound to this very order
    known = replace(NOTHING_READ, bound={"pi_1": ORDER})

    # When it is planned
    plan = core.plan(routed(), known)

    # Then it applies, binding nothing
    assert isinstance(plan, core.Apply)
    assert plan.to_bind == ()


def test_a_reversal_of_what_never_counted_is_voided_and_of_what_counted_is_applied() -> None:
    # Given a refund's failure (it reverses the refund), once with the refund not counted
    failure = routed(Transition.REFUND_REVERSED, external_ref="re_1")
    bound = replace(NOTHING_READ, bound={"pi_1": ORDER})

    # When it is planned, and again once the refund counted
    never = core.plan(failure, bound)
    after = core.plan(failure, replace(bound, settled=counted_entry()))

    # Then the first is voided (both keys reserved, neither ever counts), the second applies
    assert never == core.Void(failure)
    assert isinstance(after, core.Apply)


def test_an_entry_older_than_the_orders_last_second_is_stale_unless_in_another_currency() -> None:
    # Given an order whose last event is a later second
    entry = routed(created=1_700_000_000)
    later = Order(ORDER, last_event_second=1_700_000_100, currency="brl")

    # When it is planned, in the order's currency and then in another
    same = core.plan(entry, replace(NOTHING_READ, order=later))
    other = core.plan(entry, replace(NOTHING_READ, order=replace(later, currency="usd")))

    # Then it is counted stale, its status kept; in another currency it fails, never counted
    assert same == core.Stale(entry, ("pi_1",))
    assert isinstance(other, core.Fail)
    assert isinstance(other.error, CurrencyMismatchError)


def test_a_capture_total_above_what_counted_is_a_top_up_of_the_difference() -> None:
    # Given a payment captured again: 3000 counted first, 5000 captured in all now
    entry = routed(amount=5000, captured_so_far=True)
    known = replace(NOTHING_READ, key_item=counted_entry(3000))

    # When the capture mark says 3000 counted in all
    assert core.needs_capture_mark(entry, known)
    plan = core.plan(entry, known, capture_mark=3000)

    # Then the difference is an entry of its own, keyed by the total, moving the mark from 3000
    assert isinstance(plan, core.Apply)
    assert plan.routed.effect.amount == Money(2000, "brl")
    assert plan.routed.captured_before == 3000
    assert plan.routed.key != entry.key


def test_a_capture_total_no_more_than_the_mark_is_an_earlier_capture_counted() -> None:
    # Given a capture's total of 5000 announced after the mark reached 7000
    entry = routed(amount=5000, captured_so_far=True)
    known = replace(NOTHING_READ, key_item=counted_entry(3000))

    # When it is planned
    plan = core.plan(entry, known, capture_mark=7000)

    # Then it is a duplicate, and says it is an earlier capture's total, not a disagreement
    assert plan == core.Duplicate(entry, counted_entry(3000), "effect key already reserved", 7000)
    detail, disagrees = core.duplicate_detail(plan)
    assert "an earlier capture's total" in detail
    assert not disagrees


def test_a_duplicate_naming_another_amount_says_they_disagree() -> None:
    # Given a duplicate whose first entry counted another amount
    duplicate = core.Duplicate(routed(amount=5000), counted_entry(4000), "effect key reserved")

    # When what it says is asked
    detail, disagrees = core.duplicate_detail(duplicate)

    # Then it says so, to be counted as a disagreement
    assert disagrees
    assert "amounts disagree" in detail


def test_a_settling_entry_posts_what_the_entry_it_settles_counted() -> None:
    # Given a dispute's verdict announced for 4000, whose opening counted 5000
    verdict = routed(Transition.DISPUTE_LOST, amount=4000, external_ref="dp_1")
    known = replace(NOTHING_READ, bound={"pi_1": ORDER}, settled=counted_entry(5000))

    # When it is planned
    plan = core.plan(verdict, known)

    # Then it settles the 5000 that was held, not the 4000 it announced
    assert isinstance(plan, core.Apply)
    assert plan.routed.effect.amount == Money(5000, "brl")


@pytest.mark.parametrize(
    ("planned", "refused", "expected"),
    [
        ("apply", refusal(Slot.KEY, Slot.ORDER), core.Duplicate),
        ("apply", refusal(Slot.ORDER), core.Stale),
        ("apply", refusal(Slot.REVERSED), core.Void),
        ("apply", refusal(Slot.BINDING, found={"order_id": "ord_other"}), core.Conflict),
        ("stale", refusal(Slot.KEY), core.Duplicate),
        ("stale", refusal(Slot.REVERSED), core.Void),
    ],
    ids=["key-first", "order-guard", "reversed", "binding", "stale-key", "stale-reversed"],
)
def test_a_refused_transaction_is_planned_again_by_what_refused_it(
    planned: str, refused: Refusal, expected: type[core.Plan]
) -> None:
    # Given the guarded (or the stale) transaction of an entry, refused
    entry = routed()
    attempt: core.Apply | core.Stale = (
        core.Apply(entry, ("pi_1",)) if planned == "apply" else core.Stale(entry, ("pi_1",))
    )

    # When what the refusal means is asked
    plan = core.after_refusal(attempt, refused)

    # Then it is the path that slot names
    assert isinstance(plan, expected)


def test_a_refused_stale_transaction_is_never_stale_again() -> None:
    # Given the stale transaction refused by the order's slot (it guards no status)
    plan = core.after_refusal(core.Stale(routed(), ()), refusal(Slot.ORDER))

    # Then it fails loudly instead of looping
    assert isinstance(plan, core.Fail)
    assert isinstance(plan.error, UnexpectedWriteError)


def test_contention_is_retried_before_anything_is_concluded() -> None:
    # Given a transaction cancelled by contention, with the order's slot refused too
    plan = core.after_refusal(
        core.Apply(routed(), ()), refusal(Slot.ORDER, code="TransactionConflict")
    )

    # Then nothing is concluded from it: it goes back to the queue
    assert isinstance(plan, core.Fail)
    assert isinstance(plan.error, WriteContendedError)


def test_an_entry_that_teaches_its_order_whom_to_email_says_so_even_once_found_stale() -> None:
    # Given an order read as knowing no customer, and a payment naming one
    known = Known(key_item=None, order=Order(ORDER, currency="brl"), bound={"pi_1": ORDER})
    entry = routed(recipient="buyer@example.com")

    # When it is planned, then refused as older than the order's last event
    plan = core.plan(entry, known)
    again = core.after_refusal(plan, refusal(Slot.ORDER)) if isinstance(plan, core.Apply) else None

    # Then both transactions mark its entry as the one that taught the order (its redelivery
    # re-opens the order's owed e-mails); one to an order that knows its customer does not
    assert plan == core.Apply(entry, (), teaches=True)
    assert again == core.Stale(entry, (), teaches=True)
    knowing = replace(known, order=Order(ORDER, currency="brl", recipient="buyer@example.com"))
    assert core.plan(entry, knowing) == core.Apply(entry, ())
