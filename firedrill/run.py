"""A whole drill (`umavez firedrill`): against the embedded stack (default) or a deployed one."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import boto3

from devstack.calls import AwsCall
from devstack.drain import Drained
from devstack.resources import DEVELOPMENT_SECRETS, client, put_stripe_event
from devstack.stack import EmbeddedStack, Faults
from firedrill.checks import (
    Check,
    EmbeddedReads,
    books_checks,
    check_state,
    embedded_checks,
)
from firedrill.delivery import DeliveryLog, Providers, run_stories
from firedrill.observed import status_check, trace_check
from firedrill.operator_runs import (
    attach_unmatched,
    read_tables,
    replays_check,
    resends_and_replays,
)
from firedrill.progress import ProgressBar
from firedrill.report import deliveries_line, embedded_facts, render, server_facts
from firedrill.statement import (
    hourly_passes,
    read_other_statements,
    read_the_statement,
    statement_check,
    stripe_books,
)
from firedrill.stories import stories, stories_for_deliveries
from firedrill.story import Story
from functions.process.service import EffectProcessor
from functions.shared.tables import TableNames
from infra.config import DEFAULT_API_TYPE, ApiType
from ops.state import LedgerState, order_view

DEFAULT_ORDERS = 300
DEFAULT_DELIVERIES = 1000  # `make run`
DEFAULT_SOAK_RATE = 5.0  # deliveries a second
# Mercado Pago's and Asaas's stories would need their live payments APIs to know them
DEPLOYED_PROVIDERS = {"stripe"}
RECORDED_CALLS_PATH = Path(".local/aws-calls.json")


@dataclass
class DrillOptions:
    orders: int = DEFAULT_ORDERS
    faults: bool = True
    seed: int = 42
    process_variant: type[EffectProcessor] | None = None
    # The event shape the embedded front hands ingest (the deployed stack's `apiType`).
    api_type: ApiType = DEFAULT_API_TYPE
    # Sized by deliveries instead of orders: as many stories as make at least this many.
    deliveries: int | None = None
    # A soak: deliver for this many minutes at `rate` deliveries a second, then check.
    soak_minutes: float | None = None
    rate: float = DEFAULT_SOAK_RATE
    # A burst: every delivery queued while process is down (a provider's backlog after an
    # outage), then drained; `predict_drain(deliveries, pollers)` is the capacity model's
    # drain time on this stack (the operator's tool passes it: the model is above the drill).
    burst: bool = False
    predict_drain: Callable[[int, int], float] | None = None
    # Where the embedded stack's recorded calls go: every permission each function's calls
    # needed (devstack/calls.py), what tests/infra/test_permissions.py holds the roles to.
    calls_path: Path = RECORDED_CALLS_PATH

    def stories(self, now: int) -> list[Story]:
        if self.soak_minutes is not None:
            return stories_for_deliveries(int(self.rate * self.soak_minutes * 60), now, self.seed)
        if self.deliveries is not None:
            return stories_for_deliveries(self.deliveries, now, self.seed)
        return stories(self.orders, now, self.seed)

    def stories_per_second(self, drill: Sequence[Story]) -> float | None:
        """A soak spreads its stories evenly over its minutes; otherwise all are ready at once."""
        if self.soak_minutes is None:
            return None
        return len(drill) / (self.soak_minutes * 60)


class Stopwatch:
    """Seconds per step of a run, in the order the steps first ran."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._started = time.monotonic()

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started


