"""The embedded stack: the local AWS server (devstack/server.py), resources, the real handlers
behind Lambda-like pollers, an API front on loopback, fake provider APIs, and switchable faults.

The wiring of every function to its event source, schedule and fault injection mirrors the
deployed one (infra/constructs/pipeline.py and triggers.py; the event source mappings are one
definition both read, infra/mappings.py), and is read beside it; the handlers' own wiring
(logs, metrics, the stack's clock and faults) is devstack/handlers.py, the wait for quiet
devstack/drain.py.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devstack.calls import AwsCall
from devstack.drain import Drain, PipelineCounts, WaitingClock
from devstack.faults import Chance, FaultyChannel, every
from devstack.front import ApiFront
from devstack.handlers import HandlerWiring, load_handlers, open_stack_log
from devstack.lambdas import LambdaContext
from devstack.local_aws import LocalAws
from devstack.metering import Metering, acting_as, tag_calls
from devstack.metrics import MetricFiles
from devstack.metrics_report import METRICS_DIR
from devstack.pollers import Every, Poller
from devstack.process_changes import ProcessChanges
from devstack.provider_apis import FakeProviderApis
from devstack.queue_poller import SqsToLambda, event_id_of
from devstack.reconciliation import LocalReconciliation
from devstack.resources import (
    LOCAL_VISIBILITY_TIMEOUT_SECONDS,
    LOCAL_WAIT_LIMIT_SECONDS,
    LocalResources,
    client,
    provision,
)
from devstack.sink import HttpSink, SinkRecorder, create_sink_table
from devstack.stream_poller import StreamToLambda
from functions.outbox.budget import HTTP_TIMEOUT_SECONDS
from functions.outbox.channels import Channel, HttpChannel
from functions.process.service import EffectProcessor
from functions.shared.environment import ProcessSettings, ReconcileSettings
from infra.config import DEFAULT_API_TYPE, ApiType
from infra.mappings import OUTBOX_MAPPING, PROCESS_MAPPING

if TYPE_CHECKING:
    from functions.process.waiting import Waiting

# Every request holds the local server's one lock: a sweep is a due-index Query per shard and a
# waiting run a Query of the parked deliveries, a few ms each; every 2 s, a retried notification
# or an unmatched payment is not left waiting for the schedule.
SWEEP_EVERY_SECONDS = 2.0
WAITING_EVERY_SECONDS = 2.0
# A run reads every order changed in the hour so far (the changed index knows the hour only):
# every 2 minutes, the runs of a 10,000-delivery drill re-read the same orders four times, a
# tenth of the server's requests while the pipeline ran.
RECONCILE_EVERY_SECONDS = 300.0


@dataclass
class Stage:
    """One function's invocations, the records they were handed, and their wall-clock time."""

    invocations: int = 0
    records: int = 0
    seconds: float = 0.0


class StageTimes:
    """Times every handler the stack runs: where a local run's time goes, function by function."""

    def __init__(self) -> None:
        self.stages: dict[str, Stage] = {}
        self._lock = threading.Lock()

    def wrap(self, name: str, handler: Any) -> Any:
        stage = self.stages.setdefault(name, Stage())

        def timed(event: dict[str, Any], context: Any) -> Any:
            started = time.perf_counter()
            try:
                return handler(event, context)
            finally:
                elapsed = time.perf_counter() - started
                with self._lock:
                    stage.invocations += 1
                    stage.records += len(event.get("Records", ())) or 1
                    stage.seconds += elapsed

        return timed


@dataclass
class Faults:
    """Shares (0..1) of the crash points and failures to inject."""

    crash_before_delete: float = 0.0  # process committed, then died before the SQS delete
    transaction_conflicts: float = 0.0  # DynamoDB cancels with TransactionConflict
    channel_failures: float = 0.0  # a sink refuses a notification
    crash_after_send: float = 0.0  # the sender died after a send, before recording it
    # Every this many batches (0: never), the stream's mapping gives one up (as when its
    # retries ran out, or it was too old): the sweeper's way back for new items, through the
    # on-failure queue. A count, not a share: a small drill meets it too.
    stream_gives_up_every: int = 0
    seed: int = 42

    @classmethod
    def drill(cls) -> Faults:
        return cls(0.05, 0.05, 0.05, 0.03, stream_gives_up_every=10)


