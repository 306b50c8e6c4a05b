"""One lifecycle at a provider, delivered the way providers deliver, through the pipeline.

A `History` holds a provider simulator and the pipeline on moto (tests/support/pipeline.py).
The provider moves (each move's webhooks join those in flight); webhooks in flight are
delivered in any order, more than once, in parallel copies, or resent long after; the process
Lambda drains the queue as its event source mapping would, and the outbox stream's first try
follows each drain. `settle` then delivers what is left, drains, sweeps the outbox, and
`violations` compares the tables with the simulator's true books.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from moto.backends import get_backend
from moto.core.models import DEFAULT_ACCOUNT_ID

from fixtures import stripe
from fixtures.lambda_events import FakeLambdaContext, sqs_event, sqs_record
from fixtures.shapes import unique
from fixtures.simulators.asaas import AsaasSimulator
from fixtures.simulators.books import TrueBooks
from fixtures.simulators.mercadopago import MercadoPagoSimulator
from fixtures.simulators.several import SeveralPayments
from fixtures.simulators.stripe import StripeSimulator
from fixtures.simulators.stripe_checkout import StripeCheckout
from fixtures.simulators.stripe_subscription import StripeSubscription
from fixtures.simulators.stripe_thin import Destination, delivered, objects
from fixtures.simulators.webhooks import Webhook
from functions.mercadopago.models import Notification
from functions.outbox.channels import SesEmailChannel
from functions.outbox.sender import OutboxSender, SendPolicy
from functions.outbox.sweeper import Sweeper
from functions.process import handler, wiring
from functions.process.mercadopago_disputes import LedgerDisputes
from functions.process.service import EffectProcessor
from functions.process.waiting import NothingWaitsError, Waiting
from functions.shared.domain import (
    TRANSITION_RULES,
    Total,
    Transition,
)
from functions.shared.items import Order
from functions.shared.outbox import OutboxItem, OutboxStatus
from functions.statement import asaas as asaas_statement
from functions.statement.lines import Line
from functions.statement.mercadopago import payment_lines
from functions.statement.report import AMOUNT_DIFFERS, ENTRY_UNKNOWN, MOVEMENT_MISSING
from functions.statement.service import StatementPass
from functions.statement.stripe import line_of
from functions.stripe.balance import ListedBalanceTransaction
from infra.settings import MAX_RECEIVE_COUNT, PROCESS_BATCH_SIZE
from tests.support.clock import FakeClock
from tests.support.pipeline import Pipeline
from tests.support.queues import taken
from tests.support.world import TABLES

Simulator = (
    StripeSimulator
    | StripeCheckout
    | StripeSubscription
    | MercadoPagoSimulator
    | AsaasSimulator
    | SeveralPayments
)


class RecordedChannel:
    """A sink that counts what it was sent, by the item's key."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: Counter[str] = Counter()

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        self.sent[item.idempotency_key] += 1


class RecordedEmail(SesEmailChannel):
    """The e-mail channel's own rule (a recipient, and a transition customers are told of),
    with the sends counted instead of made."""

    def __init__(self) -> None:
        super().__init__(client=None, sender="loja@example.com")  # type: ignore[arg-type]
        self.sent: Counter[str] = Counter()

    def send(self, item: OutboxItem) -> None:
        self.sent[item.idempotency_key] += 1