def run_embedded(options: DrillOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    watch = Stopwatch()
    faults = Faults.drill() if options.faults else Faults()
    faults.seed = options.seed
    with EmbeddedStack(
        faults=faults,
        process_variant=options.process_variant,
        api_type=options.api_type,
        split_aws=True,
    ) as stack:
        drill = options.stories(int(time.time()))
        log = DeliveryLog()
        providers = providers_for(stack, drill, log)
        _say_stack_up(err, stack, options.api_type)
        drains: list[Drained] = []

        def drain() -> None:
            with watch.step("draining"):
                drains.append(stack.drain(let_waits_pass=True))
            _progress_line(err, drains[-1])

        with watch.step("delivering"):
            backlog = _deliver(stack, drill, providers, options, err)
        drain()
        burst = burst_check(options, drill, log, backlog, drains[0], len(stack.process_pollers))
        dynamodb = client("dynamodb", stack.aws.endpoint_url)
        names = stack.resources.tables
        with watch.step("attaching, resending, replaying"):
            unmatched = attach_unmatched(stack, drill)
        drain()

        with watch.step("attaching, resending, replaying"):
            before_resend = read_tables(dynamodb, names).business_state()
            resent, replays = resends_and_replays(stack, drill, providers, log, options.seed)
        drain()
        after_resend = read_tables(dynamodb, names).business_state()
        # A charge naming another order than its payment's: the statement reports it there.
        conflicts = [story.conflicting_order for story in drill if story.conflicting_order]
        with watch.step("reading the statement"):
            statement = read_the_statement(stack, drill, int(time.time()))
            others = read_other_statements(stack, drill)
        drain()
        with watch.step("reading the statement"):
            hourly = hourly_passes(stack, conflicts)
        with watch.step("checking"), EmbeddedReads(stack) as reads:
            after = read_tables(dynamodb, names)
            state = LedgerState.of(after.ledger, after.outbox)
            checks = check_state(drill, state, log)
            checks += embedded_checks(stack, state, log, drains, reads)
            checks += [
                status_check(stack, state, hourly.last_windows),
                trace_check(stack, state, log, drill),
            ]
            checks += [burst] if burst else []
            checks.append(unmatched)
            checks.append(statement_check(statement, _fees(drill, state), conflicts))
            checks += [statement_check(run, {}) for run in others]
            checks.append(hourly.check)
            checks.append(replays_check(resent, replays, before_resend, after_resend))
        facts = _DrillFacts(options, drill, log, drains, watch).of(stack, state)
    facts["elapsed"] = f"{watch.elapsed:.1f} s"
    render(checks, facts, out)
    return 0 if all(c.ok for c in checks) else 1


def _deliver(
    stack: EmbeddedStack,
    drill: Sequence[Story],
    providers: Providers,
    options: DrillOptions,
    err: TextIO,
) -> int:
    """Every story delivered; for a burst, with processing paused until all are queued: the
    backlog then left (0 otherwise). Processing runs again on return."""
    if options.burst:
        stack.pause_processing()
    run_stories(
        drill, providers, ProgressBar(err), stories_per_second=options.stories_per_second(drill)
    )
    backlog = stack.queued_messages()[0] if options.burst else 0
    stack.resume_processing()
    return backlog


def _say_stack_up(err: TextIO, stack: EmbeddedStack, api_type: ApiType) -> None:
    err.write(
        f"  embedded stack up: {stack.front.url} as a {api_type.value} API"
        f" (AWS on {stack.aws.endpoint_url}"
        + "".join(f", {name} on {url}" for name, url in stack.aws.service_endpoints.items())
        + ")\n"
    )


@dataclass
class _DrillFacts:
    """What the report states besides the checks: the drill's, the server's, the calls'."""

    options: DrillOptions
    drill: Sequence[Story]
    log: DeliveryLog
    drains: list[Drained]
    watch: Stopwatch

    def of(self, stack: EmbeddedStack, state: LedgerState) -> dict[str, str]:
        """Read while the stack is up; the calls are written where the permissions test reads
        them."""
        facts = embedded_facts(
            self.options.faults, self.drill, self.log, stack, state, self.drains, self.watch.seconds
        )
        server = stack.aws.stats()
        calls = stack.recorded_calls()
        write_calls(calls, stack.resources.deployed_as(), self.options.calls_path)
        facts["aws calls"] = (
            f"{len(calls)} distinct (function, action, resource) in {self.options.calls_path}"
        )
        return facts | server_facts(server)


# How far the burst's drain may be from the capacity model's prediction, either way: the
# model's per-delivery time is the drill mix's, measured at another load on another run.
BURST_PREDICTION_FACTOR = 3.0


def burst_check(
    options: DrillOptions,
    drill: Sequence[Story],
    log: DeliveryLog,
    backlog: int,
    drained: Drained,
    pollers: int,
) -> Check | None:
    """The burst's drain against the model: drained at all (nothing dead-lettered or given up
    is judged by the other checks), and within BURST_PREDICTION_FACTOR of the prediction when
    there is one."""
    if not options.burst:
        return None
    queued = backlog or len(log.accepted_event_ids)
    predicted = options.predict_drain(queued, pollers) if options.predict_drain else None
    ratio = drained.seconds / predicted if predicted else None
    within = ratio is not None and 1 / BURST_PREDICTION_FACTOR <= ratio <= BURST_PREDICTION_FACTOR
    told = (
        f"{backlog} queued at once by {len(drill)} stories; drained in {drained.seconds:.0f} s"
        + (
            f", the capacity model predicts {predicted:.0f} s for {pollers} pollers "
            f"({ratio:.2f}x, within {BURST_PREDICTION_FACTOR:.0f}x)"
            if predicted
            else ", no prediction (the capacity model was not given)"
        )
    )
    return Check(
        "a burst drains, as fast as the capacity model says",
        bool(drained) and (predicted is None or within),
        told,
    )


@dataclass(frozen=True)
class RecordedCalls:
    """What a drill's functions called (`devstack/calls.py`), and which resource of the
    deployed stack each local resource they named plays (`LocalResources.deployed_as`)."""

    calls: list[AwsCall]
    deployed_as: dict[str, str]

    @classmethod
    def read(cls, path: Path) -> RecordedCalls:
        recorded = json.loads(path.read_text())
        return cls([AwsCall(**c) for c in recorded["calls"]], recorded["deployed_as"])


def write_calls(calls: Sequence[AwsCall], deployed_as: dict[str, str], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"calls": [call.as_json() for call in calls], "deployed_as": deployed_as}
    path.write_text(json.dumps(document, indent=1) + "\n")


def _progress_line(err: TextIO, drained: Drained) -> None:
    """The console says what each drain waited for: a line, never redrawn."""
    outcome = "quiet" if drained else f"gave up with {drained.left}"
    err.write(
        f"  drained: {outcome} after {drained.seconds:.0f} s "
        f"(allowed {drained.bound_seconds:.0f} s for a peak of {drained.peak} in flight)\n"
    )
    err.flush()


def providers_for(stack: EmbeddedStack, drill: Sequence[Story], log: DeliveryLog) -> Providers:
    """The simulated providers for `drill`: what their APIs answer is registered with the
    stack's fakes, and the front answers late where a story plays the incident."""
    for story in drill:
        stack.provider_apis.refunds.update(story.stripe_refunds)
        stack.provider_apis.stripe_objects.update(story.stripe_objects)
        if story.statement_only:
            continue  # staged from outside once the webhooks are done (firedrill/statement.py)
        if story.mercadopago_payment:
            stack.provider_apis.payments[str(story.mercadopago_payment["id"])] = (
                story.mercadopago_payment
            )
        if story.mercadopago_order:
            stack.provider_apis.orders[story.mercadopago_order["id"]] = story.mercadopago_order
        stack.provider_apis.asaas_payments.update(story.asaas_answers)

    def stripe_bus(event: str) -> str:
        return put_stripe_event(stack.aws.endpoint_url, event)

    providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, log, stripe_bus)
    stack.front.slow_seconds = providers.ingest_delay
    return providers


