"""The books against simulated providers: lifecycles and delivery orders explored, not listed.

Hypothesis draws what the provider does (each move one it allows in that state) and how its
webhooks arrive (any order, several copies at once, a resend long after, drains in between);
after everything arrived and the pipeline drained, the order's totals, status, counted entries
and announcements must be the simulator's truth. A failure prints the shortest history that
reproduces it, as steps of this machine, ready to paste into a regression test.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from devstack.speedups import moto_patches
from fixtures.shapes import unique
from fixtures.simulators.asaas import AsaasSimulator
from fixtures.simulators.mercadopago import MercadoPagoSimulator
from fixtures.simulators.stripe import ApiVersion, StripeSimulator
from tests.support.clock import FakeClock
from tests.support.histories import History, Simulator, emptied
from tests.support.pipeline import Pipeline, pipeline_on_moto

# A few hundred in `make test`; `make histories` runs 10,000 (scripts/histories.py).
HISTORIES = int(os.environ.get("UMAVEZ_HISTORIES", "200"))
# Which providers' lifecycles are drawn (all three unless narrowed, e.g. "mercadopago,asaas").
PROVIDERS = os.environ.get("UMAVEZ_HISTORIES_PROVIDERS", "stripe,mercadopago,asaas").split(",")
T0 = 1_764_460_800


# One pipeline for the module's histories, emptied before each (setting one up per history
# cost more than most histories do).
_STAGE: dict[str, Pipeline] = {}


# Histories checked in this process; `make histories` sums its workers' (scripts/histories.py).
_CHECKED: list[int] = [0]
REPORT = os.environ.get("UMAVEZ_HISTORIES_REPORT")
# Set by `make histories` (scripts/histories.py) for its dedicated workers.
FAST_MOTO = os.environ.get("UMAVEZ_HISTORIES_FAST_MOTO") == "1"


@pytest.fixture(scope="module", autouse=True)
def _pipeline() -> Iterator[None]:
    # `make histories` runs this module alone in processes of its own, on moto with the
    # embedded stack's speed-ups (each tested against moto's own answers in
    # tests/devstack/test_local_server.py): half the time a history costs. In `make test` it
    # shares its process with other tests, on moto as it is.
    fast = FAST_MOTO
    if fast:
        moto_patches.install()
    try:
        with pytest.MonkeyPatch.context() as patch, pipeline_on_moto(patch) as pipeline:
            _STAGE["pipeline"] = pipeline
            yield
            _STAGE.clear()
    finally:
        if fast:
            moto_patches.uninstall()
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
        installments=st.sampled_from([1, 2, 3]),
    )
    def open_account(
        self,
        provider: str,
        version: ApiVersion,
        amount: int,
        refund_updates: bool,
        installments: int,
    ) -> None:
        order = unique("ord")
        simulator: Simulator
        if provider == "stripe":
            simulator = StripeSimulator(order, amount, version, T0, refund_updates=refund_updates)
        elif provider == "mercadopago":
            simulator = MercadoPagoSimulator(order, amount, T0)
        else:
            # One payment, or an installment plan: each installment a payment of the order
            simulator = AsaasSimulator(order, amount, T0, installments=installments)
        # The senders' clock starts where the process Lambda's (the real one) stamps items.
        clock = FakeClock(int(time.time()))
        self.history = History(self.pipeline, simulator, clock, random.Random(amount))

    @rule(choice=st.integers(0, 20))
    def provider_moves(self, choice: int) -> None:
        self._history().move(choice)

    @precondition(lambda self: bool(self.history and self.history.in_flight))
    @rule(pick=st.integers(0, 20), copies=st.sampled_from([1, 1, 1, 2, 3]))
    def webhook_arrives(self, pick: int, copies: int) -> None:
        self._history().deliver(pick, copies)

    @precondition(lambda self: bool(self.history and self.history.delivered))
    @rule(pick=st.integers(0, 20))
    def resent_weeks_later(self, pick: int) -> None:
        self._history().resend(pick)

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
