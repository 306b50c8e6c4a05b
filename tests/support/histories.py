"""One lifecycle at a provider, delivered the way providers deliver, through the pipeline.

A `History` holds a provider simulator and the pipeline on moto (tests/support/pipeline.py).
The provider moves (each move's webhooks join those in flight); webhooks in flight are
delivered in any order, more than once, in parallel copies, or resent long after; the process
Lambda drains the queue as its event source mapping would, and the outbox stream's first try
follows each drain. `settle` then delivers what is left, drains, sweeps the outbox, and
`violations` compares the tables with the simulator's true books.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from functions.outbox.channels import SesEmailChannel
from functions.outbox.sender import OutboxSender, SendPolicy
from functions.outbox.sweeper import Sweeper
from functions.process import handler
from functions.shared import books, tables
from functions.shared.domain import COUNTED_OUTCOMES, TRANSITION_RULES, Transition
from functions.shared.outbox import OutboxItem
from provider_events.simulators.asaas import AsaasSimulator
from provider_events.simulators.mercadopago import MercadoPagoSimulator
from provider_events.simulators.stripe import StripeSimulator
from provider_events.simulators.webhooks import Webhook
from tests.conftest import TABLES
from tests.support.clock import FakeClock
from tests.support.pipeline import Pipeline

Simulator = StripeSimulator | MercadoPagoSimulator | AsaasSimulator


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

    # -- the provider ----------------------------------------------------------------------

    def move(self, choice: int) -> None:
        moves = self.simulator.moves(self.rng)
        if not moves:
            return  # the lifecycle is over
        name, make = moves[choice % len(moves)]
        self.in_flight += make()
        self.steps.append(name)
        # What the provider's API answers from now on (Stripe's refunds, Mercado Pago's payment).
        self.pipeline.apis.refunds.update(self.simulator.refunds_listed())
        if isinstance(self.simulator, MercadoPagoSimulator):
            self.pipeline.apis.payments.update(self.simulator.payments_listed())

    # -- delivery --------------------------------------------------------------------------

    def deliver(self, pick: int, copies: int = 1) -> None:
        """One webhook in flight, `copies` times at once (a provider retrying on a timeout)."""
        if not self.in_flight:
            return
        webhook = self.in_flight.pop(pick % len(self.in_flight))
        for _ in range(copies):
            self._enqueue(webhook)
        self.delivered.append(webhook)

    def resend(self, pick: int) -> None:
        """A webhook delivered before, sent again (a dashboard's resend, weeks later)."""
        if self.delivered:
            self._enqueue(self.delivered[pick % len(self.delivered)])

    def drain(self) -> None:
        """The process Lambda until the queue is empty, then the stream's first try of every
        new outbox item."""
        self.pipeline.process()
        # Deliveries parked for an order bound since: the waiting function's scheduled run.
        while handler.waiting_room().redrive()["redriven"]:
            self.pipeline.process()
        sender = self._sender()
        for item in self.pipeline.world.outbox():
            outbox_id = str(item["outbox_id"])
            if outbox_id not in self._tried:
                self._tried.add(outbox_id)
                sender.first_try(outbox_id, str(item["order_id"]))

    def settle(self) -> None:
        """Everything still in flight delivered, processed, and the outbox swept once due."""
        while self.in_flight:
            self.deliver(0)
        self.drain()
        self.clock.advance(24 * 3600)
        Sweeper(self.pipeline.world.dynamodb, TABLES.outbox, self._sender(), self.clock, 0).sweep()

    def _enqueue(self, webhook: Webhook) -> None:
        event = _event_identity(webhook)
        self.pipeline.sqs.send_message(
            QueueUrl=self.pipeline.queue_url,
            MessageBody=webhook.body,
            MessageAttributes={
                "provider": {"DataType": "String", "StringValue": webhook.provider},
                "event_id": {"DataType": "String", "StringValue": event},
                "event_type": {"DataType": "String", "StringValue": webhook.event_type},
            },
        )

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
        order = world.order(order_id)
        found: list[str] = []
        if self.pipeline.dead_letters():
            found.append(f"{self.pipeline.dead_letters()} message(s) dead-lettered")
        room = handler.waiting_room()
        found += [
            f"still waiting: {w.get('event_type')} {w.get('event_id')}" for w in room.waiting()
        ]
        found += [f"unmatched: {w.get('event_type')} {w.get('event_id')}" for w in room.unmatched()]
        totals = {name: int(order.get(name, 0) or 0) for name in truth.totals}
        if totals != truth.totals:
            found.append(f"totals {totals} != true {truth.totals}")
        status = books_status(order)
        if status != truth.status:
            found.append(f"status {status!r} != true {truth.status!r}")
        effects = world.effects(order_id)
        counted = Counter(
            f"{e['transition']}:{e['external_ref']}"
            for e in effects
            if e.get("outcome") in COUNTED_OUTCOMES
        )
        found += _entries_against(counted, truth.movements)
        found += [str(m) for m in world.mismatches(order_id)]
        found += self._announcements(world.outbox(order_id))
        return found

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
            if (
                item["transition"] == Transition.PAID.value
                and self.simulator.books.recipient
                and not item.get("late")
                and self.email.sent[key] != 1
            ):
                found.append(f"the payment was e-mailed {self.email.sent[key]} times")
        return found


def books_status(order: dict[str, Any]) -> str:
    from functions.shared.domain import financial_status

    return financial_status(order).value


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
    import json

    body = json.loads(webhook.body)
    return str(body.get("id", ""))


__all__ = ["History", "books", "tables"]