@dataclass
class DeployedTarget:
    url: str
    secrets: dict[str, str]
    tables: TableNames
    region: str | None = None
    timeout_seconds: float = 600


def run_deployed(
    options: DrillOptions,
    target: DeployedTarget,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """The drill against a deployed stack: Stripe stories, no injected faults.

    Processing there is asynchronous and a refund that precedes its payment waits a visibility
    timeout, so the checks are repeated until they pass or `timeout_seconds` runs out. Only the
    drill's own orders are read; sinks and queues are the deployment's to watch.
    """
    started = time.monotonic()
    providers_given = DEPLOYED_PROVIDERS & set(target.secrets)
    drill = [
        s
        for s in stories(options.orders, int(time.time()))
        if {p.provider for p in s.posts} <= providers_given
        # Stories that need the embedded fakes of the providers' APIs, or its waiting seconds.
        and not s.stripe_refunds
        and not s.stripe_objects
        and not s.unmatched_object
    ]
    log = DeliveryLog()
    err.write(f"  delivering {len(drill)} stories to {target.url}\n")
    run_stories(drill, Providers(target.url, target.secrets, log), ProgressBar(err))
    dynamodb = boto3.client("dynamodb", region_name=target.region)
    deadline = time.monotonic() + target.timeout_seconds
    while True:
        views = {s.order_id: order_view(dynamodb, target.tables, s.order_id) for s in drill}
        state = LedgerState(views, [], [i for v in views.values() for i in v.outbox])
        checks = check_state(drill, state, log) + books_checks(views)
        if all(c.ok for c in checks) or time.monotonic() > deadline:
            break
        time.sleep(10)
    facts = {
        "target": target.url,
        "orders (stories)": f"{len(drill)} ({', '.join(sorted(providers_given))})",
        "deliveries (HTTP attempts)": deliveries_line(log),
        "elapsed": f"{time.monotonic() - started:.1f} s",
    }
    render(checks, facts, out)
    return 0 if all(c.ok for c in checks) else 1


def _fees(drill: Sequence[Story], state: LedgerState) -> dict[str, tuple[int, int]]:
    """Per Stripe order: the fee_total it holds, and what its lines of the balance kept."""
    return {
        f"{story.order_id} ({story.kind})": (
            state.orders[story.order_id].books.fee_total or 0,
            sum(int(line["fee"]) for line in stripe_books(story)),
        )
        for story in drill
        if story.order_id in state.orders and any(p.provider == "stripe" for p in story.posts)
    }
