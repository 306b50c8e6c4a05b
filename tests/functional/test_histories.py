"""The books against simulated providers: lifecycles and delivery orders explored, not listed.

Hypothesis draws what the provider does (each move one it allows in that state) and how its
webhooks arrive (any order, several copies at once, a resend long after, drains in between);
after everything arrived and the pipeline drained, the order's totals, status, counted entries
and announcements must be the simulator's truth. A failure prints the shortest history that
reproduces it, as steps of this machine, ready to paste into a regression test.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from fixtures.shapes import unique
from fixtures.simulators.asaas import AsaasSimulator
from fixtures.simulators.mercadopago import MercadoPagoSimulator
from fixtures.simulators.several import deposit_and_balance, two_cards
from fixtures.simulators.stripe import StripeSimulator
from fixtures.simulators.stripe_checkout import StripeCheckout
from fixtures.simulators.stripe_objects import ApiVersion, Capture
from fixtures.simulators.stripe_subscription import StripeSubscription
from fixtures.simulators.stripe_thin import THIN_READ_VERSIONS, Destination
from functions.stripe.models import NEWEST_KNOWN_API_VERSION
from tests.support.clock import FakeClock
from tests.support.histories import History, Simulator, emptied
from tests.support.pipeline import Pipeline, pipeline_on_moto

# A few hundred in `make test`; `make histories` runs 10,000 (scripts/histories.py).
HISTORIES = int(os.environ.get("UMAVEZ_HISTORIES", "200"))
# Which providers' lifecycles are drawn (all three unless narrowed, e.g. "mercadopago,asaas").
PROVIDERS = os.environ.get("UMAVEZ_HISTORIES_PROVIDERS", "stripe,mercadopago,asaas").split(",")
T0 = 1_764_460_800
# Each lifecycle the simulators model is drawn; a switch turned off narrows the draws while a
# defect it finds is being fixed (never committed off).
_DRAWS_MANUAL_CAPTURE = True  # Stripe: authorized, then captured in full, in part, over
_DRAWS_MULTICAPTURE = True  # Stripe: captured in parts (`final_capture: false`)
_DRAWS_SEVERAL_PAYMENTS = True  # a Stripe deposit and balance, a Mercado Pago two-card payment
_DRAWS_MEDIATION_LOST_BY_REFUND = True  # Mercado Pago: the buyer wins, refunded (bpp)
_DRAWS_CHECKOUT = True  # Stripe Checkout: card, boleto or Pix paid later or never, expired
_DRAWS_UNNAMED = True  # a Stripe payment no order names, attached by an operator, or never
_DRAWS_SUBSCRIPTIONS = True  # Stripe invoices: first and renewals, voided, uncollectible, ...
# How an order is paid: one payment, several (a deposit and its balance; two cards), through a
# Stripe Checkout Session, or by a Stripe subscription's invoices.
LIFECYCLES = [
    "one payment",
    "several payments",
    "checkout",
    "subscription",
    "subscription by checkout",
    "named by no order",
]


# One pipeline for the module's histories, emptied before each (setting one up per history
# cost more than most histories do).
_STAGE: dict[str, Pipeline] = {}


# Histories checked in this process; `make histories` sums its workers' (scripts/histories.py).
_CHECKED: list[int] = [0]
REPORT = os.environ.get("UMAVEZ_HISTORIES_REPORT")


@pytest.fixture(scope="module", autouse=True)
def _pipeline() -> Iterator[None]:
    # The tables on the project's own in-memory DynamoDB (its contract with moto:
    # tests/devstack/test_memory_store.py); the queues, secrets and buses on moto.
    with (
        pytest.MonkeyPatch.context() as patch,
        pipeline_on_moto(patch, tables_in_memory=True) as pipeline,
    ):
        _STAGE["pipeline"] = pipeline
        yield
        _STAGE.clear()
    if REPORT:
        Path(REPORT).write_text(str(_CHECKED[0]))


class ProviderHistories(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.pipeline = _STAGE["pipeline"]
        emptied(self.pipeline)
        self.history: History | None = None

    @initialize(
        provider=st.sampled_from(PROVIDERS),
        version=st.sampled_from(ApiVersion),
        amount=st.sampled_from([5000, 1234, 99]),
        refund_updates=st.booleans(),
        capture=st.sampled_from(Capture),
        lifecycle=st.sampled_from(LIFECYCLES),
        installments=st.sampled_from([1, 2, 3]),
        mismap=st.sampled_from(["none", "none", "none", "halved", "elsewhere"]),
        unheard=st.sampled_from([False] * 7 + [True]),
        orders_api=st.sampled_from([False, False, "retried", "first try"]),
        destination=st.sampled_from([Destination.SNAPSHOT, *Destination]),
    )
    def open_account(
        self,
        provider: str,
        version: ApiVersion,
        amount: int,
        refund_updates: bool,
        capture: Capture,
        lifecycle: str,
        installments: int,
        mismap: str,
        unheard: bool,
        orders_api: bool | str,
        destination: Destination,
    ) -> None:
        order = unique("ord")
        simulator: Simulator
        several = lifecycle == "several payments" and _DRAWS_SEVERAL_PAYMENTS
        if (capture is Capture.MANUAL and not _DRAWS_MANUAL_CAPTURE) or (
            capture is Capture.MULTICAPTURE and not _DRAWS_MULTICAPTURE
        ):
            capture = Capture.AUTOMATIC
        if provider == "stripe" and several:
            simulator = deposit_and_balance(
                order, amount, version, T0, refund_updates=refund_updates
            )
        elif provider == "stripe" and lifecycle == "checkout" and _DRAWS_CHECKOUT:
            simulator = StripeCheckout(order, amount, version, T0, refund_updates=refund_updates)
        elif provider == "stripe" and lifecycle.startswith("subscription") and _DRAWS_SUBSCRIPTIONS:
            # Invoices in their basil shapes (invoice.paid names no payment; invoice_payment.paid),
            # or earlier; started by a Checkout Session in subscription mode, or not
            simulator = StripeSubscription(
                order,
                amount,
                T0,
                api_version=version,
                refund_updates=refund_updates,
                via_checkout=lifecycle == "subscription by checkout",
            )
        elif provider == "stripe" and lifecycle == "named by no order" and _DRAWS_UNNAMED:
            simulator = StripeSimulator(
                order, amount, version, T0, refund_updates=refund_updates, names_order=False
            )
        elif provider == "stripe":
            simulator = StripeSimulator(
                order, amount, version, T0, refund_updates=refund_updates, capture=capture
            )
        elif provider == "mercadopago" and several:
            simulator = two_cards(order, amount, T0)
        elif provider == "mercadopago":
            # Through the payments API, or the Orders API (its first card refused, or not)
            simulator = MercadoPagoSimulator(
                order,
                amount,
                T0,
                buyer_wins_mediations=_DRAWS_MEDIATION_LOST_BY_REFUND,
                orders_api=bool(orders_api),
                retried=orders_api == "retried",
            )
        else:
            # One payment, or an installment plan: each installment a payment of the order
            simulator = AsaasSimulator(order, amount, T0, installments=installments)
        # The senders' clock starts where the process Lambda's (the real one) stamps items.
        clock = FakeClock(int(time.time()))
        self.history = History(self.pipeline, simulator, clock, random.Random(amount))
        self.history.unnamed = isinstance(simulator, StripeSimulator) and not simulator.names_order
        # A deliberate mis-map of one Stripe payment naming its order: read at half its
        # amount, or as naming another order
        mismapped = type(simulator) is StripeSimulator and not self.history.unnamed
        # (Not a payment captured in parts: half of it can be what its first captures took,
        # and the statement cannot tell that count from a last capture whose webhooks were
        # lost; it books the rest, as it must for the lost capture.)
        self.history.misreads = (
            mismapped and mismap == "halved" and capture is not Capture.MULTICAPTURE
        )
        self.history.misbound = unique("ord") if mismapped and mismap == "elsewhere" else None
        # A history none of whose webhooks ever arrives: the statement alone books it
        self.history.unheard = unheard and self.history.statement_heals
        # Stripe's thin events, alone or beside the snapshot ones, on a destination reading
        # objects in the version umavez asks for: a current one (the broken maps above
        # rewrite snapshot bodies, so they are read from snapshots)
        if (
            provider == "stripe"
            and version in THIN_READ_VERSIONS
            and not (self.history.misreads or self.history.misbound)
        ):
            self.history.destination = destination

    @rule(choice=st.integers(0, 20))
    def provider_moves(self, choice: int) -> None:
        self._history().move(choice)

    @precondition(lambda self: bool(self.history and self.history.in_flight))
    @rule(pick=st.integers(0, 20), copies=st.sampled_from([1, 1, 1, 2, 3]))
    def webhook_arrives(self, pick: int, copies: int) -> None:
        self._history().deliver(pick, copies)

    @precondition(
        lambda self: bool(self.history and self.history.in_flight and self.history.statement_heals)
    )
    @rule(pick=st.integers(0, 20))
    def webhook_lost_for_good(self, pick: int) -> None:
        self._history().lose(pick)

    @precondition(
        lambda self: bool(
            self.history
            and self.history.statement_heals
            and self.history.simulator.provider == "stripe"
            and not self.history.forged
        )
    )
    @rule()
    def forged_delivery(self) -> None:
        self._history().forge()

    @precondition(lambda self: bool(self.history and self.history.delivered))
    @rule(pick=st.integers(0, 20))
    def resent_weeks_later(self, pick: int) -> None:
        self._history().resend(pick)

    @precondition(lambda self: bool(self.history and self.history.unnamed))
    @rule()
    def operator_attaches(self) -> None:
        self._history().attach()

    @rule()
    def queue_drains(self) -> None:
        self._history().drain()

    def teardown(self) -> None:
        if self.history is not None:
            self.history.settle()
            violations = self.history.violations()
            assert not violations, (self.history.steps, violations)
            _CHECKED[0] += 1

    def _history(self) -> History:
        assert self.history is not None
        return self.history


ProviderHistories.TestCase.settings = settings(
    max_examples=HISTORIES,
    stateful_step_count=12,
    deadline=None,
    derandomize=os.environ.get("UMAVEZ_HISTORIES_SEED") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    # Shrinking replays whole histories through the pipeline: bounded, it still ends short.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
)
test_provider_histories = ProviderHistories.TestCase


def played(history: History, *moves: str, read_after: frozenset[str] = frozenset()) -> None:
    """The simulator's moves by name; after those in `read_after`, every webhook in flight
    delivered and processed (umavez reads the payment then)."""
    for name in moves:
        names = [n for n, _ in history.simulator.moves(random.Random(0))]
        history.move(names.index(name))
        if name in read_after:
            while history.in_flight:
                history.deliver(0)
            history.drain()


@pytest.mark.parametrize("release_read", [True, False])
def test_a_chargeback_after_a_mediation_the_seller_won_is_booked_as_the_payment_shows_it(
    release_read: bool,
) -> None:
    # Given a Mercado Pago payment held by a mediation umavez read, that the seller won
    pipeline = _STAGE["pipeline"]
    emptied(pipeline)
    simulator = MercadoPagoSimulator(unique("ord"), 5000, T0)
    history = History(pipeline, simulator, FakeClock(int(time.time())), random.Random(1))
    played(history, "approve", "mediation", read_after=frozenset({"mediation"}))

    # When the buyer files a chargeback, which is settled against the seller; umavez having read
    # the payment approved again between the two, or not
    reads = frozenset({"mediation won"} if release_read else set())
    played(history, "mediation won", read_after=reads)
    played(history, "chargeback after the mediation won", "chargeback settled")
    history.settle()

    # Then the ledger holds the merchant's true books: a second claim, lost, after a released
    # hold; or, the release never seen, one claim that escalated and was lost
    assert history.violations() == []
    books = simulator.books
    assert (books.dispute_won, books.dispute_lost) == ((5000, 5000) if release_read else (0, 5000))


def _history(simulator: Simulator) -> History:
    pipeline = _STAGE["pipeline"]
    emptied(pipeline)
    return History(pipeline, simulator, FakeClock(int(time.time())), random.Random(1))


def test_a_mediation_the_buyer_wins_by_a_refund_is_a_dispute_lost() -> None:
    # Given a Mercado Pago payment held by a mediation umavez read
    simulator = MercadoPagoSimulator(unique("ord"), 5000, T0)
    history = _history(simulator)
    played(history, "approve", "mediation", read_after=frozenset({"mediation"}))

    # When the buyer wins it: Mercado Pago refunds the buyer (`refunded`, `bpp_refunded`)
    played(history, "mediation lost by a refund to the buyer")
    history.settle()

    # Then the ledger holds the merchant's true books: the money lost to the claim, not won,
    # and no refund the merchant gave
    assert history.violations() == []
    books = simulator.books
    assert (books.dispute_lost, books.dispute_won, books.refunded) == (5000, 0, 0)


@pytest.mark.parametrize(
    ("captures", "paid"),
    [
        (("capture the rest",), 5000),
        (("capture part, release the rest",), 2500),
        (("over-capture",), 5500),
        (("increment the authorization", "capture the rest"), 7500),
    ],
)
def test_a_payment_captured_once_counts_what_was_captured(
    captures: tuple[str, ...], paid: int
) -> None:
    # Given a Stripe PaymentIntent authorized for 5000 with manual capture
    simulator = StripeSimulator(unique("ord"), 5000, ApiVersion.BASIL, T0, capture=Capture.MANUAL)
    history = _history(simulator)
    played(history, "authorize", read_after=frozenset({"authorize"}))

    # When it is captured: in full, in part (the rest released), over, or after an increment
    played(history, *captures)
    history.settle()

    # Then the order counts what was captured, once, and the customer is e-mailed once
    assert history.violations() == []
    assert simulator.books.paid == paid


@pytest.mark.parametrize("order_of_delivery", ["as sent", "final first"])
def test_a_payment_captured_in_parts_counts_every_capture(order_of_delivery: str) -> None:
    # Given a Stripe PaymentIntent authorized for 5000 with multicapture
    simulator = StripeSimulator(
        unique("ord"), 5000, ApiVersion.BASIL, T0, capture=Capture.MULTICAPTURE
    )
    history = _history(simulator)
    played(history, "authorize")

    # When it is captured in two parts, the second final, its webhooks delivered as sent or
    # the final capture's first
    played(history, "capture part, not final", "capture the rest")
    if order_of_delivery == "final first":
        history.in_flight.reverse()
    history.settle()

    # Then the order counts both captures
    assert history.violations() == []
    assert simulator.books.paid == 5000


def test_a_final_capture_naming_nobody_is_e_mailed_once_the_statement_books_the_lost_part() -> None:
    # Given a PaymentIntent captured in parts (a forged payment on another order beside it):
    # every webhook of the first part is lost for good, and the final capture is announced
    # only by events naming nobody, before a refund of all of it
    machine = ProviderHistories()
    machine.open_account(
        provider="stripe",
        version=ApiVersion.BASIL,
        amount=5000,
        refund_updates=False,
        capture=Capture.MULTICAPTURE,
        lifecycle="one payment",
        installments=1,
        mismap="none",
        unheard=False,
        orders_api=False,
        destination=Destination.SNAPSHOT,
    )
    machine.forged_delivery()
    for move in (0, 4):
        machine.provider_moves(move)
    for _ in range(4):
        machine.webhook_lost_for_good(0)
    for move in (0, 0):
        machine.provider_moves(move)
    machine.webhook_lost_for_good(1)
    history = machine._history()
    assert "capture the rest" in history.steps

    # When the history settles: the final capture is booked without a recipient and sent to
    # EventBridge only; then the statement books the lost part, which names the customer
    history.settle()

    # Then every payment notification is e-mailed once, the final capture's too, and the
    # books hold both captures
    assert history.violations() == []
    assert history.simulator.books.paid == 5000


@pytest.mark.parametrize("provider", ["stripe", "mercadopago"])
def test_two_payments_of_one_order_crossing_are_each_counted_and_e_mailed(provider: str) -> None:
    # Given an order paid by two payments (a deposit and its balance; two cards)
    order = unique("ord")
    simulator = (
        deposit_and_balance(order, 5000, ApiVersion.BASIL, T0, refund_updates=True)
        if provider == "stripe"
        else two_cards(order, 5000, T0)
    )
    history = _history(simulator)
    first, second = simulator.payments
    pay = "pay" if provider == "stripe" else "approve"

    # When both are paid and the second payment's webhooks arrive before the first's
    played(history, f"{first}: {pay}", f"{second}: {pay}")
    history.in_flight.reverse()
    history.settle()

    # Then both count, and the customer is e-mailed for each
    assert history.violations() == []
    assert simulator.books.paid == 5000
    assert sum(history.email.sent.values()) == 2


@pytest.mark.parametrize(
    ("lifecycle", "paid"),
    [
        (("checkout by card",), 5000),
        (("checkout by boleto", "boleto paid"), 5000),
        (("checkout by pix", "pix paid"), 5000),
        (("checkout by boleto", "boleto not paid"), 0),
        (("checkout expires",), 0),
    ],
)
@pytest.mark.parametrize("order_of_delivery", ["as sent", "reversed"])
def test_a_checkout_session_books_what_was_paid_through_it(
    lifecycle: tuple[str, ...], paid: int, order_of_delivery: str
) -> None:
    # Given an order paid through a Stripe Checkout Session (the order on the session only)
    simulator = StripeCheckout(unique("ord"), 5000, ApiVersion.BASIL, T0)
    history = _history(simulator)

    # When the customer pays by card, by boleto or Pix later, never pays, or lets it expire;
    # the PaymentIntent's events arriving after the session's or before them
    played(history, *lifecycle)
    if order_of_delivery == "reversed":
        history.in_flight.reverse()
    history.settle()

    # Then the order holds what was paid, nothing waits or is unmatched
    assert history.violations() == []
    assert simulator.books.paid == paid


@pytest.mark.parametrize(
    ("renewal", "paid"),
    [
        (("renewal paid",), 10000),
        (("renewal opened", "renewal paid"), 10000),
        (("renewal opened", "renewal voided"), 5000),
        (("renewal opened", "renewal uncollectible"), 5000),
        (("renewal opened", "renewal paid out of band"), 5000),
    ],
)
@pytest.mark.parametrize("version", [ApiVersion.DAHLIA, ApiVersion.BASIL, ApiVersion.LEGACY])
@pytest.mark.parametrize("via_checkout", [False, True])
def test_a_subscription_books_each_invoice_paid_through_stripe(
    renewal: tuple[str, ...], paid: int, version: ApiVersion, via_checkout: bool
) -> None:
    # Given an order billed by a Stripe subscription (the order on the subscription, copied to
    # each invoice; or on the Checkout Session that started it only), its first invoice paid;
    # invoices in basil's shapes (basil to dahlia) or older ones
    simulator = StripeSubscription(
        unique("ord"), 5000, T0, api_version=version, via_checkout=via_checkout
    )
    history = _history(simulator)
    played(history, "subscription starts", read_after=frozenset({"subscription starts"}))

    # When a renewal is paid, or stays open and is voided, uncollectible or paid out of band;
    # its webhooks arriving in reverse
    played(history, *renewal)
    history.in_flight.reverse()
    history.settle()

    # Then the order holds what was paid through Stripe, nothing waits or is unmatched
    assert history.violations() == []
    assert simulator.books.paid == paid


@pytest.mark.parametrize("attached", ["never", "after the payment", "before its refund"])
def test_a_payment_no_order_names_is_unmatched_until_an_operator_attaches_it(
    attached: str,
) -> None:
    # Given a Stripe payment whose PaymentIntent names no order, then partly refunded
    simulator = StripeSimulator(unique("ord"), 5000, ApiVersion.BASIL, T0, names_order=False)
    history = _history(simulator)
    history.unnamed = True
    played(history, "pay", read_after=frozenset({"pay"}))

    # When an operator attaches it to its order, before or after the refund, or nobody does
    if attached == "after the payment":
        history.attach()
    played(history, "refund 2500", read_after=frozenset({"refund 2500"}))
    if attached == "before its refund":
        history.attach()
    history.settle()

    # Then, attached, the order holds the payment and its refund; never attached, the order
    # holds nothing and the payment is unmatched
    assert history.violations() == []
    assert history.attached is (attached != "never")


def test_a_payment_read_at_half_its_amount_is_reported_by_the_statement_not_topped_up() -> None:
    # Given a Stripe payment of 5000, refunded 2000, every delivery of it read at half its
    # amount by a broken map, and a payment Stripe never made forged for another order
    simulator = StripeSimulator(unique("ord"), 5000, ApiVersion.BASIL, T0)
    history = _history(simulator)
    history.misreads = True
    history.forge()
    played(history, "pay", read_after=frozenset({"pay"}))
    names = [n for n, _ in simulator.moves(random.Random(0))]
    played(history, next(n for n in names if n.startswith("refund")))

    # When everything arrived and Stripe's statement is read
    history.settle()

    # Then the books hold what the broken map read, and the statement reported exactly the
    # halved payment (amount_differs) and the forgery (entry_unknown_to_provider)
    assert history.violations() == []
    assert history.pipeline.world.order(simulator.order_id).paid_total == 2500
    assert history.statement_found == []


@pytest.mark.parametrize("captures", [("pay",), ("authorize", "capture part, not final")])
def test_a_payment_booked_on_another_order_is_reported_missing_from_its_own(
    captures: tuple[str, ...],
) -> None:
    # Given a Stripe payment of 5000 (captured at once, or in two parts: a statement line
    # each), then refunded in part, every delivery of it read by a broken map as naming
    # another order than its own
    capture = Capture.AUTOMATIC if captures == ("pay",) else Capture.MULTICAPTURE
    simulator = StripeSimulator(unique("ord"), 5000, ApiVersion.BASIL, T0, capture=capture)
    history = _history(simulator)
    history.misbound = unique("ord")
    played(history, *captures)
    if capture is Capture.MULTICAPTURE:
        played(history, "capture the rest")
    names = [n for n, _ in simulator.moves(random.Random(0))]
    played(history, next(n for n in names if n.startswith("refund")))

    # When everything arrived and Stripe's statement is read
    history.settle()

    # Then the books are as the broken map made them (the money on the other order, none on
    # its own), and the statement reported exactly each of its lines missing from its order
    assert history.violations() == []
    world = history.pipeline.world
    assert world.order(history.misbound).paid_total == 5000
    assert world.find_order(simulator.order_id) is None


def _refunded_in_part(provider: str) -> tuple[Simulator, tuple[str, ...]]:
    """A payment of 5000 at `provider`, then a refund of part of it: the simulator and the
    moves' names."""
    order = unique("ord")
    if provider == "stripe":
        return StripeSimulator(order, 5000, ApiVersion.BASIL, T0), ("pay", "refund 2500")
    if provider == "mercadopago":
        return MercadoPagoSimulator(order, 5000, T0), ("approve", "refund 2500")
    return AsaasSimulator(order, 5000, T0), ("receive by card", "refund 2500")


