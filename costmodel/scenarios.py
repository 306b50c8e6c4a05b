"""The scenarios `umavez cost` measures on one embedded stack (every request accounted, every
handler metered, no faults): the sweeper's schedule off (it runs when only items due again are
left), the reconciliation once after each scenario (as the hourly run reads its orders), the
waiting schedule on. Imported only to measure."""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TextIO

from costmodel.measurement import KINDS, CostOptions, Measurement, Sample, payer, webhook_queue
from devstack.metering import Metering
from devstack.resources import DEVELOPMENT_SECRETS
from devstack.stack import EmbeddedStack, Faults
from firedrill.delivery import DeliveryLog, Providers, run_stories
from firedrill.progress import ProgressBar
from firedrill.run import providers_for
from firedrill.stories import stories
from firedrill.story import Post
from fixtures import stripe

AMOUNT = 5000
Payment = tuple[str, str, str]  # order, payment intent, charge


class NotQuietError(RuntimeError):
    """A scenario's work was still in flight when the drain gave up: its bill would be part."""


def measure(options: CostOptions, err: TextIO = sys.stderr) -> Measurement:
    started, metering = time.monotonic(), Metering()
    faults = Faults(seed=options.seed)
    with (
        warnings.catch_warnings(),
        metering,
        # The in-memory store reads its own writes: no settle margin to wait out before a
        # reconciliation, whose requests are the same without it. (A candidate's re-read
        # would wait 5 s less than deployed: a run without faults finds none.)
        EmbeddedStack(faults=faults, metering=metering, reconcile_settle_seconds=0) as stack,
    ):
        # Metrics on: their EMF lines are CloudWatch Logs bytes too (the stack restores it).
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"
        stack.sweeper.stop()
        stack.reconciliation.stop()
        run = _Scenarios(stack, metering, err)
        run.warm_up()
        idle, kinds = run.idle_runs(), run.kinds(options.per_kind)
        mix = run.mix(options.orders) if options.orders else None
        final = run.snapshot()
    queue = webhook_queue()
    excluded = sum(int(u["requests"]) for k, u in final.aws.items() if payer(k, queue) is None)
    chosen = {"orders": options.orders, "per_kind": options.per_kind, "seed": options.seed}
    today, elapsed = datetime.now(tz=UTC).date().isoformat(), time.monotonic() - started
    return Measurement(chosen, kinds, idle, mix, today, elapsed, excluded)


class _Scenarios:
    def __init__(self, stack: EmbeddedStack, metering: Metering, err: TextIO) -> None:
        self._stack, self._metering, self._err = stack, metering, err
        self._providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, DeliveryLog())
        self._now = int(time.time())

    def snapshot(self) -> Sample:
        accounting, meters = self._stack.aws.stats()["accounting"], self._metering.snapshot()
        return Sample.of(accounting, meters, len(self._stack.provider_apis.requests))

    def _deliver(self, posts: Sequence[Post]) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self._providers.deliver, posts))

    def _drain(self) -> None:
        """Quiet, what was re-opened for the sweeper sent (its schedule is off). A scenario
        whose work is still in flight would be billed for part of it: the run stops."""
        drained = self._stack.drain(sweep=self._stack.sweeper.run_now)
        if not drained:
            raise NotQuietError(f"the stack did not go quiet, still in flight: {drained.left}")

    def _settle_and_reconcile(self) -> None:
        """The hourly reconciliation reads every order changed since its last run: once."""
        self._drain()
        self._stack.reconciliation.run_now()

    def _phase(self, name: str, posts: Sequence[Post]) -> Sample:
        self._err.write(f"  {name}: {len(posts)} deliveries\n")
        before = self.snapshot()
        self._deliver(posts)
        self._settle_and_reconcile()
        return self._since(before, len(posts))

    def _since(self, before: Sample, events: int) -> Sample:
        sample = self.snapshot().minus(before)
        sample.events = events
        return sample

    def warm_up(self) -> None:
        """A warm container: imports done, clients created (cold starts are not per event)."""
        self._err.write("  warming up the functions\n")
        payments = _payments(2)
        self._deliver(paid := _paid(payments, self._now - 900))
        self._drain()
        self._deliver(_again(paid))
        self._deliver(_refunds(payments, self._now - 800))
        self._settle_and_reconcile()
        self._stack.sweeper.run_now()
        self._stack.waiting.run_now()

    def idle_runs(self) -> dict[str, Sample]:
        """One run of each scheduled function with nothing to do: its fixed cost, per run."""
        idle = {}
        for function in ("sweeper", "waiting", "reconciliation"):
            before = self.snapshot()
            getattr(self._stack, function).run_now()
            ran = self._since(before, 1).only(function)
            idle[function] = ran.scaled(1 / max(ran.invocations(function), 1))
        return idle

    def kinds(self, n: int) -> dict[str, Sample]:
        at, payments, older = self._now - 600, _payments(n), _payments(n)
        new = _paid(payments, at)
        samples = {"new payment": self._phase("new payments", new)}
        samples["duplicate"] = self._phase("duplicates", _again(new))
        samples["refund"] = self._phase("refunds", _refunds(payments, at + 60))
        first = _refunds(older, at + 60, naming_order=True)
        self._phase("refunds naming their order (before the stale payments)", first)
        samples["stale"] = self._phase("stale payments", _paid(older, at))
        return {kind: samples[kind] for kind in KINDS}

    def mix(self, orders: int) -> Sample:
        drill, log = stories(orders, int(time.time())), DeliveryLog()
        self._err.write(f"  the drill's mix: {orders} orders\n")
        before = self.snapshot()
        run_stories(drill, providers_for(self._stack, drill, log), ProgressBar(self._err))
        self._drain()
        # As an operator would (`umavez attach`): the re-driven delivery is traffic too.
        room = self._stack.waiting_room()
        for story in drill:
            if story.unmatched_object:
                room.attach("stripe", story.unmatched_object, story.order_id)
        self._settle_and_reconcile()
        return self._since(before, log.attempts)


def _payments(n: int) -> list[Payment]:
    return [(stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")) for _ in range(n)]


def _again(posts: Sequence[Post]) -> list[Post]:
    """The same events delivered again."""
    return [Post(p.provider, p.body) for p in posts]


def _paid(payments: Sequence[Payment], at: int) -> list[Post]:
    return [
        Post("stripe", stripe.payment_intent_succeeded(order, intent, AMOUNT, at, charge))
        for order, intent, charge in payments
    ]


def _refunds(payments: Sequence[Payment], at: int, *, naming_order: bool = False) -> list[Post]:
    def refund(order: str, intent: str, charge: str) -> Post:
        named = order if naming_order else None
        return Post(
            "stripe", stripe.refund_created(intent, stripe.unique("re"), AMOUNT, at, charge, named)
        )

    return [refund(*payment) for payment in payments]
