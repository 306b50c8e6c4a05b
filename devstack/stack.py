"""The embedded stack: moto server, resources, the real handlers behind Lambda-like pollers,
an API front on loopback, fake Mercado Pago and Stripe APIs, and switchable faults.

Long on purpose: the wiring of every function to its event source, schedule and fault
injection mirrors infra/constructs/pipeline.py, and is read beside it.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from devstack.calls import AwsCall
from devstack.faults import Chance, FaultyChannel, every
from devstack.front import ApiFront
from devstack.lambdas import LambdaContext
from devstack.local_aws import LocalAws
from devstack.metering import Metering, acting_as, tag_calls
from devstack.metrics import MetricFiles
from devstack.metrics_report import METRICS_DIR
from devstack.pollers import Every, Poller
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
from functions.shared import tables
from functions.shared.environment import ProcessSettings
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
# How long a drain may take: a base, plus this much per unit of work in flight at its peak.
DRAIN_BASE_SECONDS = 60.0
DRAIN_SECONDS_PER_ITEM = 1.0
# Without progress for this long (and nothing left to wait out), the drain gives up early.
DRAIN_STALL_SECONDS = 60.0


class WaitingClock:
    """The waiting re-drive's clock: real time, plus what a caller lets pass at once. The drill,
    once every delivery is in and nothing else moves, lets the wait limit pass instead of
    sleeping through it: what still waits then goes unmatched, as it would after the limit."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


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


@dataclass(frozen=True)
class InFlight:
    """Work the pipeline has not finished: messages in the queue (visible, or received and not
    yet deleted), deliveries parked until their order is bound, notifications not yet sent."""

    queued: int = 0
    receiving: int = 0
    waiting: int = 0
    outbox: int = 0

    @property
    def total(self) -> int:
        return self.queued + self.receiving + self.waiting + self.outbox

    def __str__(self) -> str:
        return (
            f"{self.queued} queued, {self.receiving} being received, {self.waiting} waiting, "
            f"{self.outbox} notifications unsent"
        )


@dataclass(frozen=True)
class Drained:
    """How a drain ended: quiet (`ok`), or what was still in flight when it gave up."""

    ok: bool
    seconds: float
    bound_seconds: float
    peak: int
    left: InFlight
    waits_let_pass: bool = False

    def __bool__(self) -> bool:
        return self.ok


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


# The log of the stack that stopped last: what to read once no stack runs.
LAST_STACK_LOG: Final = Path(".local/lambda-logs.jsonl")


def stack_log_path(aws_endpoint_url: str) -> Path:
    """The handlers' log of the stack whose AWS answers at that URL, while it runs: one file
    per stack, so that `umavez trace` reads that stack's lines only, whatever else runs."""
    port = urlsplit(aws_endpoint_url).port
    return Path(".local/logs") / f"aws-{port}.jsonl"


