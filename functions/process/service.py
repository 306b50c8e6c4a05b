"""Apply each effect exactly once: one TransactWriteItems, and the database decides.

The transaction reserves the key (`attribute_not_exists`), moves the order only if the event
is not older than the order's last one (the ordering guard is the Update's condition) and
writes the outbox item, all or nothing. Each item has a named slot
(functions/store/transaction.py): the cancellation reasons are read back by slot, and
`decide` (verdict.py) says what they mean.

One BatchGetItem comes first, only to spare writes: a key already reserved is a duplicate
without a transaction (a cancelled transaction is billed in full), an order whose last event
is a later second makes the entry stale without trying the guarded one first, and a binding
already held by this order is not written again. What the read saw can only stay true (keys
and bindings are never removed or rebound; `last_event_second` never goes back), so it never
decides wrongly, and so it may be eventually consistent (half the read units): a read that
lags sees less, never something false, and what it did not see the transaction decides.

Every path an entry can take (applied, duplicate, stale, voided, conflict, bound, waiting)
shares one read, one routing and the same items. The ledger store renders the items with the
condition each is written under (functions/store/ledger.py), reads before writing (reads.py)
and commits (transaction.py); the processor is given those parts, and the broken-design
harness (tests/support/broken_designs.py) gives it a broken one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from botocore.exceptions import ClientError

from functions.process.interpreters import Interpreters
from functions.process.verdict import Verdict, decide
from functions.shared import tables
from functions.shared.bindings import bound_orders
from functions.shared.domain import (
    COUNTED_OUTCOMES,
    Binding,
    Delivery,
    Effect,
    Interpretation,
    Money,
    NoEffect,
    Outcome,
    RoutedEffect,
    Transition,
    effect_key,
    ordering_token,
    top_up_ref,
)
from functions.shared.dynamo import raise_unclassified, to_attributes
from functions.shared.errors import (
    CurrencyMismatchError,
    OrderNotYetKnownError,
    UnexpectedWriteError,
    WriteContendedError,
)
from functions.shared.outbox import outbox_id_for
from functions.shared.settings import DEFAULT_RETENTION_DAYS
from functions.store import queries
from functions.store.ledger import LedgerItems
from functions.store.outbox import reopen_for_email
from functions.store.reads import Known, LedgerReads
from functions.store.transaction import (
    Committer,
    Placed,
    Refusal,
    Slot,
    Transaction,
    commit,
    is_condition_failure,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def _counted(entry: dict[str, object] | None) -> bool:
    return entry is not None and entry.get("outcome") in COUNTED_OUTCOMES


@dataclass(frozen=True)
class Processed:
    """What became of one delivery; logged and counted at the handler boundary."""

    delivery: Delivery
    outcome: Outcome
    order_id: str | None = None
    effect_key: str | None = None
    detail: str = ""
    amount_disagrees: bool = False
    recheck: str | None = None  # an object to read again later (see NoEffect.recheck)


class EffectProcessor:
    """Turns one raw provider payload into at most one applied effect."""

    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        clock: Callable[[], float],
        interpreters: Interpreters | None = None,
        retention_seconds: int = DEFAULT_RETENTION_DAYS * 86_400,
        *,
        items: LedgerItems | None = None,
        reads: LedgerReads | None = None,
        committer: Committer = commit,
        keyed: Callable[[Effect, str], str] = effect_key,
    ) -> None:
        """The store's parts (what it writes and under which condition, what it reads first,
        how it commits) and the keying rule are passed in: the broken-design harness swaps
        one of them to prove each guarantee's test fails without it."""
        self._db = dynamodb
        self._tables = table_names
        self._clock = clock
        self._interpret = interpreters or Interpreters.build()
        self._retention_seconds = retention_seconds
        self._items = items or LedgerItems(table_names, clock, retention_seconds)
        self._reads = reads or LedgerReads(dynamodb, table_names.ledger)
        self._commit = committer
        self._keyed = keyed

    def process(self, provider: str, raw_body: str) -> list[Processed]:
        """Each effect the delivery announces, in order, each in its own transaction."""
        return self.process_readings(self._interpret(provider, raw_body))

    def process_readings(self, readings: Sequence[Interpretation]) -> list[Processed]:
        """What a provider object was read as, by a delivery or from the provider's statement:
        the same effects under the same keys, whichever way came first."""
        return [self._process_one(i) for i in readings]

    def _process_one(self, interpretation: Interpretation) -> Processed:
        if isinstance(interpretation, NoEffect):
            processed = self._record_no_change(
                interpretation.delivery, Outcome.IGNORED, interpretation.reason
            )
            return replace(processed, recheck=interpretation.recheck)
        if isinstance(interpretation, Binding):
            return self._bind(interpretation)
        order_id = self._route(interpretation)
        if order_id is None:
            return self._record_no_change(
                interpretation.delivery,
                Outcome.UNROUTABLE,
                "the object carries no order metadata and names no payment to find it by",
            )
        return self._apply(self._routed(interpretation, order_id))

    # -- routing ---------------------------------------------------------------------------

    def _route(self, effect: Effect) -> str | None:
        if (
            effect.order_id
            and effect.order_from_metadata
            and effect.transition is not Transition.PAID
        ):
            # A movement of a payment (a refund, a dispute) belongs to the order that holds the
            # payment, whatever its own metadata says: a charge copied an order the payment
            # was not bound to (the conflict case) and every refund built from it named that
            # order, a conflict that dropped the money. Unbound yet: its own order stands.
            # Read first, the movement's own binding: one voided under the order its metadata
            # named while its payment was unbound (`_void`) stays there, where the void makes
            # its other entries duplicates, even once its payment is bound to another order.
            held = self._holding_order(effect.delivery, (effect.external_ref, *effect.order_lookup))
            if held is not None:
                return held
        if effect.order_id:
            return effect.order_id
        if not effect.order_lookup:
            return None
        summary: dict[str, object] = {
            "transition": effect.transition.value,
            "external_ref": effect.external_ref,
            "amount": effect.amount.minor,
            "currency": effect.amount.currency,
        }
        return self._bound_order(effect.delivery, effect.order_lookup, summary)

    def _holding_order(self, delivery: Delivery, objects: tuple[str, ...]) -> str | None:
        """The order the first bound object belongs to (a consistent read), if any."""
        found, unread = bound_orders(self._db, self._tables.ledger, delivery.provider, objects)
        if unread:
            raise WriteContendedError("BatchGetItem left keys unprocessed")
        return next((str(found[ref]) for ref in objects if ref in found), None)

    def _bound_order(
        self, delivery: Delivery, objects: tuple[str, ...], summary: dict[str, object]
    ) -> str:
        """The order the first bound object belongs to, or wait for it."""
        held = self._holding_order(delivery, objects)
        if held is not None:
            return held
        raise OrderNotYetKnownError(
            f"{delivery.event_type} {delivery.event_id}: no order bound to "
            f"{', '.join(objects)} yet; waiting for it",
            objects,
            summary,
        )

    def _routed(self, effect: Effect, order_id: str) -> RoutedEffect:
        return RoutedEffect(effect, order_id, self._keyed(effect, order_id))

    # -- the transaction -------------------------------------------------------------------

    def _apply(self, routed: RoutedEffect) -> Processed:
        known = self._reads.before_writing(routed, self._bound_objects(routed))
        if known.key_item is not None:
            topped, captured_in_all = self._top_up(routed, known)
            if topped is None:
                return self._duplicate(
                    routed, known.key_item, "effect key already reserved", captured_in_all
                )
            # Its key was not read: reserved already (a lagging read of the mark), the
            # transaction says so.
            routed, known = topped, replace(known, key_item=None)
        for ref in self._bound_objects(routed):
            bound = known.bound.get(ref)
            if bound is not None and bound != routed.order_id:
                return self._record_conflict(
                    routed.effect.delivery, ref, bound, routed.order_id, routed.key
                )
        routed = self._as_settled(routed, known.settled)
        # Bindings this order already holds are not written again: they never change.
        to_bind = tuple(r for r in self._bound_objects(routed) if r not in known.bound)
        if not to_bind and self._reverses_what_never_counted(routed, known):
            # The guarded transaction could only be cancelled (and billed) before voiding.
            return self._void(routed)
        if known.later_second_than(routed):
            self._refuse_other_currency(routed, known.order or {})
            return self._record_stale(routed, to_bind)
        transaction = self._applied(routed, to_bind)
        if (refusal := self._commit(self._db, transaction)) is not None:
            return self._after_refusal(routed, refusal, to_bind)
        return self._processed(routed, Outcome.APPLIED, routed.effect.note or "")

    def _top_up(self, routed: RoutedEffect, known: Known) -> tuple[RoutedEffect | None, int | None]:
        """A payment captured again (multicapture, over-capture) announces what it captured in
        all; its entries counted less: the difference is an entry of its own, keyed by the
        total it brings the payment to, moving the payment's capture mark (its condition
        serializes two captures counted at once). Anything not more is a duplicate. Also what
        the payment's entries counted in all, when the mark was read for it."""
        effect, first = routed.effect, known.key_item or {}
        if not (
            effect.captured_so_far
            and effect.payment
            and effect.transition is Transition.PAID
            and _counted(first)
            and first.get("currency") == effect.amount.currency
            and effect.amount.minor > int(str(first["amount"]))
        ):
            return None, None  # the common duplicate: no more than its first entry, no read
        counted = max(int(str(first["amount"])), self._reads.capture_mark(routed))
        if effect.amount.minor <= counted:
            return None, counted  # an earlier capture's total, announced after a later one
        captured = effect.amount.minor
        topped = replace(
            effect,
            external_ref=top_up_ref(effect.payment, captured),
            amount=Money(captured - counted, effect.amount.currency),
            note=f"captured {captured} in all; its entries counted {counted} before",
        )
        return (
            RoutedEffect(
                topped,
                routed.order_id,
                effect_key(topped, routed.order_id),
                captured_before=counted,
            ),
            counted,
        )

    def _as_settled(self, routed: RoutedEffect, settled: dict[str, object] | None) -> RoutedEffect:
        """A settling entry posts what the entry it settles counted, not what its own event
        says: a Stripe verdict computed from balance transactions could differ from an opening
        booked from the dispute's amount (an event without them), an Asaas verdict from an
        opening read before a refund landed; either way money stayed held for good."""
        if settled is None or not _counted(settled):
            return routed
        amount = Money(int(str(settled["amount"])), str(settled["currency"]))
        if amount == routed.effect.amount:
            return routed
        note = (
            f"settles the {amount.minor} {amount.currency} its entry counted"
            f" ({routed.effect.amount.minor} {routed.effect.amount.currency} announced)"
        )
        return replace(routed, effect=replace(routed.effect, amount=amount, note=note))

    def _reverses_what_never_counted(self, routed: RoutedEffect, known: Known) -> bool:
        """A reversal whose entry the consistent read found not counted (absent or voided):
        the transaction's own check (the store's `reversed_check`) would refuse it the same way."""
        return routed.reversed_key is not None and not _counted(known.settled)

    def _after_refusal(
        self,
        routed: RoutedEffect,
        refusal: Refusal,
        to_bind: tuple[str, ...],
        *,
        stale: bool = False,
    ) -> Processed:
        """What the refused transaction means (transaction.decide), carried out."""
        kind = "stale transaction" if stale else "transaction"
        verdict = decide(refusal, stale_attempt=stale)
        if verdict is Verdict.DUPLICATE:
            first = refusal.found(Slot.KEY) or {}
            return self._duplicate(routed, first, f"{kind}: effect key already reserved")
        if verdict is Verdict.RETRY:
            raise WriteContendedError(f"{kind} cancelled: {refusal.codes}")
        if (binding := refusal.binding()) is not None:
            bound = (binding.found or {}).get("order_id")
            return self._record_conflict(
                routed.effect.delivery, str(binding.ref), str(bound), routed.order_id, routed.key
            )
        if verdict is Verdict.VOID:
            return self._void(routed)
        if verdict is Verdict.STALE:
            self._refuse_other_currency(routed, refusal.found(Slot.ORDER) or {})
            return self._record_stale(routed, to_bind)
        raise UnexpectedWriteError(f"{kind} cancelled: {refusal.codes}")

    def _duplicate(
        self,
        routed: RoutedEffect,
        first: dict[str, object],
        detail: str,
        captured_in_all: int | None = None,
    ) -> Processed:
        """A duplicate; if it names another amount than the entry that counted, say so (a
        mis-map), unless it is an earlier capture of the payment announced late; if it names
        the customer the counted one did not, the order learns it."""
        if not first.get("named_recipient"):
            self._learn_recipient(routed)
        counted = first.get("amount")
        if counted is not None and _earlier_capture(
            routed.effect, int(str(counted)), captured_in_all
        ):
            return self._processed(
                routed, Outcome.DUPLICATE, f"{detail}; an earlier capture's total, counted"
            )
        if counted is not None and int(str(counted)) != routed.effect.amount.minor:
            return self._processed(
                routed,
                Outcome.DUPLICATE,
                f"{detail}; amounts disagree: {routed.effect.delivery.event_type} says "
                f"{routed.effect.amount.minor}, {first.get('event_type')} "
                f"{first.get('event_id')} counted {counted}",
                amount_disagrees=True,
            )
        return self._processed(routed, Outcome.DUPLICATE, detail)

    def _learn_recipient(self, routed: RoutedEffect) -> None:
        """payment_intent.succeeded often names no e-mail and its charge.succeeded does: the
        address reaches the order even when the event that carries it is a duplicate."""
        if not routed.effect.recipient:
            return
        try:
            self._db.update_item(**self._items.recipient_learned(routed, routed.effect.recipient))
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise_unclassified(exc, "UpdateItem")
            # It knew its customer already, maybe only since this entry's notification left
            # (another payment of the order named them first): re-opened if it left without
            # the e-mail, else nothing changes.
        self._reopen_for_email(routed)

    def _reopen_for_email(self, routed: RoutedEffect) -> None:
        reopen_for_email(self._db, self._tables.outbox, outbox_id_for(routed.key), self._clock())

    def _applied(self, routed: RoutedEffect, to_bind: tuple[str, ...]) -> Transaction:
        return Transaction.of(
            Placed(Slot.KEY, self._items.key_reservation(routed, Outcome.APPLIED)),
            Placed(Slot.ORDER, {"Update": self._items.order_update(routed)}),
            Placed(Slot.OUTBOX, self._items.outbox_put(routed, late=False)),
            self._items.reversed_check(routed),
            self._items.capture_mark(routed),
            self._bindings(routed.effect.delivery.provider, routed.order_id, to_bind),
        )

    # -- bindings: which order a provider object belongs to, first writer wins -------------

    @staticmethod
    def _bound_objects(routed: RoutedEffect) -> tuple[str, ...]:
        """The objects this entry binds: a payment's own ids, and the payment of an entry that
        names its order itself (a refund whose metadata names an order must agree)."""
        effect = routed.effect
        objects = effect.registers
        if effect.order_id and effect.payment:
            objects = (*objects, effect.payment)
        return tuple(dict.fromkeys(objects))

    def _bindings(self, provider: str, order_id: str, objects: tuple[str, ...]) -> list[Placed]:
        """Conditional Puts: an object already bound to another order cancels the transaction,
        so one payment can never be credited to two orders, whichever event names it first."""
        return [
            Placed(Slot.BINDING, self._items.binding(provider, order_id, ref), ref)
            for ref in objects
        ]

    def _record_conflict(
        self,
        delivery: Delivery,
        ref: str,
        bound_order: str,
        named_order: str,
        effect_key: str | None = None,
    ) -> Processed:
        """Not applied: recorded with both orders, counted and alarmed for a person to settle."""
        reason = (
            f"{delivery.provider} {ref} is bound to order {bound_order}; "
            f"this event names order {named_order}: not applied"
        )
        put = self._items.delivery_put(
            delivery, Outcome.CONFLICT, reason, order_id=named_order, effect_key=effect_key
        )["Put"]
        item = {**put["Item"], **to_attributes({"bound_order_id": bound_order, "object": ref})}
        try:
            # The same delivery again (a resend) finds its record: nothing changes.
            self._db.put_item(**self._items.first_record({**put, "Item": item}))
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise_unclassified(exc, "PutItem")
        return Processed(delivery, Outcome.CONFLICT, named_order, effect_key, reason)

    def _bind(self, binding: Binding) -> Processed:
        """A delivery that moves no money but binds objects to its order, with its audit. An
        order it does not name itself comes from what it is bound through (a subscription's
        renewal invoice through its subscription)."""
        delivery = binding.delivery
        order_id = binding.order_id or self._bound_order(
            delivery, binding.order_lookup, {"transition": "binding"}
        )
        binding = replace(binding, order_id=order_id)
        return self._write_binding(binding, order_id, first_time=True)

    def _write_binding(self, binding: Binding, order_id: str, *, first_time: bool) -> Processed:
        delivery = binding.delivery
        audit = self._items.delivery_put(delivery, Outcome.BOUND, binding.reason, order_id)
        if first_time:
            audit = {
                "Put": {
                    **self._items.first_record(audit["Put"]),
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            }
        transaction = Transaction.of(
            self._bindings(delivery.provider, order_id, binding.objects), Placed(Slot.AUDIT, audit)
        )
        if (refusal := self._commit(self._db, transaction)) is not None:
            if refusal.contended:
                raise WriteContendedError(f"binding cancelled: {refusal.codes}")
            if refusal.only_audit_refused:
                if (refusal.found(Slot.AUDIT) or {}).get("outcome") == Outcome.BOUND.value:
                    # This delivery bound these objects already: a resend changes nothing.
                    return Processed(delivery, Outcome.BOUND, order_id, detail=binding.reason)
                # Recorded otherwise before (e.g. ignored by an older version): bind now.
                return self._write_binding(binding, order_id, first_time=False)
            if (refused := refusal.binding()) is not None:
                bound = (refused.found or {}).get("order_id")
                return self._record_conflict(delivery, str(refused.ref), str(bound), order_id)
            raise UnexpectedWriteError(f"binding cancelled: {refusal.codes}")
        return Processed(delivery, Outcome.BOUND, order_id, detail=binding.reason)

    # -- stale: status guarded, money still counted and announced ---------------------------

    def _record_stale(self, routed: RoutedEffect, to_bind: tuple[str, ...]) -> Processed:
        """Record the key as stale, post the entry and announce it flagged late; the lifecycle
        status stays untouched.

        Sums commute, so a payment that arrives after its own refund still adds to paid_total
        and the books balance; downstream books (EventBridge consumers) must balance too, so
        the movement is announced once, marked late with its provider time.
        """
        update = self._items.stale_update(routed)
        reason = "older than the order's last event: status kept, counted"
        transaction = Transaction.of(
            Placed(Slot.KEY, self._items.key_reservation(routed, Outcome.STALE)),
            Placed(Slot.ORDER, {"Update": update}),
            Placed(
                Slot.OUTBOX,
                self._items.outbox_put(routed, late=True, superseded=self._superseded(routed)),
            ),
            self._items.reversed_check(routed),
            self._items.capture_mark(routed),
            self._bindings(routed.effect.delivery.provider, routed.order_id, to_bind),
            Placed(Slot.AUDIT, self._items.entry_audit(routed, Outcome.STALE, reason)),
        )
        if (refusal := self._commit(self._db, transaction)) is not None:
            return self._after_refusal(routed, refusal, to_bind, stale=True)
        return self._processed(routed, Outcome.STALE, "status change discarded, amount counted")

    def _superseded(self, routed: RoutedEffect) -> bool:
        """Whether a movement of the same payment newer than this stale one counted already:
        what the customer was told of that payment is newer than this. One Query of the
        order's entries, on this rare path only. (A newer one of the payment counted in the
        instant between this read and the transaction is not seen: its own e-mail then
        follows this one, in the provider's order.)"""
        effect = routed.effect
        if effect.payment is None:
            return True
        pages = self._db.get_paginator("query").paginate(
            **queries.newer_counted_entries(
                self._tables.ledger, routed.order_id, effect.payment, ordering_token(effect)
            ),
            ConsistentRead=True,
        )
        try:
            return any(page["Items"] for page in pages)
        except ClientError as exc:
            raise_unclassified(exc, "Query")

    # -- voided: a reversal of an entry that never counted ---------------------------------

    def _void(self, routed: RoutedEffect) -> Processed:
        """Reserve both keys as voided: the reversed entry (e.g. a refund whose "succeeded"
        event has not arrived, or never will) can then never count, nor can this reversal.
        Money that left and came back nets to zero either way; what never left never counts.
        """
        reversed_key = routed.reversed_key
        if reversed_key is None:
            raise UnexpectedWriteError(f"{routed.key} voided, but it reverses nothing")
        if routed.effect.only_if_open:
            # Nothing to record: the delivery's other entries say what it did.
            return self._processed(routed, Outcome.IGNORED, "nothing open to settle")
        reason = "reverses an entry that never counted: both keys voided"
        effect = routed.effect
        transaction = Transaction.of(
            Placed(
                Slot.VOIDED, self._items.key_reservation(routed, Outcome.VOIDED, key=reversed_key)
            ),
            Placed(Slot.KEY, self._items.key_reservation(routed, Outcome.VOIDED)),
            # The voided object is bound where it was voided: its other entries are routed
            # here (`_route`), where the void makes them duplicates, whichever order its
            # payment is bound to later.
            self._bindings(effect.delivery.provider, routed.order_id, (effect.external_ref,)),
            # An entry that only accompanies its delivery's movement (the inquiry a dispute
            # may have been) leaves the delivery's audit to that movement.
            [Placed(Slot.AUDIT, self._items.entry_audit(routed, Outcome.VOIDED, reason))]
            if effect.audited
            else [],
        )
        if (refusal := self._commit(self._db, transaction)) is not None:
            if refusal.failed(Slot.KEY):
                return self._processed(routed, Outcome.DUPLICATE, "reversal already recorded")
            if refusal.failed(Slot.VOIDED):
                # The reversed entry was counted meanwhile: the reversal now applies normally.
                raise WriteContendedError("reversed entry recorded concurrently")
            if refusal.contended:
                raise WriteContendedError(f"void cancelled: {refusal.codes}")
            if (binding := refusal.binding()) is not None:
                bound = (binding.found or {}).get("order_id")
                return self._record_conflict(
                    effect.delivery, str(binding.ref), str(bound), routed.order_id, routed.key
                )
            raise UnexpectedWriteError(f"void cancelled: {refusal.codes}")
        return self._processed(routed, Outcome.VOIDED, reason)

    def _refuse_other_currency(self, routed: RoutedEffect, order: dict[str, object]) -> None:
        currency = order.get("currency")
        if currency is not None and currency != routed.effect.amount.currency:
            raise CurrencyMismatchError(
                f"order {routed.order_id} is in {currency}, "
                f"effect {routed.key} in {routed.effect.amount.currency}"
            )

    # -- deliveries that change nothing ----------------------------------------------------

    def _record_no_change(self, delivery: Delivery, outcome: Outcome, reason: str) -> Processed:
        put = self._items.delivery_put(delivery, outcome, reason)["Put"]
        try:
            self._db.put_item(**self._items.first_record(put))
        except ClientError as exc:
            if not is_condition_failure(exc):
                raise_unclassified(exc, "PutItem")
        return Processed(delivery, outcome, detail=reason)

    # -- small helpers ---------------------------------------------------------------------

    @staticmethod
    def _processed(
        routed: RoutedEffect, outcome: Outcome, detail: str = "", *, amount_disagrees: bool = False
    ) -> Processed:
        return Processed(
            routed.effect.delivery, outcome, routed.order_id, routed.key, detail, amount_disagrees
        )


def _earlier_capture(effect: Effect, first_counted: int, captured_in_all: int | None) -> bool:
    """A payment captured several times announces each capture's total: one no more than
    what its entries counted in all (the capture mark, read for it), or less than its first
    entry by an event that shows the payment partly captured, is a capture counted already,
    not two readings of one movement that disagree."""
    if not effect.captured_so_far or effect.amount.minor == first_counted:
        return False
    if captured_in_all is not None and effect.amount.minor <= captured_in_all:
        return True
    return effect.partly_captured and effect.amount.minor < first_counted
