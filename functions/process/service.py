"""Apply each effect exactly once: one TransactWriteItems, and the database decides.

The transaction reserves the key (`attribute_not_exists`), moves the order only if the event
is not older than the order's last one (the ordering guard is the Update's condition) and
writes the outbox item, all or nothing. Each item has a named slot
(functions/store/transaction.py): the cancellation reasons are read back by slot. What an
entry does, and what a refusal means for it, is plain code over what was read (core.py);
this processor reads, routes, asks the core and carries its plan out.

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

from functions.process import core
from functions.process.interpreters import Interpreters
from functions.shared import tables
from functions.shared.bindings import bound_orders
from functions.shared.domain import (
    COUNTED_OUTCOMES,
    Binding,
    Delivery,
    Effect,
    Interpretation,
    NoEffect,
    Outcome,
    RoutedEffect,
    Transition,
    effect_key,
)
from functions.shared.dynamo import raise_unclassified, to_attributes
from functions.shared.errors import (
    OrderNotYetKnownError,
    UnexpectedWriteError,
    WriteContendedError,
)
from functions.shared.outbox import outbox_id_for
from functions.shared.settings import DEFAULT_RETENTION_DAYS
from functions.store.ledger import LedgerItems
from functions.store.outbox import reopen_for_email, reopen_the_orders_owed_emails
from functions.store.reads import LedgerReads
from functions.store.transaction import (
    Committer,
    Placed,
    Slot,
    Transaction,
    commit,
    is_condition_failure,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


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
        known = self._reads.before_writing(routed, core.bound_objects(routed))
        mark = self._reads.capture_mark(routed) if core.needs_capture_mark(routed, known) else None
        processed = self._carry_out(core.plan(routed, known, mark))
        if processed.outcome.value in COUNTED_OUTCOMES and core.teaches_recipient(routed, known):
            # Its order update set the recipient if none was there: the order's other
            # notifications sent without their e-mail get it now (not its own new one: a
            # top-up's is its own key's).
            self._reopen_the_orders_owed_emails(routed.order_id, processed.effect_key or routed.key)
        return processed

    def _carry_out(self, plan: core.Plan) -> Processed:
        """The plan written through the store; a refused transaction is planned again."""
        if isinstance(plan, core.Fail):
            raise plan.error
        if isinstance(plan, core.Duplicate):
            return self._duplicate(plan)
        routed = plan.routed
        if isinstance(plan, core.Conflict):
            delivery = routed.effect.delivery
            return self._record_conflict(
                delivery, plan.ref, plan.bound_order, routed.order_id, routed.key
            )
        if isinstance(plan, core.Void):
            return self._void(routed)
        transaction = self._stale(plan) if isinstance(plan, core.Stale) else self._applied(plan)
        if (refusal := self._commit(self._db, transaction)) is not None:
            return self._carry_out(core.after_refusal(plan, refusal))
        if isinstance(plan, core.Stale):
            return self._processed(routed, Outcome.STALE, "status change discarded, amount counted")
        return self._processed(routed, Outcome.APPLIED, routed.effect.note or "")

    def _duplicate(self, duplicate: core.Duplicate) -> Processed:
        """A duplicate, with what it says (core.duplicate_detail); if it names the customer
        the counted one did not, the order learns it; if the counted one taught the order its
        customer, the order's owed e-mails are re-opened again (that re-open may have failed)."""
        routed = duplicate.routed
        if duplicate.first is None or not duplicate.first.named_recipient:
            self._learn_recipient(routed)
        elif duplicate.first.taught_recipient:
            self._reopen_the_orders_owed_emails(routed.order_id, routed.key)
        detail, disagrees = core.duplicate_detail(duplicate)
        return self._processed(
            duplicate.routed, Outcome.DUPLICATE, detail, amount_disagrees=disagrees
        )

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
        else:
            self._reopen_the_orders_owed_emails(routed.order_id, routed.key)
        reopen_for_email(self._db, self._tables.outbox, outbox_id_for(routed.key), self._clock())

    def _reopen_the_orders_owed_emails(self, order_id: str, but: str) -> None:
        tables, now = self._tables, self._clock()
        reopen_the_orders_owed_emails(
            self._db, tables.ledger, tables.outbox, order_id, now, but=but
        )

    def _applied(self, plan: core.Apply) -> Transaction:
        routed, to_bind = plan.routed, plan.to_bind
        key = self._items.key_reservation(routed, Outcome.APPLIED, taught_recipient=plan.teaches)
        return Transaction.of(
            Placed(Slot.KEY, key),
            Placed(Slot.ORDER, {"Update": self._items.order_update(routed)}),
            Placed(Slot.OUTBOX, self._items.outbox_put(routed, late=False)),
            self._items.reversed_check(routed),
            self._items.capture_mark(routed),
            self._bindings(routed.effect.delivery.provider, routed.order_id, to_bind),
        )

    # -- bindings: which order a provider object belongs to, first writer wins -------------

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

    def _stale(self, plan: core.Stale) -> Transaction:
        """The key recorded as stale, the entry posted and announced flagged late; the
        lifecycle status stays untouched.

        Sums commute, so a payment that arrives after its own refund still adds to paid_total
        and the books balance; downstream books (EventBridge consumers) must balance too, so
        the movement is announced once, marked late with its provider time.
        """
        routed, to_bind = plan.routed, plan.to_bind
        update = self._items.stale_update(routed)
        reason = "older than the order's last event: status kept, counted"
        key = self._items.key_reservation(routed, Outcome.STALE, taught_recipient=plan.teaches)
        return Transaction.of(
            Placed(Slot.KEY, key),
            Placed(Slot.ORDER, {"Update": update}),
            Placed(
                Slot.OUTBOX,
                self._items.outbox_put(
                    routed, late=True, superseded=self._reads.superseded(routed)
                ),
            ),
            self._items.reversed_check(routed),
            self._items.capture_mark(routed),
            self._bindings(routed.effect.delivery.provider, routed.order_id, to_bind),
            Placed(Slot.AUDIT, self._items.entry_audit(routed, Outcome.STALE, reason)),
        )

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