def _keep_as_last(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, LAST_STACK_LOG)


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
        # None: the stack's own file while it runs (see `stack_log_path`), kept as
        # LAST_STACK_LOG once it stops.
        self._log_path = log_path
        self.metrics = MetricFiles(metrics_dir)  # one EMF file per function, as CloudWatch gets
        self._variant = process_variant
        self._rng = random.Random(self.faults.seed)  # noqa: S311 - fault injection
        self._rng_lock = threading.Lock()
        self._undo: list[Any] = []
        self.pollers: list[Poller] = []
        self.waiting_clock = WaitingClock()
        self.stage_times = StageTimes()
        self._clients: dict[str, Any] = {}

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
        self.aws.publish_queue_metrics()  # status reads its queues from their first moment
        self._set_environment(
            {
                **self.resources.environment(),
                **ProcessSettings.variables(
                    mercadopago_api_url=self.provider_apis.url,
                    stripe_api_url=self.provider_apis.url,
                    asaas_api_url=self.provider_apis.url,
                ),
            }
        )

    def _wrapped_handlers(self) -> dict[str, Any]:
        """The real handlers, each acting as its function, timed, and metered for `cost`."""
        # Every AWS call a handler makes names its function: the server records what each
        # function's calls need of its role (devstack/calls.py).
        self._undo.append(tag_calls())
        handlers = self._load_handlers()
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
        self._undo.append(self.http_sink.stop)

    def __exit__(self, *exc: object) -> None:
        for poller in self.pollers:
            poller.stop()
        for poller in self.pollers:
            poller.join(timeout=5)
        self.front.stop()
        self.provider_apis.stop()
        self.aws.stop()
        for undo in reversed(self._undo):
            undo()

    def recorded_calls(self) -> list[AwsCall]:
        """Every permission the functions' AWS calls needed so far, each once
        (`devstack/calls.py`): pollers' calls under the function whose mapping they play."""
        return sorted(AwsCall(**call) for call in self.aws.stats()["aws_calls"])

    @property
    def webhook_urls(self) -> dict[str, str]:
        return {p: f"{self.front.url}/webhooks/{p}" for p in self.resources.secret_names}

    # -- wiring the real handlers ------------------------------------------------------------

    def _set_environment(self, values: dict[str, str]) -> None:
        previous = {name: os.environ.get(name) for name in values}

        def restore() -> None:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

        os.environ.update(values)
        self._undo.append(restore)

    def _load_handlers(self) -> dict[str, Any]:
        from functions.ingest import handler as ingest
        from functions.outbox import handler as outbox
        from functions.outbox import sweeper_handler, wiring
        from functions.process import handler as process
        from functions.process import waiting_handler
        from functions.process import wiring as process_wiring
        from functions.reconcile import handler as reconcile
        from functions.statement import handler as statement

        log_file = self._open_log()
        modules = (ingest, process, outbox, sweeper_handler, reconcile, waiting_handler, statement)
        for module in modules:
            self._redirect_logs(module.logger, log_file)
            self._undo.append(self.metrics.route(module.metrics))
        self._clear_caches(
            ingest.webhook_ingest,
            process_wiring.effect_processor,
            process_wiring.failure_records,
            outbox.outbox_sender,
            sweeper_handler.sweeper,
            sweeper_handler.stranded_items,
            reconcile.reconciler,
            process_wiring.waiting_room,
            waiting_handler.waiting_room,
            statement.statement_schedule,
            statement.statement_source,
        )
        self._patch(wiring, "channels_from_env", self._faulty_channels(wiring.channels_from_env))
        self._patch(
            waiting_handler,
            "waiting_room",
            functools.cache(
                lambda: self.waiting_room(self.waiting_clock, LOCAL_WAIT_LIMIT_SECONDS)
            ),
        )
        if self._variant is not None:
            self._patch_variant(self._variant, process_wiring, statement)
        return {
            "statement": statement.lambda_handler,
            "ingest": ingest.lambda_handler,
            "process": process.lambda_handler,
            "outbox": outbox.lambda_handler,
            "sweeper": sweeper_handler.lambda_handler,
            "reconciliation": reconcile.lambda_handler,
            "waiting": waiting_handler.lambda_handler,
        }

    def _open_log(self) -> Any:
        """The handlers' log file (see `stack_log_path`), through the meter when metered."""
        self.log_path = self._log_path or stack_log_path(self.aws.endpoint_url)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # A fresh stack, a fresh log: its lines are this stack's, as its tables are.
        log_file: Any = self.log_path.open("w" if self._log_path is None else "a", buffering=1)
        if self._log_path is None:
            self._undo.append(lambda: _keep_as_last(self.log_path))
        self._undo.append(log_file.close)
        if self._metering is not None:
            log_file = self._metering.log_stream(log_file)
        return log_file

    def _clear_caches(self, *cached: Any) -> None:
        """The functions' cached wiring, built anew for this stack and again once it stops."""
        for wiring in cached:
            wiring.cache_clear()
            self._undo.append(wiring.cache_clear)

    def _patch_variant(
        self, variant: type[EffectProcessor], process_wiring: Any, statement: Any
    ) -> None:
        """Process runs `variant` (a broken design, for the drill to catch) instead."""
        self._patch(
            process_wiring,
            "effect_processor",
            functools.cache(
                lambda: variant(
                    client("dynamodb", self.aws.endpoint_url),
                    self.resources.tables,
                    time.time,
                    process_wiring.interpreters_from_env(),
                )
            ),
        )
        # The statement books through the same broken processor.
        self._patch(
            statement,
            "statement_schedule",
            functools.cache(lambda: statement.statement_schedule_with(variant)),
        )

    def _redirect_logs(self, logger: Any, stream: Any) -> None:
        handler = logger.registered_handler
        if isinstance(handler, logging.StreamHandler):
            previous = handler.setStream(stream)
            self._undo.append(lambda: handler.setStream(previous))

    def _patch(self, module: Any, name: str, value: Any) -> None:
        original = getattr(module, name)
        setattr(module, name, value)
        self._undo.append(lambda: setattr(module, name, original))

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

    # -- waiting for quiet -------------------------------------------------------------------

    def _client(self, service: str) -> Any:
        """One client per service for the drain's checks, made once: a drain checks every
        second, and making a client costs more CPU than the call it makes."""
        made = self._clients.get(service)
        if made is None:
            made = self._clients[service] = client(service, self.aws.endpoint_url)
        return made

    def unfinished_outbox_items(self) -> int:
        """Items a try could not send yet (the due index's shards), and batches the stream's
        mapping gave up on that the sweeper has not parked yet (on-failure messages). A new
        item awaiting its first try is in no index: the drain waits for the stream to read
        empty instead."""
        dynamodb = self._client("dynamodb")
        attributes = self._client("sqs").get_queue_attributes(
            QueueUrl=self.resources.outbox_failures_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        given_up = sum(int(n) for n in attributes.values())
        return given_up + sum(
            int(
                dynamodb.query(
                    TableName=self.resources.tables.outbox,
                    IndexName=tables.OUTBOX_DUE_INDEX,
                    KeyConditionExpression="#b = :due",
                    ExpressionAttributeNames={"#b": tables.OUTBOX_DUE_BUCKET},
                    ExpressionAttributeValues={":due": {"S": bucket}},
                    Select="COUNT",
                )["Count"]
            )
            for bucket in tables.due_buckets()
        )

    def waiting_deliveries(self) -> int:
        """Deliveries parked until their order is bound (until unmatched, locally in seconds)."""
        response = self._client("dynamodb").query(
            TableName=self.resources.tables.ledger,
            KeyConditionExpression="#pk = :waiting",
            ExpressionAttributeNames={"#pk": tables.PARTITION_KEY},
            ExpressionAttributeValues={":waiting": {"S": tables.WAITING_PK}},
            Select="COUNT",
        )
        return int(response["Count"])

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
        attributes = self._client("sqs").get_queue_attributes(
            QueueUrl=self.resources.queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return (
            int(attributes["ApproximateNumberOfMessages"]),
            int(attributes["ApproximateNumberOfMessagesNotVisible"]),
        )

    def dead_letters(self) -> int:
        attributes = self._client("sqs").get_queue_attributes(
            QueueUrl=self.resources.dead_letter_url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"])

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

    def in_flight(self) -> InFlight:
        queued, receiving = self.queued_messages()
        return InFlight(
            queued, receiving, self.waiting_deliveries(), self.unfinished_outbox_items()
        )

    def drain(
        self,
        *,
        let_waits_pass: bool = False,
        base_seconds: float = DRAIN_BASE_SECONDS,
        seconds_per_item: float = DRAIN_SECONDS_PER_ITEM,
        stall_seconds: float | None = None,
    ) -> Drained:
        """Wait until queues, stream and outbox are quiet (three checks in a row), for as long
        as the work in flight needs: at most `base_seconds` plus `seconds_per_item` for each
        unit of work at its peak, and never more than `stall_seconds` while nothing moves.

        A delivery waiting for its binding moves on its own only at the wait limit. With
        `let_waits_pass` (every delivery is in), once nothing else is in flight the waiting
        re-drive's clock is moved past the limit: what still waits goes unmatched now instead
        of after the limit. Without it, the stall allowance outlasts the limit.
        """
        if stall_seconds is None:
            stall_seconds = DRAIN_STALL_SECONDS if let_waits_pass else LOCAL_WAIT_LIMIT_SECONDS + 30
        started = time.monotonic()
        stalled_at = started + stall_seconds
        quiet = only_waiting = peak = empty_reads = 0
        bound = base_seconds
        waits_let_pass = False
        left = previous = InFlight()
        try:
            while True:
                busy = any(p.busy for p in [*self.process_pollers, self.stream_poller, self.sink])
                # The queue first (one request); the tables (nine Queries) once it is empty.
                queued, receiving = self.queued_messages()
                if queued or receiving:
                    left = replace(left, queued=queued, receiving=receiving)
                else:
                    left = self.in_flight()
                now = time.monotonic()
                peak = max(peak, left.total)
                bound = base_seconds + seconds_per_item * peak
                if busy or left != previous:  # progress: the stall allowance starts again
                    stalled_at, previous = now + stall_seconds, left
                if not busy and left.total == 0 and self.sink.settled():
                    quiet += 1
                    if quiet == 1:
                        empty_reads = self.stream_poller.stats["empty_reads"]
                    # Quiet, and the stream read empty twice since: no new item is unread.
                    stream_read = self.stream_poller.stats["empty_reads"] >= empty_reads + 2
                    if quiet >= 3 and stream_read:
                        return Drained(True, now - started, bound, peak, left, waits_let_pass)
                else:
                    quiet = 0
                # Only process binds a waiting delivery: once the queue is empty and no batch
                # is being processed, nothing will bind what still waits (notifications still
                # being retried bind nothing).
                processing = any(p.busy for p in self.process_pollers)
                only_waiting = (
                    only_waiting + 1
                    if left.waiting > 0 and left.queued == left.receiving == 0 and not processing
                    else 0
                )
                if let_waits_pass and only_waiting >= 3 and self.waiting_clock.offset == 0:
                    self.waiting_clock.offset = LOCAL_WAIT_LIMIT_SECONDS + 1
                    waits_let_pass = True
                if now >= min(started + bound, stalled_at):
                    break
                # Every check goes through the server's one lock: the queue is one request, the
                # tables nine Queries of an index or a partition (a few ms each).
                time.sleep(0.5 if left.total == 0 else 1.0)
            left = self.in_flight()  # all of it, for the report
        finally:
            self.waiting_clock.offset = 0  # items parked from now on wait their own time
        return Drained(False, time.monotonic() - started, bound, peak, left, waits_let_pass)
