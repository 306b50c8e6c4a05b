"""The ordering token's tie rule and the books' checks, as pure functions."""

from __future__ import annotations

from functions.shared import books
from functions.shared.domain import Delivery, Effect, Money, Transition, ordering_token
from functions.shared.items import Entry, Order


def effect(transition: Transition, created: int) -> Effect:
    return Effect(
        delivery=Delivery("stripe", "evt_1", "x", created),
        transition=transition,
        external_ref="pi_1",
        amount=Money(100, "brl"),
    )


def test_within_one_second_later_lifecycle_transitions_win() -> None:
    paid, refunded, disputed = (
        ordering_token(effect(t, 100))
        for t in (Transition.PAID, Transition.REFUNDED, Transition.DISPUTED)
    )

    assert paid < refunded < disputed


def test_a_later_second_beats_any_transition_of_an_earlier_one() -> None:
    assert ordering_token(effect(Transition.PAID, 101)) > ordering_token(
        effect(Transition.DISPUTED, 100)
    )


def test_books_balance_when_totals_equal_applied_and_stale_amounts() -> None:
    order = Order("o1", paid_total=5000, refunded_total=5000)
    effects = [
        Entry("k1", "o1", "applied", transition="order.refunded", amount=5000),
        Entry("k2", "o1", "stale", transition="order.paid", amount=5000),
    ]

    assert books.unbalanced_totals(order, effects) == []


def test_books_report_each_unbalanced_total() -> None:
    order = Order("o1", paid_total=10000)
    effects = [Entry("k1", "o1", "applied", transition="order.paid", amount=5000)]

    [mismatch] = books.unbalanced_totals(order, effects)

    assert (mismatch.kind, mismatch.order_id) == ("unbalanced_total", "o1")
    assert "paid_total=10000" in mismatch.detail


def test_outbox_check_finds_missing_and_extra_items() -> None:
    effects = [
        Entry("k1", "o1", "applied"),
        Entry("k2", "o1", "applied"),
        Entry("k3", "o1", "stale"),
    ]
    outbox = [
        {"effect_key": "k1", "order_id": "o1"},
        {"effect_key": "k3", "order_id": "o1"},  # late entries are announced too
        {"effect_key": "k4", "order_id": "o1"},
    ]

    kinds = sorted(m.kind for m in books.unmatched_outbox(effects, outbox))

    assert kinds == ["missing_outbox_item", "unexpected_outbox_item"]
