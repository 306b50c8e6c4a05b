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
        self._err.write("  warming up the functions\n")
        payments = self._payments(2)
        paid = _paid(payments, self._now - 900)
        self._deliver(paid)
        self._stack.drain()
        self._deliver(_again(paid))
        self._deliver(_refunds(payments, self._now - 800))
        self._settle_and_reconcile()
        self._stack.sweeper.run_now()
        self._stack.waiting.run_now()

    def idle_runs(self) -> dict[str, Sample]:
        """One run of each scheduled function with nothing to do (the warm-up ended with a
        reconciliation run): its fixed cost, per run (the waiting schedule keeps running)."""
        idle = {}
        for function in ("sweeper", "waiting", "reconciliation"):
            before = self.snapshot()
            getattr(self._stack, function).run_now()
            ran = self.snapshot().minus(before).only(function)
            idle[function] = ran.scaled(1 / max(ran.invocations(function), 1))
            idle[function].events = 1
        return idle

    def kinds(self, n: int) -> dict[str, Sample]:
        at = self._now - 600
        payments = self._payments(n)
        new = _paid(payments, at)
        samples = {"new payment": self._phase("new payments", new)}
        samples["duplicate"] = self._phase("duplicates", _again(new))
        samples["refund"] = self._phase("refunds", _refunds(payments, at + 60))
        older = self._payments(n)
        refunds_first = _refunds(older, at + 60, naming_order=True)
        self._phase("refunds naming their order (before the stale payments)", refunds_first)
        samples["stale"] = self._phase("stale payments", _paid(older, at))
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


def _again(posts: Sequence[Any]) -> list[Any]:
    """The same events delivered again."""
    from firedrill.story import Post

    return [Post(p.provider, p.body) for p in posts]


def _paid(payments: Sequence[tuple[str, str, str]], at: int) -> list[Any]:
    from firedrill.story import Post
    from fixtures import stripe

    return [
        Post("stripe", stripe.payment_intent_succeeded(order, intent, AMOUNT, at, charge))
        for order, intent, charge in payments
    ]


def _refunds(
    payments: Sequence[tuple[str, str, str]], at: int, *, naming_order: bool = False
) -> list[Any]:
    from firedrill.story import Post
    from fixtures import stripe

    return [
        Post(
            "stripe",
            stripe.refund_created(
                intent, stripe.unique("re"), AMOUNT, at, charge, order if naming_order else None
            ),
        )
        for order, intent, charge in payments
    ]
