"""What an entry does, decided by plain code over what was read: no I/O here.

`plan(routed, known, capture_mark)` says which path an entry takes: applied (the guarded
transaction), stale (counted and announced late, its status kept), voided, a duplicate or a
conflict, or a failure to raise. `after_refusal(plan, refusal)` says what a refused
transaction means for it, by the slots that refused (verdict.py). The processor
(service.py) reads through the store, asks here, and carries the plan out; the decisions are
tested without DynamoDB (tests/unit/test_core.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from functions.process.verdict import Verdict, decide
from functions.shared.domain import (
    Effect,
    Money,
    RoutedEffect,
    Transition,
    effect_key,
    top_up_ref,
)
from functions.shared.errors import (
    CurrencyMismatchError,
    UmavezError,
    UnexpectedWriteError,
    WriteContendedError,
)
from functions.shared.items import Entry, Order, counted
from functions.store.reads import Known
from functions.store.transaction import Refusal, Slot


@dataclass(frozen=True)
class Apply:
    """The guarded transaction: the key, the order moved, the outbox item, the bindings;
    `teaches`: counting it teaches the order whom to e-mail (`teaches_recipient`)."""

    routed: RoutedEffect
    to_bind: tuple[str, ...]
    teaches: bool = False


@dataclass(frozen=True)
class Stale:
    """Older than the order's last event: counted and announced late, the status kept."""

    routed: RoutedEffect
    to_bind: tuple[str, ...]
    teaches: bool = False


@dataclass(frozen=True)
class Void:
    """A reversal of an entry that never counted: both keys reserved as voided."""

    routed: RoutedEffect


@dataclass(frozen=True)
class Duplicate:
    """The key counted before: `first` is its entry, as read or as the refusal returned it."""

    routed: RoutedEffect
    first: Entry | None
    detail: str
    captured_in_all: int | None = None


@dataclass(frozen=True)
class Conflict:
    """An object of the entry is bound to another order: recorded, not applied."""

    routed: RoutedEffect
    ref: str
    bound_order: str


@dataclass(frozen=True)
class Fail:
    """Nothing is written: the error goes back to the queue (retried, or failed)."""

    error: UmavezError


Plan = Apply | Stale | Void | Duplicate | Conflict | Fail


def teaches_recipient(routed: RoutedEffect, known: Known) -> bool:
    """The entry names the customer and its order, as read, existed and knew none: counted,
    it taught the order whom to e-mail, and the order's other notifications may owe theirs.
    A first entry, the order not read yet, has no others to look at; a read that lagged
    behind an order already there is what reconciliation's `email_owed_outbox_item` is for."""
    order = known.order
    return bool(routed.effect.recipient) and order is not None and not order.recipient


def bound_objects(routed: RoutedEffect) -> tuple[str, ...]:
    """The objects this entry binds: a payment's own ids, and the payment of an entry that
    names its order itself (a refund whose metadata names an order must agree)."""
    effect = routed.effect
    objects = effect.registers
    if effect.order_id and effect.payment:
        objects = (*objects, effect.payment)
    return tuple(dict.fromkeys(objects))


def plan(routed: RoutedEffect, known: Known, capture_mark: int | None = None) -> Plan:
    """The path of an entry, from the read before writing (and, where `needs_capture_mark`
    said so, its payment's capture mark)."""
    if known.key_item is not None:
        topped, captured_in_all = top_up(routed, known, capture_mark)
        if topped is None:
            return Duplicate(routed, known.key_item, "effect key already reserved", captured_in_all)
        # Its key was not read: reserved already (a lagging read of the mark), the
        # transaction says so.
        routed, known = topped, replace(known, key_item=None)
    for ref in bound_objects(routed):
        bound = known.bound.get(ref)
        if bound is not None and bound != routed.order_id:
            return Conflict(routed, ref, bound)
    routed = as_settled(routed, known.settled)
    # Bindings this order already holds are not written again: they never change.
    to_bind = tuple(r for r in bound_objects(routed) if r not in known.bound)
    if not to_bind and reverses_what_never_counted(routed, known):
        # The guarded transaction could only be cancelled (and billed) before voiding.
        return Void(routed)
    teaches = teaches_recipient(routed, known)
    if known.later_second_than(routed):
        return stale(routed, to_bind, known.order, teaches=teaches)
    return Apply(routed, to_bind, teaches)


def after_refusal(refused: Apply | Stale, refusal: Refusal) -> Plan:
    """What the refused transaction means (verdict.decide), as the next plan."""
    is_stale = isinstance(refused, Stale)
    kind = "stale transaction" if is_stale else "transaction"
    routed = refused.routed
    verdict = decide(refusal, stale_attempt=is_stale)
    if verdict is Verdict.DUPLICATE:
        first = refusal.found(Slot.KEY)
        entry = Entry.of(first) if first else None
        return Duplicate(routed, entry, f"{kind}: effect key already reserved")
    if verdict is Verdict.RETRY:
        return Fail(WriteContendedError(f"{kind} cancelled: {refusal.codes}"))
    if (binding := refusal.binding()) is not None:
        bound = (binding.found or {}).get("order_id")
        return Conflict(routed, str(binding.ref), str(bound))
    if verdict is Verdict.VOID:
        return Void(routed)
    if verdict is Verdict.STALE:
        order = refusal.found(Slot.ORDER)
        found = Order.of(order) if order else None
        return stale(routed, refused.to_bind, found, teaches=refused.teaches)
    return Fail(UnexpectedWriteError(f"{kind} cancelled: {refusal.codes}"))


