"""The scenarios `umavez cost` measures on the embedded stack (see `costmodel/model.py`).

One embedded stack, its server accounting every request and every handler metered; no faults.
The sweeper's and the reconciliation's schedules are off (the sweeper has nothing to do
without faults; the reconciliation runs once at the end of each scenario, reading that
scenario's orders as the hourly run would); the waiting schedule stays on (the drill parks
deliveries), its runs priced per month like the others.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, TextIO

from costmodel.measurement import KINDS, CostOptions, Measurement, Sample, payer, webhook_queue

RECONCILE_SETTLE_SECONDS = 5.5  # the reconciliation reads changes up to now - 5 s
AMOUNT = 5000


def measure(options: CostOptions, err: TextIO = sys.stderr) -> Measurement:
    from devstack.metering import Metering
    from devstack.stack import EmbeddedStack, Faults

    started = time.monotonic()
    metering = Metering()
    with (
        warnings.catch_warnings(),
        metering,
        EmbeddedStack(faults=Faults(seed=options.seed), metering=metering) as stack,
    ):
        # Metrics on (below): an invocation that adds none warns every time.
        warnings.filterwarnings("ignore", message="No application metrics to publish")
        # Metrics on: their EMF lines are CloudWatch Logs bytes too (the stack restores it).
        os.environ["POWERTOOLS_METRICS_DISABLED"] = "false"
        # The sweeper has nothing to do without faults and the reconciliation runs once per
        # scenario, where it reads that scenario's orders; waiting stays on (the drill parks).
        stack.sweeper.stop()
        stack.reconciliation.stop()
        run = _Scenarios(stack, metering, err)
        run.warm_up()
        idle = run.idle_runs()
        kinds = run.kinds(options.per_kind)
        mix = run.mix(options.orders) if options.orders else None
        final = run.snapshot()
    excluded = sum(
        int(units["requests"])
        for key, units in final.aws.items()
        if payer(key, webhook_queue()) is None
    )
    return Measurement(
        {"orders": options.orders, "per_kind": options.per_kind, "seed": options.seed},
        kinds,
        idle,
        mix,
        datetime.now(tz=UTC).date().isoformat(),
        time.monotonic() - started,
        excluded,
    )


class _Scenarios:
    def __init__(self, stack: Any, metering: Any, err: TextIO) -> None:
        from devstack.resources import DEVELOPMENT_SECRETS
        from firedrill.delivery import DeliveryLog, Providers

        self._stack = stack
        self._metering = metering
        self._err = err
        self._log = DeliveryLog()
        self._providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, self._log)
        self._now = int(time.time())

    def snapshot(self) -> Sample:
        return Sample.of(
            self._stack.aws.stats()["accounting"],
            self._metering.snapshot(),
            provider_api_calls=len(self._stack.provider_apis.requests),
        )

    def _deliver(self, posts: Sequence[Any]) -> None:
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self._providers.deliver, posts))

    def _settle_and_reconcile(self) -> None:
        """The hourly reconciliation reads every order changed since its last run: once."""
        self._stack.drain()
        time.sleep(RECONCILE_SETTLE_SECONDS)
        self._stack.reconciliation.run_now()

    def _phase(self, name: str, posts: Sequence[Any]) -> Sample:
        self._err.write(f"  {name}: {len(posts)} deliveries\n")
        before = self.snapshot()
        self._deliver(posts)
        self._settle_and_reconcile()
        sample = self.snapshot().minus(before)
        sample.events = len(posts)
        return sample

    def _payments(self, n: int) -> list[tuple[str, str, str]]:
        from fixtures.shapes import unique

        return [(unique("ord"), unique("pi"), unique("ch")) for _ in range(n)]

    def warm_up(self) -> None:
        """A warm container: imports done, clients created (cold starts are not per event)."""
        from firedrill.story import Post
        from fixtures import stripe

        self._err.write("  warming up the functions\n")
        payments = self._payments(2)
        paid = [
            Post("stripe", stripe.payment_intent_succeeded(o, pi, AMOUNT, self._now - 900, ch))
            for o, pi, ch in payments
        ]
        self._deliver(paid)
        self._stack.drain()
        self._deliver([Post("stripe", p.body) for p in paid])
        refunds = [
            Post(
                "stripe",
                stripe.refund_created(pi, stripe.unique("re"), AMOUNT, self._now - 800, ch),
            )
            for _, pi, ch in payments
        ]
        self._deliver(refunds)
        self._settle_and_reconcile()
        self._stack.sweeper.run_now()
        self._stack.waiting.run_now()

    def idle_runs(self) -> dict[str, Sample]:
        """One run of each scheduled function with nothing to do: its fixed cost."""
        idle = {}  # the warm-up ended with a reconciliation run: nothing changed since
        for function, poller in (
            ("sweeper", self._stack.sweeper),
            ("waiting", self._stack.waiting),
            ("reconciliation", self._stack.reconciliation),
        ):
            before = self.snapshot()
            poller.run_now()
            ran = self.snapshot().minus(before).only(function)
            # The waiting schedule keeps running meanwhile: per run.
            idle[function] = ran.scaled(1 / max(ran.invocations(function), 1))
            idle[function].events = 1
        return idle

    def kinds(self, n: int) -> dict[str, Sample]:
        from firedrill.story import Post
        from fixtures import stripe

        at = self._now - 600
        payments = self._payments(n)
        new = [
            Post("stripe", stripe.payment_intent_succeeded(o, pi, AMOUNT, at, ch))
            for o, pi, ch in payments
        ]
        samples = {"new payment": self._phase("new payments", new)}
        samples["duplicate"] = self._phase("duplicates", [Post(p.provider, p.body) for p in new])
        refunds = [
            Post("stripe", stripe.refund_created(pi, stripe.unique("re"), AMOUNT, at + 60, ch))
            for _, pi, ch in payments
        ]
        samples["refund"] = self._phase("refunds", refunds)
        older = self._payments(n)
        newer_refunds = [
            Post(
                "stripe",
                stripe.refund_created(pi, stripe.unique("re"), AMOUNT, at + 60, ch, order),
            )
            for order, pi, ch in older
        ]
        self._phase("refunds naming their order (before the stale payments)", newer_refunds)
        stale = [
            Post("stripe", stripe.payment_intent_succeeded(o, pi, AMOUNT, at, ch))
            for o, pi, ch in older
        ]
        samples["stale"] = self._phase("stale payments", stale)
        return {kind: samples[kind] for kind in KINDS}

    def mix(self, orders: int) -> Sample:
        from firedrill.delivery import DeliveryLog, run_stories
        from firedrill.progress import ProgressBar
        from firedrill.run import providers_for
        from firedrill.stories import stories

        stack = self._stack
        drill = stories(orders, int(time.time()))
        log = DeliveryLog()
        providers = providers_for(stack, drill, log)
        self._err.write(f"  the drill's mix: {orders} orders\n")
        before = self.snapshot()
        run_stories(drill, providers, ProgressBar(self._err))
        stack.drain()
        self._attach_unmatched(drill)
        self._settle_and_reconcile()
        sample = self.snapshot().minus(before)
        sample.events = log.attempts
        return sample

    def _attach_unmatched(self, drill: Sequence[Any]) -> None:
        """As an operator would (`umavez attach`): the re-driven delivery is traffic too."""
        room = self._stack.waiting_room()
        for story in drill:
            if story.unmatched_object:
                room.attach("stripe", story.unmatched_object, story.order_id)