@pytest.mark.parametrize("provider", ["stripe", "mercadopago", "asaas"])
@pytest.mark.parametrize("statement_read", [True, False])
def test_a_history_whose_webhooks_never_arrive_is_booked_by_the_statement_alone(
    provider: str, statement_read: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a payment refunded in part, none of whose webhooks ever arrives
    simulator, moves = _refunded_in_part(provider)
    history = _history(simulator)
    history.unheard = True
    for name in moves:
        names = [n for n, _ in simulator.moves(random.Random(2))]
        history.move(names.index(next(n for n in names if n.startswith(name.split()[0]))))
    if not statement_read:  # the design without the statement pass
        monkeypatch.setattr(History, "read_the_statement", lambda self: [])

    # When the history settles, the provider's statement read (or not)
    history.settle()

    # Then, read, the statement booked the payment and its refund once each, announced once,
    # with the provider's fee and net on the order; unread, the books miss them
    violations = history.violations()
    if statement_read:
        assert violations == []
        assert len(history.lost) == len(history.sent) > 0
        order = history.pipeline.world.order(simulator.order_id)
        assert (order.paid_total, order.refunded_total) == (5000, simulator.books.refunded)
    else:
        assert any("happened but never counted" in v for v in violations)
        if provider != "stripe":  # their fees come through the statement alone
            assert any(v.startswith("fee and net") for v in violations)


@pytest.mark.parametrize("lost", ["PAYMENT_RECEIVED", "REFUNDED"])
def test_an_asaas_webhook_lost_for_good_is_booked_from_the_financial_transactions(
    lost: str,
) -> None:
    # Given an Asaas charge received by card, then refunded, its receipt's or its refund's
    # webhook lost for good (never delivered, never resent)
    simulator = AsaasSimulator(unique("ord"), 5000, T0)
    history = _history(simulator)
    played(history, "receive by card")
    names = [n for n, _ in simulator.moves(random.Random(0))]
    played(history, next(n for n in names if n.startswith("refund")))
    [pick] = [n for n, w in enumerate(history.in_flight) if w.event_type.endswith(lost)]
    history.lose(pick)

    # When the rest arrives and Asaas's statement is read (its lines a month later)
    history.settle()

    # Then the books are the truth, the lost movement booked once by the statement, and the
    # order holds Asaas's fee (2.99% + R$ 0.49) and what it paid out less the refund
    assert history.violations() == []
    order = history.pipeline.world.order(simulator.order_id)
    assert (order.fee_total, order.net_total) == (199, 5000 - 199 - simulator.books.refunded)
    assert [t["type"] for t in simulator.statement()] == [
        "PAYMENT_REVERSAL",
        "PAYMENT_RECEIVED",
        "PAYMENT_FEE",
    ]


def test_a_mercado_pago_payment_carries_its_fee_and_net_to_the_order() -> None:
    # Given a Mercado Pago payment of 5000 approved (4.98% kept), then refunded
    simulator = MercadoPagoSimulator(unique("ord"), 5000, T0)
    history = _history(simulator)
    played(history, "approve", "refund 2500", read_after=frozenset({"approve", "refund 2500"}))

    # When the history settles and Mercado Pago's payments are searched
    history.settle()

    # Then the order holds what Mercado Pago kept and what it paid out less the refund
    assert history.violations() == []
    order = history.pipeline.world.order(simulator.order_id)
    assert simulator.books.refunded > 0
    assert (order.fee_total, order.net_total) == (249, 5000 - 249 - simulator.books.refunded)


def test_a_stripe_order_carries_its_fees_and_net_from_the_balance() -> None:
    # Given a Stripe payment of 5000 (3.99% + R$ 0.39 kept), refunded 2000, then disputed
    # and lost (Stripe keeps its R$ 15.00 dispute fee, and reinstates the refunded part)
    simulator = StripeSimulator(unique("ord"), 5000, ApiVersion.BASIL, T0)
    history = _history(simulator)
    played(history, "pay", read_after=frozenset({"pay"}))
    refund = simulator.refund(2000, pending=False)
    history.sent += refund
    history.in_flight += refund
    history.pipeline.apis.refunds.update(simulator.refunds_listed())
    played(history, "open chargeback", "lose dispute")

    # When the history settles and Stripe's balance is read
    history.settle()

    # Then the order holds what Stripe kept and paid out: the charge less its fee, the
    # refund, the dispute's withdrawal and fee, and what the verdict reinstated
    assert history.violations() == []
    assert simulator.books.dispute_won == 2000
    order = history.pipeline.world.order(simulator.order_id)
    assert (order.fee_total, order.net_total) == (
        239 + 1500,
        5000 - 239 - 2000 - 5000 - 1500 + 2000,
    )


@pytest.mark.parametrize("unheard", [False, True])
def test_an_order_of_the_orders_api_retried_refunded_and_charged_back_holds_the_true_books(
    unheard: bool,
) -> None:
    # Given a merchant on Mercado Pago's Orders API: a card refused then retried in the same
    # order, a refund of part, then a chargeback; its notifications on topic `order` delivered,
    # or none ever arriving (the payments search alone can book it then)
    simulator = MercadoPagoSimulator(unique("ord"), 5000, T0, orders_api=True, retried=True)
    history = _history(simulator)
    history.unheard = unheard
    for move in ("approve", "refund", "chargeback"):
        names = [n for n, _ in simulator.moves(history.rng)]
        history.move(names.index(next(n for n in names if n.startswith(move))))

    # When the history settles
    history.settle()

    # Then the ledger holds the merchant's true books: paid once, the refund, and what the
    # chargeback withdrew (what the refund left); every webhook named the order, not a payment
    assert history.violations() == []
    books = simulator.books
    assert (books.paid, books.disputed) == (5000, 5000 - books.refunded)
    assert 0 < books.refunded < 5000 or books.disputed == 0
    assert {json.loads(w.body)["type"] for w in history.sent} == {"order"}
    state = history.pipeline.world.order(simulator.order_id)
    assert (state.paid_total, state.refunded_total, state.disputed_total) == (
        books.paid,
        books.refunded,
        books.disputed,
    )


def _moved(history: History, *prefixes: str) -> None:
    """The simulator's moves, each the first whose name starts with its prefix."""
    for prefix in prefixes:
        names = [n for n, _ in history.simulator.moves(history.rng)]
        history.move(names.index(next(n for n in names if n.startswith(prefix))))


@pytest.mark.parametrize("destination", [Destination.THIN, Destination.BOTH])
@pytest.mark.parametrize("delivered_in", ["as sent", "reversed"])
def test_thin_events_read_late_book_the_true_books_once(
    destination: Destination, delivered_in: str
) -> None:
    # Given a card payment on a thin destination (or a thin and a snapshot one): paid, a
    # refund of part, an inquiry escalated into a dispute that is lost; its events delivered
    # as sent or newest first, every object read as the lifecycle left it
    simulator = StripeSimulator(unique("ord"), 5000, ApiVersion.DAHLIA, T0)
    history = _history(simulator)
    history.destination = destination
    _moved(history, "pay", "refund", "open inquiry", "escalate inquiry", "lose dispute")
    if delivered_in == "reversed":
        history.in_flight.reverse()
    thin = [w for w in history.in_flight if w.event_type.startswith("v1.")]

    # When the history settles (every delivery, every retry, the statement)
    history.settle()

    # Then the ledger holds the merchant's true books, each movement counted once, and every
    # object was read from Stripe's API on the version umavez knows newest
    assert history.violations() == []
    assert len(thin) == len(history.sent)
    assert set(history.pipeline.apis.stripe_versions) == {NEWEST_KNOWN_API_VERSION}
    books, state = simulator.books, history.pipeline.world.order(simulator.order_id)
    held = (state.paid_total, state.refunded_total, state.dispute_lost_total)
    assert held == (books.paid, books.refunded, books.dispute_lost)
    assert books.dispute_lost > 0