def stale(
    routed: RoutedEffect, to_bind: tuple[str, ...], order: Order | None, *, teaches: bool = False
) -> Plan:
    """Stale, unless the order is in another currency: that is never counted."""
    currency = order.currency if order is not None else None
    if currency is not None and currency != routed.effect.amount.currency:
        return Fail(
            CurrencyMismatchError(
                f"order {routed.order_id} is in {currency}, "
                f"effect {routed.key} in {routed.effect.amount.currency}"
            )
        )
    return Stale(routed, to_bind, teaches)


def needs_capture_mark(routed: RoutedEffect, known: Known) -> bool:
    """A payment captured again (multicapture, over-capture) announces what it captured in
    all, more than its first entry counted: what its entries counted in all is then read
    from its capture mark. The common duplicate reads nothing more."""
    effect, first = routed.effect, known.key_item
    return bool(
        effect.captured_so_far
        and effect.payment
        and effect.transition is Transition.PAID
        and first is not None
        and first.counted
        and first.currency == effect.amount.currency
        and effect.amount.minor > (first.amount or 0)
    )


def top_up(
    routed: RoutedEffect, known: Known, capture_mark: int | None
) -> tuple[RoutedEffect | None, int | None]:
    """The difference a capture's total brings over what the payment's entries counted is an
    entry of its own, keyed by that total, moving the payment's capture mark (its condition
    serializes two captures counted at once). Anything not more is a duplicate. Also what the
    payment's entries counted in all, when the mark was read for it."""
    first = known.key_item
    if first is None or not needs_capture_mark(routed, known):
        return None, None
    effect = routed.effect
    counted_before = max(first.amount or 0, capture_mark or 0)
    if effect.amount.minor <= counted_before:
        return None, counted_before  # an earlier capture's total, announced after a later one
    captured = effect.amount.minor
    topped = replace(
        effect,
        external_ref=top_up_ref(str(effect.payment), captured),
        amount=Money(captured - counted_before, effect.amount.currency),
        note=f"captured {captured} in all; its entries counted {counted_before} before",
    )
    return (
        RoutedEffect(
            topped,
            routed.order_id,
            effect_key(topped, routed.order_id),
            captured_before=counted_before,
        ),
        counted_before,
    )


def as_settled(routed: RoutedEffect, settled: Entry | None) -> RoutedEffect:
    """A settling entry posts what the entry it settles counted, not what its own event
    says: a Stripe verdict computed from balance transactions could differ from an opening
    booked from the dispute's amount (an event without them), an Asaas verdict from an
    opening read before a refund landed; either way money stayed held for good."""
    if settled is None or not settled.counted or settled.amount is None:
        return routed
    amount = Money(settled.amount, str(settled.currency))
    if amount == routed.effect.amount:
        return routed
    note = (
        f"settles the {amount.minor} {amount.currency} its entry counted"
        f" ({routed.effect.amount.minor} {routed.effect.amount.currency} announced)"
    )
    return replace(routed, effect=replace(routed.effect, amount=amount, note=note))


def reverses_what_never_counted(routed: RoutedEffect, known: Known) -> bool:
    """A reversal whose entry the consistent read found not counted (absent or voided): the
    transaction's own check (the store's `reversed_check`) would refuse it the same way."""
    return routed.reversed_key is not None and not counted(known.settled)


def duplicate_detail(duplicate: Duplicate) -> tuple[str, bool]:
    """What a duplicate says, and whether it names another amount than the entry that counted
    (a mis-map), unless it is an earlier capture of the payment announced late."""
    routed, first, detail = duplicate.routed, duplicate.first, duplicate.detail
    if first is None or first.amount is None:
        return detail, False
    first_counted = first.amount
    if earlier_capture(routed.effect, first_counted, duplicate.captured_in_all):
        return f"{detail}; an earlier capture's total, counted", False
    if first_counted != routed.effect.amount.minor:
        return (
            f"{detail}; amounts disagree: {routed.effect.delivery.event_type} says "
            f"{routed.effect.amount.minor}, {first.event_type} "
            f"{first.event_id} counted {first_counted}",
            True,
        )
    return detail, False


def earlier_capture(effect: Effect, first_counted: int, captured_in_all: int | None) -> bool:
    """A payment captured several times announces each capture's total: one no more than
    what its entries counted in all (the capture mark, read for it), or less than its first
    entry by an event that shows the payment partly captured, is a capture counted already,
    not two readings of one movement that disagree."""
    if not effect.captured_so_far or effect.amount.minor == first_counted:
        return False
    if captured_in_all is not None and effect.amount.minor <= captured_in_all:
        return True
    return effect.partly_captured and effect.amount.minor < first_counted