@dataclass
class History:
    pipeline: Pipeline
    simulator: Simulator
    clock: FakeClock
    rng: random.Random = field(default_factory=lambda: random.Random(0))
    in_flight: list[Webhook] = field(default_factory=list)
    delivered: list[Webhook] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    events: RecordedChannel = field(default_factory=lambda: RecordedChannel("eventbridge"))
    email: RecordedEmail = field(default_factory=RecordedEmail)
    _tried: set[str] = field(default_factory=set)
    # The webhook queue as the process Lambda's event source mapping sees it: each message
    # with its receives so far; a record failed MAX_RECEIVE_COUNT times is dead-lettered.
    # Kept in memory (SQS on moto cost three calls a message); what the waiting function
    # re-drives comes through the stack's own queue.
    _queue: list[_Message] = field(default_factory=list)
    _dead: list[_Message] = field(default_factory=list)
    _retried: bool = False
    # A payment no order names (its PaymentIntent carries no order id): its money is nobody's
    # until an operator attaches it to the order (`umavez attach`), then the order's.
    unnamed: bool = False
    attached: bool = False
    # Webhooks lost for good (never delivered, never resent): only the provider's statement,
    # read once everything else arrived, can book what they announced.
    lost: list[Webhook] = field(default_factory=list)
    statement_found: list[str] = field(default_factory=list)
    # Orders credited by forged deliveries (a body Stripe never sent, signed with a leaked
    # secret): the statement must report each as money the provider never moved.
    forged: list[str] = field(default_factory=list)
    forgeries: list[Webhook] = field(default_factory=list)
    # The pipeline run with a broken interpretation: every Stripe payment amount read as half
    # of it. The books then hold half of what was paid, and the statement must say so
    # (`amount_differs`), never top them up.
    misreads: bool = False
    # The pipeline run with another broken interpretation: every Stripe payment of the order
    # read as naming this other order. Its money is booked there, and the statement must say
    # that the provider moved it for its own order (`movement_missing`).
    misbound: str | None = None
    # No webhook of the history ever arrives (the endpoint down for all of it): each one is
    # lost for good as it is sent, and the statement alone books the order.
    unheard: bool = False
    # Every webhook the provider sent, delivered or not: what its objects are now is its books.
    sent: list[Webhook] = field(default_factory=list)
    # How Stripe's destination delivers: snapshot events, thin events (their objects read from
    # the fake Stripe API as the lifecycle leaves them), or both on one stack.
    destination: Destination = Destination.SNAPSHOT

    # -- the provider ----------------------------------------------------------------------

    def move(self, choice: int) -> None:
        moves = self.simulator.moves(self.rng)
        if not moves:
            return  # the lifecycle is over
        name, make = moves[choice % len(moves)]
        made = make()
        self.sent += made
        self.steps.append(name)
        if self.destination is not Destination.SNAPSHOT:
            self.pipeline.apis.stripe_objects.update(objects(made))
        for webhook in (
            posted for made_one in made for posted in delivered(self.destination, made_one)
        ):
            if self.unheard and self._healable(webhook):
                self.lost.append(webhook)
            else:
                self.in_flight.append(webhook)
        # What the provider's API answers from now on (Stripe's refunds, Mercado Pago's and
        # Asaas's payments).
        self.pipeline.apis.refunds.update(self.simulator.refunds_listed())
        for payment in self._payments():
            if isinstance(payment, MercadoPagoSimulator):
                self.pipeline.apis.payments.update(payment.payments_listed())
                self.pipeline.apis.orders.update(payment.orders_listed())
            if isinstance(payment, AsaasSimulator):
                self.pipeline.apis.asaas_payments.update(payment.payments_listed())

    def _payments(self) -> list[StripeSimulator | MercadoPagoSimulator | AsaasSimulator]:
        """The order's payments, each in its own simulator."""
        if isinstance(self.simulator, SeveralPayments):
            return list(self.simulator.payments.values())
        if isinstance(self.simulator, StripeCheckout):
            return [self.simulator.payment]
        if isinstance(self.simulator, StripeSubscription):
            return list(self.simulator.payments)
        return [self.simulator]

    def _read_now(self, read: set[str]) -> None:
        """umavez read these Mercado Pago payments as they are now (a notification naming each
        was processed, or the statement listed it)."""
        for payment in self._payments():
            if isinstance(payment, MercadoPagoSimulator) and str(payment.payment_id) in read:
                payment.read_now()

    # -- the operator ----------------------------------------------------------------------

    def attach(self) -> None:
        """`umavez attach stripe <pi> <order>` once something of the payment waits or went
        unmatched (before that, there is nothing to attach: the command refuses)."""
        if not self.unnamed or self.attached:
            return
        self.drain()
        payment = self._payments()[0]
        assert isinstance(payment, StripeSimulator)
        try:
            self._waiting_room().attach("stripe", payment.intent, self.simulator.order_id)
        except NothingWaitsError:
            self.steps.append("attach refused: nothing waits yet")
            return
        self.attached = True
        self.steps.append(f"attach {payment.intent}")
        self._take_redriven()
        if self._process():
            self._first_tries()

    @property
    def _unattached(self) -> bool:
        return self.unnamed and not self.attached

    # -- delivery --------------------------------------------------------------------------

    def deliver(self, pick: int, copies: int = 1) -> None:
        """One webhook in flight, `copies` times at once (a provider retrying on a timeout)."""
        if not self.in_flight:
            return
        webhook = self.in_flight.pop(pick % len(self.in_flight))
        for _ in range(copies):
            self._enqueue(webhook)
        self.delivered.append(webhook)

    @property
    def statement_heals(self) -> bool:
        """Payments each naming their order: the statement books what any of their webhooks
        announced (a Stripe Checkout Session's or invoice's binding, lost, it cannot). Stripe's
        balance, Mercado Pago's payments and Asaas's financial transactions alike."""
        return not isinstance(self.simulator, StripeCheckout | StripeSubscription) and not (
            self.unnamed
        )

    def _healable(self, webhook: Webhook) -> bool:
        """Whether the provider's statement holds what the webhook announced: not a Stripe
        inquiry's (it moves no money, so Stripe's balance has no line of it), nor an Asaas
        receipt in cash or its undo (no money through Asaas: no line); what the statement
        cannot know, the webhooks alone tell. A history read by a broken map loses nothing
        (what it booked is the fault under test)."""
        return not (
            _of_an_inquiry(webhook)
            or _of_cash(webhook)
            or self.misreads
            or self.misbound is not None
        )

    def lose(self, pick: int) -> None:
        """A webhook in flight lost for good: the endpoint was down past the provider's
        retries (and, for Stripe, past its Events API's 30 days); never resent."""
        healable = [n for n, w in enumerate(self.in_flight) if self._healable(w)]
        if healable:
            self.lost.append(self.in_flight.pop(healable[pick % len(healable)]))
            self.steps.append(f"lost {self.lost[-1].event_type}")

    def forge(self) -> None:
        """A payment Stripe never made, for an order of its own, delivered as if signed by it."""
        order = unique("ord")
        at = max((p.now for p in self._payments() if isinstance(p, StripeSimulator)), default=0)
        body = stripe.payment_intent_succeeded(order, unique("pi"), 777, at)
        forgery = Webhook("stripe", "payment_intent.succeeded", body, at)
        self.forged.append(order)
        self.forgeries.append(forgery)
        self._enqueue(forgery)
        self.steps.append(f"forged a payment for {order}")

    def read_the_statement(self) -> list[str]:
        """`umavez statement <provider>` over the history: the provider's books as its objects
        are now (Stripe's balance transactions; Mercado Pago's payments searched; Asaas's
        financial transactions and the payments they name), read by
        functions/statement's own readers, booked and matched; its mismatches, each a
        violation unless the history's faults explain it."""
        world = self.pipeline.world
        lines, known = self._statement_lines()
        # The window: the history's movements, from its first event on (a card payment's Asaas
        # line comes a month after it)
        created = [line.created for line in lines]
        created += [w.created for w in [*self.sent, *self.forgeries]]
        if not created:
            return []  # nothing happened: the statement holds nothing, the books nothing
        passing = StatementPass(
            world.dynamodb, TABLES, EffectProcessor(world.dynamodb, TABLES, time.time), self.clock
        )
        order_id = self.simulator.order_id
        orders = [order_id, *self.forged] + ([self.misbound] if self.misbound else [])
        report = passing.run(
            self.simulator.provider,
            lines,
            min(created),
            max(created) + 30 * 86_400,
            known,
            orders=orders,
        )
        self.steps.append(f"statement: {report.booked} booked")
        # What the pass read, umavez read: each Mercado Pago payment as it is now.
        self._read_now(
            {str(p.payment_id) for p in self._payments() if isinstance(p, MercadoPagoSimulator)}
        )
        # The waiting function's next run: deliveries parked for a payment the statement has
        # just bound go through again (duplicates now, of what the statement booked).
        if self._waiting_room().redrive()["redriven"]:
            self._take_redriven()
            self._process()
        self._first_tries()
        # Exactly the forged payments are money the provider never moved, a payment read
        # wrong is an amount differing, a payment booked on another order is a movement
        # missing from its own; nothing else.
        reported = sorted((m.kind, m.order_id) for m in report.mismatches)
        expected = [(ENTRY_UNKNOWN, order) for order in self.forged]
        if self.misreads and self.simulator.books.paid:
            expected.append((AMOUNT_DIFFERS, order_id))
        if self.misbound:  # each capture's line names the order it was moved for
            captures = [
                line
                for p in self._payments()
                if isinstance(p, StripeSimulator)
                for line in p.lines
                if line.category == "charge"
            ]
            expected += [(MOVEMENT_MISSING, order_id)] * len(captures)
        if reported == sorted(expected):
            return []
        told = [f"statement {m.kind} {m.order_id}: {m.detail}" for m in report.mismatches]
        return told or [f"statement reported nothing; expected {expected}"]

    def _statement_lines(self) -> tuple[list[Line], Callable[[Mapping[str, Any]], bool] | None]:
        """The provider's statement as its objects are now, read as the pass reads it; and,
        for Asaas, what its payments API says of an entry no line holds yet."""
        payments = self._payments()
        if self.simulator.provider == "mercadopago":
            searched = [
                listed
                for p in payments
                if isinstance(p, MercadoPagoSimulator)
                for listed in p.payments_searched()
            ]
            disputes = LedgerDisputes(self.pipeline.world.dynamodb, TABLES.ledger)
            return payment_lines(searched, disputes), None
        if isinstance(self.simulator, AsaasSimulator):
            answers = self.simulator.payments_listed()
            transactions = [
                asaas_statement.FinancialTransaction.model_validate(t)
                for t in self.simulator.statement()
            ]
            return (
                asaas_statement.statement_lines(transactions, answers.get),
                asaas_statement.known_to_asaas(answers.get),
            )
        balance = [
            line_of(ListedBalanceTransaction.model_validate(t))
            for p in payments
            if isinstance(p, StripeSimulator)
            for t in p.balance()
        ]
        return balance, None

    def resend(self, pick: int) -> None:
        """A webhook delivered before, sent again (a dashboard's resend, weeks later)."""
        if self.delivered:
            self._enqueue(self.delivered[pick % len(self.delivered)])

    def drain(self) -> None:
        """The process Lambda until the queue is empty, then the stream's first try of every
        new outbox item."""
        processed = self._process()
        # Deliveries parked for an order bound since: the waiting function's scheduled run
        # (a delivery is parked only after failing its first receives: none failed, none wait).
        while self._retried and wiring.waiting_room().redrive()["redriven"]:
            self._take_redriven()
            processed += self._process()
        if processed:
            self._first_tries()

    def settle(self) -> None:
        """Everything still in flight delivered and processed; a day later the waiting
        function's run (objects watched are read again) and the outbox swept once due."""
        while self.in_flight:
            self.deliver(0)
        self.drain()
        # A payment nobody attached: past the waiting limit, what it moved is unmatched.
        self.clock.advance((4 if self._unattached else 1) * 24 * 3600)
        # The statement is read in every history it can heal (an order's fees and net come
        # through it alone), and in every mis-mapped one.
        statement_due = self.statement_heals or self.misreads or self.misbound
        self.statement_found = self.read_the_statement() if statement_due else []
        room = self._waiting_room()
        if self._unattached:
            room.redrive()
        # (Skipped when nothing is watched, or nothing is left to send: the run, or the sweep,
        # would find nothing due. Thousands of histories make the reads count.)
        if any(room.watched()) and room.redrive()["rechecked"]:
            self._take_redriven()
            if self._process():
                self._first_tries()
        if any(item["status"] != OutboxStatus.SENT for item in self.pipeline.world.outbox()):
            sweeper = Sweeper(
                self.pipeline.world.dynamodb, TABLES.outbox, self._sender(), self.clock, 0
            )
            sweeper.sweep()

    def _first_tries(self) -> None:
        """The outbox stream's first try of every item not tried yet."""
        sender = self._sender()
        for item in self.pipeline.world.outbox():
            outbox_id = str(item["outbox_id"])
            if outbox_id not in self._tried:
                self._tried.add(outbox_id)
                sender.first_try(outbox_id, str(item["order_id"]))

    def _waiting_room(self) -> Waiting:
        """The waiting function on the history's clock (the process Lambda's own room runs on
        real time, so only this one finds a re-check due)."""
        pipeline = self.pipeline
        return Waiting(
            pipeline.world.dynamodb, pipeline.sqs, TABLES, pipeline.queue_url, self.clock
        )

    def _enqueue(self, webhook: Webhook) -> None:
        attributes = {
            "provider": webhook.provider,
            "event_id": _event_identity(webhook),
            "event_type": webhook.event_type,
        }
        body = _halved(webhook.body) if self.misreads else webhook.body
        if self.misbound and webhook not in self.forgeries:  # the order's own payment only
            body = _bound_elsewhere(body, self.misbound)
        self._queue.append(_Message(body, attributes))

    def _process(self) -> int:
        """Batches of ten to the process Lambda, as its mapping sends them; a failed record
        comes back (visibility timeout 0) until its receives run out. Returns the records
        handled."""
        handled = 0
        while self._queue:
            batch, self._queue = self._queue[:PROCESS_BATCH_SIZE], self._queue[PROCESS_BATCH_SIZE:]
            records, read = [], set()
            for message in batch:
                message.receives += 1
                if message.attributes["provider"] == "mercadopago":
                    read.add(str(json.loads(message.body).get("data", {}).get("id")))
                record = sqs_record(message.body, message.attributes, message.receives)
                records.append(record | {"messageId": message.id})
            response = handler.lambda_handler(sqs_event(*records), FakeLambdaContext())
            # Each payment a notification named was read as it is now.
            self._read_now(read)
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
            handled += len(batch)
            self._retried = self._retried or bool(failed)
            for message in batch:
                if message.id not in failed:
                    continue
                if message.receives >= MAX_RECEIVE_COUNT:
                    self._dead.append(message)
                else:
                    self._queue.append(message)
        return handled

    def _take_redriven(self) -> None:
        """What the waiting function sent to the stack's queue, into this one."""
        for body, attributes in taken(self.pipeline.sqs, self.pipeline.queue_url):
            self._queue.append(_Message(body, attributes))

    def _sender(self) -> OutboxSender:
        return OutboxSender(
            self.pipeline.world.dynamodb,
            TABLES.outbox,
            [self.events, self.email],
            self.clock,
            SendPolicy(),
            ledger_table=TABLES.ledger,
        )

    # -- the books -------------------------------------------------------------------------

    def violations(self) -> list[str]:
        """What the tables say that the provider's truth does not (empty: the books are right)."""
        world, truth = self.pipeline.world, self.simulator.books
        order_id = self.simulator.order_id
        found: list[str] = list(self.statement_found)
        if self.misbound:
            # What the broken interpretation booked: everything on the other order, nothing
            # on this one (reported above).
            if (held := world.find_order(order_id)) is not None:
                found.append(f"the order {order_id} holds {held}")
            order_id = self.misbound
        if self._unattached:
            # Nobody attached it: none of its money is the order's, all of it unmatched.
            truth = TrueBooks(truth.currency)
        if self.misreads:
            # What the broken interpretation booked: half of what was paid (reported above).
            truth = replace(truth, paid=truth.paid // 2)
        order = world.find_order(order_id) or Order(order_id)
        if self._dead:
            found.append(f"{len(self._dead)} message(s) dead-lettered")
        room = wiring.waiting_room()
        found += [f"still waiting: {w.event_type} {w.event_id}" for w in room.waiting()]
        unmatched = [f"unmatched: {w.event_type} {w.event_id}" for w in room.unmatched()]
        if not self._unattached:
            found += unmatched
        elif self.simulator.books.paid and not unmatched:
            found.append("the payment no order names is not unmatched")
        found += self._rechecks(room)
        totals = {name: order.total(Total(name)) for name in truth.totals}
        if totals != truth.totals:
            found.append(f"totals {totals} != true {truth.totals}")
        status = order.financial_status.value
        if status != truth.status:
            found.append(f"status {status!r} != true {truth.status!r}")
        effects = world.effects(order_id)
        counted = Counter(f"{e.transition}:{e.external_ref}" for e in effects if e.counted)
        found += _entries_against(_in_parts(counted, truth.paid_in_parts), truth.movements)
        outbox = world.outbox(order_id)
        found += [str(m) for m in world.mismatches(order_id, effects, outbox)]
        found += self._announcements(outbox)
        found += self._ignored_as_expected()
        found += self._fees(order)
        return found

    def _fees(self, order: Order) -> list[str]:
        """What the provider kept and paid out for the order, as the statement recorded it
        (`fee_total`, `net_total`), is the simulator's (a mis-mapped history's statement
        reports the fault; what its fees became is not the truth's)."""
        if not self.statement_heals or self.misreads or self.misbound:
            return []
        truth = self.simulator.books
        held = (order.fee_total or 0, order.net_total or 0)
        if held == (truth.fee, truth.net):
            return []
        return [f"fee and net {held} != true {(truth.fee, truth.net)}"]

    def _ignored_as_expected(self) -> list[str]:
        """Deliveries the provider's truth says change nothing (an Asaas charge deleted or
        restored) are recorded as ignored, with a reason that says so."""
        expected = getattr(self.simulator, "expected_ignored", {})
        if not expected:
            return []
        provider = self.simulator.provider
        records = {
            str(d.event_id): d for d in self.pipeline.world.deliveries() if d.provider == provider
        }
        found = []
        lost = {_event_identity(w) for w in self.lost}
        for event_id, why in expected.items():
            if event_id in lost:
                continue  # never delivered: nothing recorded
            record = records.get(event_id)
            if record is None:
                found.append(f"{event_id} recorded nothing")
            elif record.outcome != "ignored" or why not in record.reason:
                found.append(f"{event_id} recorded {record.outcome}: {record.reason}")
        return found

    def _rechecks(self, room: Waiting) -> list[str]:
        """After the day's re-check, a charge is watched exactly while one of its refunds is
        pending on a legacy endpoint (its charge.refunded, delivered by now, said so, and its
        later change may come as no event); a charge no order holds may not be yet."""
        watched = {str(w.object) for w in room.watched()}
        expected = {
            payment.charge
            for payment in self._payments()
            if isinstance(payment, StripeSimulator)
            and not payment.api_version.sends_card_refund_events
            and payment.pending_refunds()
        }
        if watched == expected:
            return []
        if self._unattached and watched <= expected:
            # A charge no order holds: its charge.refunded waits for one, watched or not yet.
            return []
        told = {
            str(json.loads(w.body)["data"]["object"]["id"])
            for w in self.delivered
            if w.event_type == "charge.refunded"
        }
        if watched <= expected and not (expected - watched) & told:
            # A pending refund only the statement saw (its charge.refunded lost): umavez never
            # heard of it, so watches nothing; a later pass books it once it succeeds.
            return []
        return [f"watched {sorted(watched)}, expected {sorted(expected)}"]

    def _announcements(self, outbox: list[dict[str, Any]]) -> list[str]:
        found = []
        for key, times in (self.events.sent + self.email.sent).items():
            if times > 2 or (times > 1 and self.email.sent[key] > 1):
                found.append(f"{key} announced {times} times")
        for item in outbox:
            key = str(item["outbox_id"])
            if self.events.sent[key] != 1:
                times = self.events.sent[key]
                found.append(f"{item['transition']} {item['external_ref']}: {times} events")
            # A late payment goes without its e-mail only where a newer movement of the same
            # payment was told since; another payment of the order is news of its own.
            books = self.simulator.books
            owed = not item.get("late") or not books.newer_of_its_payment(
                f"{Transition.PAID.value}:{item['external_ref']}"
            )
            if (
                item["transition"] == Transition.PAID.value
                and books.recipient
                and owed
                and self.email.sent[key] != 1
            ):
                found.append(
                    f"the payment {item['external_ref']} was e-mailed {self.email.sent[key]} times"
                )
        return found


@dataclass
class _Message:
    body: str
    attributes: dict[str, str]
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    receives: int = 0


def _in_parts(counted: Counter[str], paid_in_parts: dict[str, set[str]]) -> Counter[str]:
    """The entries of a payment captured in parts, however the ledger keys them (the payment's
    ref, the payment's ref and a suffix, or the provider object of each part), as the one
    movement the truth names: what they sum to is the totals' business."""
    merged: Counter[str] = Counter()
    for key, times in counted.items():
        transition, _, ref = key.partition(":")
        payment = next(
            (
                p
                for p, parts in paid_in_parts.items()
                if ref == p or ref in parts or ref.startswith((f"{p}:", f"{p}#"))
            ),
            None,
        )
        if transition == Transition.PAID.value and payment is not None:
            merged[f"{transition}:{payment}"] = 1
        else:
            merged[key] += times
    return merged


def _entries_against(counted: Counter[str], movements: list[str]) -> list[str]:
    """Each true movement counted once; none counted that did not happen. A movement and its
    reversal may both be missing (the failure processed before the success voids both)."""
    expected = Counter(movements)
    found = [f"{m} counted {n} times" for m, n in counted.items() if n > 1]
    extra = set(counted) - set(expected)
    missing = set(expected) - set(counted)
    reversals = {
        f"{rule.reverses.value}:{m.split(':', 1)[1]}": m
        for m in list(missing)
        for transition, rule in TRANSITION_RULES.items()
        if rule.reverses is not None and m.startswith(f"{transition.value}:")
    }
    for settled, reversal in reversals.items():
        if settled in missing:
            missing -= {settled, reversal}
    found += [f"counted but never happened: {m}" for m in sorted(extra)]
    found += [f"happened but never counted: {m}" for m in sorted(missing)]
    return found


def _event_identity(webhook: Webhook) -> str:
    """The id ingest's envelope gives the message (a Mercado Pago order's notification has none
    of its own: its order's version names it)."""
    body = json.loads(webhook.body)
    if webhook.provider == "mercadopago":
        return Notification.model_validate(body).event_id
    return str(body.get("id", ""))


def emptied(pipeline: Pipeline) -> None:
    """The pipeline as new: empty tables, queues and provider APIs (histories share one).

    The tables are emptied in their store (deleting and creating them through the API cost
    more than a short history does, and only their items differ from a new table's)."""
    if pipeline.memory is not None:
        pipeline.memory.clear()
    else:
        backend = get_backend("dynamodb")[DEFAULT_ACCOUNT_ID][
            pipeline.world.dynamodb.meta.region_name
        ]
        for name in (TABLES.ledger, TABLES.outbox):
            table = backend.tables[name]
            table.items = defaultdict(dict)
            if table.stream_shard is not None:
                table.stream_shard.items = []
    for url in (pipeline.queue_url, pipeline.dead_letter_url):
        while messages := pipeline.sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0
        ).get("Messages", []):
            for message in messages:
                pipeline.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    pipeline.apis.payments.clear()
    pipeline.apis.asaas_payments.clear()
    pipeline.apis.refunds.clear()
    pipeline.apis.stripe_objects.clear()
    pipeline.apis.stripe_versions.clear()
    pipeline.apis.requests.clear()