class EmbeddedStack:
    def __init__(
        self,
        faults: Faults | None = None,
        process_concurrency: int | None = None,
        log_path: Path | None = None,
        process_variant: type[EffectProcessor] | None = None,
        front_port: int = 0,
        aws_port: int = 0,
        provider_apis_port: int = 0,
        metrics_dir: Path = METRICS_DIR,
        api_type: ApiType = DEFAULT_API_TYPE,
        metering: Metering | None = None,
        split_aws: bool = False,
        reconcile_settle_seconds: float | None = None,
    ) -> None:
        self.faults = faults or Faults()
        # Which API Gateway the front plays: the event shape ingest receives (payload 2.0 or 1.0)
        self.api_type = api_type
        # `umavez cost`: handlers timed and their AWS calls billed per function.
        self._metering = metering
        self._front_port = front_port
        self._aws_port = aws_port
        self._provider_apis_port = provider_apis_port
        # As many process pollers as the mapping's maximum concurrency, unless told
        self._concurrency = process_concurrency or PROCESS_MAPPING.max_concurrency
        # DynamoDB in a server process of its own (the drill's throughput; see LocalAws)
        self._split_aws = split_aws
        # None: the reconciliation's own margin behind now (the drills run it as deployed)
        self._reconcile_settle_seconds = reconcile_settle_seconds
        # None: the stack's own file while it runs (see `stack_log_path`), kept as
        # LAST_STACK_LOG once it stops.
        self._log_path = log_path
        self.metrics = MetricFiles(metrics_dir)  # one EMF file per function, as CloudWatch gets
        self._variant = process_variant
        self._rng = random.Random(self.faults.seed)  # noqa: S311 - fault injection
        self._rng_lock = threading.Lock()
        self._changes = ProcessChanges()
        self.pollers: list[Poller] = []
        self.waiting_clock = WaitingClock()
        self.stage_times = StageTimes()

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> EmbeddedStack:
        self._start_aws()
        handlers = self._wrapped_handlers()
        self.front = ApiFront(handlers["ingest"], self._front_port, self.api_type).start()
        self._wire_event_sources(handlers)
        self._wire_schedules(handlers)
        self._start_sinks()
        self.pollers = [
            *self.process_pollers,
            self.stream_poller,
            self.sweeper,
            self.reconciliation,
            self.waiting,
            self.sink,
        ]
        for poller in self.pollers:
            poller.start()
        self.drain = Drain(
            self.counts, self.process_pollers, self.stream_poller, self.sink, self.waiting_clock
        )
        return self

    def _start_aws(self) -> None:
        """The local server and the fake provider APIs, the resources provisioned on it, and
        the functions' environment naming them."""
        self.aws = LocalAws(
            self._aws_port,
            self.faults.transaction_conflicts,
            self.faults.seed,
            account_capacity=self._metering is not None,
            split_dynamodb=self._split_aws,
        ).start()
        self.provider_apis = FakeProviderApis(port=self._provider_apis_port).start()
        self.resources: LocalResources = provision(self.aws.endpoint_url)
        self.counts = PipelineCounts(self.aws.endpoint_url, self.resources)
        self.aws.publish_queue_metrics()  # status reads its queues from their first moment
        self._changes.set_environment(
            {
                **self.resources.environment(),
                **ProcessSettings.variables(
                    mercadopago_api_url=self.provider_apis.url,
                    stripe_api_url=self.provider_apis.url,
                    asaas_api_url=self.provider_apis.url,
                ),
                **ReconcileSettings.variables(
                    reconcile_settle_seconds=self._reconcile_settle_seconds
                ),
            }
        )

    def _wrapped_handlers(self) -> dict[str, Any]:
        """The real handlers, each acting as its function, timed, and metered for `cost`."""
        # Every AWS call a handler makes names its function: the server records what each
        # function's calls need of its role (devstack/calls.py).
        self._changes.on_undo(tag_calls())
        self.log_path, log_file = open_stack_log(
            self._changes, self._log_path, self.aws.endpoint_url, self._metering
        )
        wiring = HandlerWiring(
            log_file,
            self.metrics,
            self._faulty_channels,
            lambda: self.waiting_room(self.waiting_clock, LOCAL_WAIT_LIMIT_SECONDS),
            self.aws.endpoint_url,
            self.resources.tables,
            self._variant,
        )
        handlers = load_handlers(self._changes, wiring)
        handlers = {name: acting_as(name, h) for name, h in handlers.items()}
        handlers = {name: self.stage_times.wrap(name, h) for name, h in handlers.items()}
        if self._metering is not None:
            handlers = {name: self._metering.wrap(name, h) for name, h in handlers.items()}
        return handlers

    def _wire_event_sources(self, handlers: dict[str, Any]) -> None:
        """Process behind the webhook queue's pollers, outbox behind the outbox table's stream."""
        self.process_pollers = [
            SqsToLambda(
                f"process-{n}",
                self.aws.endpoint_url,
                self.resources.queue_url,
                handlers["process"],
                PROCESS_MAPPING,
                crash_before_delete=Chance(
                    self.faults.crash_before_delete, self._rng, self._rng_lock
                ),
            )
            for n in range(self._concurrency)
        ]
        self.stream_poller = StreamToLambda(
            "outbox",
            self.aws.endpoint_url,
            self.resources.tables.outbox,
            handlers["outbox"],
            self.resources.outbox_failures_url,
            OUTBOX_MAPPING,
            gives_up=every(self.faults.stream_gives_up_every),
        )

    def _wire_schedules(self, handlers: dict[str, Any]) -> None:
        """The scheduled functions, each on the stack's own (shorter) schedule."""
        self.sweeper = Every("sweeper", SWEEP_EVERY_SECONDS, handlers["sweeper"], "umavez-sweeper")
        # The state machine's stand-in: plan, the units side by side, finish; each step an
        # invocation of the one function, timed and metered as such.
        self.reconciliation = Every(
            "reconciliation",
            RECONCILE_EVERY_SECONDS,
            LocalReconciliation(handlers["reconciliation"]),
            "umavez-reconciliation",
        )
        self.waiting = Every(
            "waiting", WAITING_EVERY_SECONDS, handlers["waiting"], "umavez-waiting"
        )
        # The hourly statement pass, invoked as its schedule would (`read_statement`): an hour
        # is longer than any drill.
        self._statement = handlers["statement"]

    def _start_sinks(self) -> None:
        """Where notifications land: the sink queue's recorder and the signed HTTP receiver."""
        create_sink_table(self.aws.endpoint_url)
        self.sink = SinkRecorder(self.aws.endpoint_url, self.resources.sink_queue_url)
        self.http_sink = HttpSink(self.sink).start()
        self._changes.on_undo(self.http_sink.stop)

    def __exit__(self, *exc: object) -> None:
        for poller in self.pollers:
            poller.stop()
        for poller in self.pollers:
            poller.join(timeout=5)
        self.front.stop()
        self.provider_apis.stop()
        self.aws.stop()
        self._changes.undo_all()

    def recorded_calls(self) -> list[AwsCall]:
        """Every permission the functions' AWS calls needed so far, each once
        (`devstack/calls.py`): pollers' calls under the function whose mapping they play."""
        return sorted(AwsCall(**call) for call in self.aws.stats()["aws_calls"])

    @property
    def webhook_urls(self) -> dict[str, str]:
        return {p: f"{self.front.url}/webhooks/{p}" for p in self.resources.secret_names}

    # -- the functions' parts on this stack -------------------------------------------------

    def _faulty_channels(self, build: Any) -> Any:
        fails = Chance(self.faults.channel_failures, self._rng, self._rng_lock)
        crashes = Chance(self.faults.crash_after_send, self._rng, self._rng_lock)

        def channels() -> list[Channel]:
            # And the signed HTTP channel to the stack's own receiver: its secret in memory
            # (deployed, it is read from Secrets Manager), plain http to loopback allowed.
            http = HttpChannel(
                self.http_sink.url,
                lambda: (self.http_sink.secret,),
                time.time,
                timeout_seconds=HTTP_TIMEOUT_SECONDS,
                allow_loopback_http=True,
            )
            return [FaultyChannel(channel, fails, crashes) for channel in [*build(), http]]

        return channels

    def read_statement(self, event: dict[str, Any]) -> dict[str, Any]:
        """The statement function invoked as its schedule invokes it (`{"provider": …}`), or
        as an operator does, naming a window; its answer."""
        answer: dict[str, Any] = self._statement(event, LambdaContext("umavez-statement"))
        return answer

    def waiting_room(
        self, clock: Callable[[], float] = time.time, limit_seconds: int | None = None
    ) -> Waiting:
        """The waiting room on this stack's ledger and queue: the operator's (`umavez attach`),
        on the wall clock, unless the re-drive's clock and limit are given."""
        from functions.process.waiting import WAIT_LIMIT_SECONDS, Waiting

        return Waiting(
            client("dynamodb", self.aws.endpoint_url),
            client("sqs", self.aws.endpoint_url),
            self.resources.tables,
            self.resources.queue_url,
            clock,
            WAIT_LIMIT_SECONDS if limit_seconds is None else limit_seconds,
        )

    # -- what is in flight -------------------------------------------------------------------

    def pause_processing(self) -> None:
        """Process takes nothing from the queue until `resume_processing`: an outage on our
        side, while providers keep delivering (ingest still answers)."""
        for poller in self.process_pollers:
            poller.paused.set()

    def resume_processing(self) -> None:
        for poller in self.process_pollers:
            poller.paused.clear()

    def queued_messages(self) -> tuple[int, int]:
        """Messages in the webhook queue: (visible, received and not yet deleted)."""
        return self.counts.queued_messages()

    def dead_letters(self) -> int:
        return self.counts.dead_letters()

    def stop_processing_and_read_queue(self) -> set[str]:
        """The event ids of every message still in the webhook queue. Stops the process pollers
        first and waits out the visibility timeout of what they held: for the end of a run."""
        for poller in self.process_pollers:
            poller.stop()
        for poller in self.process_pollers:
            poller.join(timeout=30)
        time.sleep(LOCAL_VISIBILITY_TIMEOUT_SECONDS + 0.5)
        sqs = client("sqs", self.aws.endpoint_url)
        event_ids: set[str] = set()
        while messages := sqs.receive_message(
            QueueUrl=self.resources.queue_url,
            MaxNumberOfMessages=10,
            VisibilityTimeout=600,
            MessageAttributeNames=["event_id"],
        ).get("Messages", []):
            event_ids |= {event_id_of(m) for m in messages}
        return event_ids