def _of_an_inquiry(webhook: Webhook) -> bool:
    """A Stripe dispute event of an inquiry (`warning_*`), or of one escalating (a thin
    event's, by the change it announces)."""
    data = json.loads(webhook.announces or webhook.body).get("data", {})
    stripe_object = data.get("object", {})
    if stripe_object.get("object") != "dispute":
        return False
    before = (data.get("previous_attributes") or {}).get("status") or ""
    return str(stripe_object.get("status", "")).startswith("warning_") or str(before).startswith(
        "warning_"
    )


def _of_cash(webhook: Webhook) -> bool:
    """An Asaas receipt in cash, or its undo: money that never went through Asaas."""
    if webhook.provider != "asaas":
        return False
    event = json.loads(webhook.body)
    payment = event.get("payment") or {}
    return payment.get("status") == "RECEIVED_IN_CASH" or "IN_CASH" in str(event.get("event"))


def _bound_elsewhere(body: str, order_id: str) -> str:
    """A Stripe payment's event as a broken map reads it: the PaymentIntent or charge naming
    `order_id` instead of its own order."""
    event = json.loads(body)
    carried = event.get("data", {}).get("object", {})
    if carried.get("object") in ("payment_intent", "charge") and carried.get("metadata"):
        carried["metadata"] = {**carried["metadata"], "order_id": order_id}
    return json.dumps(event)


HALVED: tuple[str, ...] = ("amount", "amount_received", "amount_captured", "amount_capturable")


def _halved(body: str) -> str:
    """A Stripe payment's event as a broken map reads it: every amount of the PaymentIntent or
    charge (and of what it was before) half of what it is."""
    event = json.loads(body)
    data = event.get("data", {})
    for carried in (data.get("object", {}), data.get("previous_attributes") or {}):
        if data.get("object", {}).get("object") in ("payment_intent", "charge"):
            for name in HALVED:
                if isinstance(carried.get(name), int):
                    carried[name] //= 2
    return json.dumps(event)
