"""The statement pass on a schedule: each provider's books read window after window from its
checkpoint, so that no movement waits for someone to suspect a gap.

A provider's checkpoint is the end of the last window read whole, booked and matched. A run
reads the windows after it, by the provider's cadence (functions/statement/cadence.py: an hour
at most each, or a whole Brazil day) and ending no later than the provider's settle lag ago,
until it has caught up or its time is short; each window's checkpoint is moved only after its
pass. A read that stops (the API kept failing) moves nothing: the next run reads the same
window again, and what this one booked of it is a duplicate then. Two runs of one provider
never both move a checkpoint: the move is conditional on the one the run started from.

How far a run leaves its provider behind (`behind_seconds`, the `statement_lag_seconds`
metric) is counted from where its cadence lets a caught-up checkpoint be: the settle lag ago
for an hourly provider, the end of the last settled day for a daily one, so that a daily
checkpoint a day behind the clock between two runs is not behind at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from functions.asaas.api import AsaasApiNotConfiguredError
from functions.shared import tables
from functions.shared.dynamo import from_attributes
from functions.shared.items import StatementCheckpoint
from functions.statement import service
from functions.statement.cadence import HOURLY, Cadence
from functions.statement.reading import StatementInterruptedError, StatementNotConfiguredError
from functions.statement.report import StatementReport
from functions.statement.service import StatementPass
from functions.statement.sources import CADENCES, EDGE_SECONDS, SETTLE_SECONDS, StatementReader
from functions.store import checkpoints

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

CHECKPOINT_PK: Final = "STATEMENT_CHECKPOINT"  # sort key: the provider
# The longest window one hourly pass reads; a provider's first scheduled pass reads the window
# this long before it, or yesterday for a daily one (what came earlier is the operator's to
# read: `umavez statement PROVIDER --since …`).
WINDOW_SECONDS: Final = HOURLY.window_seconds
# Payments one pass books side by side, and orders it matches: a line's time is spent waiting on
# DynamoDB, so eight at once take about an eighth of the time (within the function's CPU:
# 1,024 MB is about half a vCPU).
BOOKING_WORKERS: Final = 8
# Another window is started only while at least this margin, plus twice what the last one
# took, is left of the invocation's time.
TIME_MARGIN_SECONDS: Final = 60


@dataclass
class ScheduledRun:
    provider: str
    passes: list[StatementReport] = field(default_factory=list)
    checked_until: int | None = None  # the checkpoint after the run (None: never read)
    caught_up: bool = False
    stopped: str | None = None  # why the run stopped before catching up
    interrupted: bool = False  # the provider's API kept failing
    not_configured: str | None = None
    # How far the checkpoint is behind where its cadence lets a caught-up one be (None: never
    # read): the `StatementBehind` alarm's metric.
    behind_seconds: int | None = None

    @property
    def mismatches(self) -> int:
        return sum(len(report.mismatches) for report in self.passes)

    @property
    def booked(self) -> int:
        return sum(report.booked for report in self.passes)

    @property
    def lines_read(self) -> int:
        return sum(report.lines_read for report in self.passes)

    def count(self, kind: str) -> int:
        return sum(report.count(kind) for report in self.passes)


class StatementSchedule:
    def __init__(
        self,
        dynamodb: DynamoDBClient,
        table_names: tables.TableNames,
        passing: StatementPass,
        clock: Callable[[], float],
        settle_seconds: int | None = None,
        window_seconds: int | None = None,
        cadences: Mapping[str, Cadence] = CADENCES,
    ) -> None:
        """`settle_seconds` replaces every provider's settle lag, `window_seconds` the hourly
        providers' longest window (a daily provider's window stays its day)."""
        self._db = dynamodb
        self._ledger = table_names.ledger
        self._passing = passing
        self._clock = clock
        self._settle_seconds = settle_seconds
        self._window_seconds = window_seconds
        self._cadences = cadences

    def checkpoint(self, provider: str) -> int | None:
        response = self._db.get_item(
            TableName=self._ledger,
            Key={tables.PARTITION_KEY: {"S": CHECKPOINT_PK}, tables.SORT_KEY: {"S": provider}},
            ConsistentRead=True,
        )
        item = response.get("Item")
        return StatementCheckpoint.of(from_attributes(item)).checked_until if item else None

    def cadence(self, provider: str) -> Cadence:
        return self._cadences.get(provider, HOURLY).with_window(self._window_seconds)

    def next_window(
        self, provider: str, checkpoint: int | None, settled: int | None = None
    ) -> tuple[int, int] | None:
        """The window after `checkpoint` whose end has settled (by now, or by `settled`), by
        the provider's cadence (an hour at most, or a whole day); None when none has yet."""
        settled = self._settled(provider) if settled is None else settled
        return self.cadence(provider).next_window(checkpoint, settled)

    def behind(self, provider: str, checkpoint: int | None) -> int | None:
        """How far `checkpoint` is behind a caught-up one, now (None: never read)."""
        if checkpoint is None:
            return None
        return max(0, self.cadence(provider).due(self._settled(provider)) - checkpoint)

    def _settled(self, provider: str) -> int:
        lag = SETTLE_SECONDS[provider] if self._settle_seconds is None else self._settle_seconds
        return int(self._clock()) - lag

    def run(self, source: StatementReader, time_left_ms: Callable[[], int]) -> ScheduledRun:
        """The windows after the provider's checkpoint, each moving it once read whole."""
        run = self._run(source, time_left_ms)
        run.behind_seconds = self.behind(run.provider, run.checked_until)
        return run

    def _run(self, source: StatementReader, time_left_ms: Callable[[], int]) -> ScheduledRun:
        provider = source.provider
        run = ScheduledRun(provider)
        checkpoint = run.checked_until = self.checkpoint(provider)
        # Read up to what had settled when the run began. Read up to each moment, a pass's own
        # time would settle a window of those seconds, and a long pass's run would go on
        # reading such slivers (each one the hour's orders again) until its time ran out.
        settled = self._settled(provider)
        while (window := self.next_window(provider, checkpoint, settled)) is not None:
            started = self._clock()
            if not self._pass(source, *window, run):
                if (
                    checkpoint is None
                    and run.interrupted
                    and self._advance(provider, None, window[0])
                ):
                    # A first read that failed fixes where reading starts: the next runs read
                    # from there, and the lag grows (StatementBehind) as it would behind any
                    # checkpoint, instead of a first window sliding forward unread.
                    run.checked_until = window[0]
                return run
            if not self._advance(provider, checkpoint, window[1]):
                run.stopped = "another run moved the checkpoint first: it goes on from there"
                return run
            checkpoint = run.checked_until = window[1]
            took = self._clock() - started
            if time_left_ms() < (2 * took + TIME_MARGIN_SECONDS) * 1000:
                run.stopped = "too little time left for another window: the next run goes on"
                return run
        run.caught_up = True
        return run

    def run_window(self, source: StatementReader, since: int, until: int) -> ScheduledRun:
        """One window an operator names, read again whole; the checkpoint is not moved."""
        run = ScheduledRun(source.provider, checked_until=self.checkpoint(source.provider))
        run.caught_up = self._pass(source, since, until, run)
        run.behind_seconds = self.behind(run.provider, run.checked_until)
        return run

    def _pass(self, source: StatementReader, since: int, until: int, run: ScheduledRun) -> bool:
        """The window read, booked and matched into `run`; False when it could not be read."""
        edge = EDGE_SECONDS.get(source.provider, service.EDGE_SECONDS)
        first, last = self._passing.read_window(since, until, edge)
        # A window may end after now (an operator's): its lines are read up to its end.
        now = max(int(self._clock()), last)
        try:
            read = source.read(first, last, now)
        except (StatementNotConfiguredError, AsaasApiNotConfiguredError) as exc:
            run.not_configured = str(exc)
            return False
        except StatementInterruptedError as exc:
            run.interrupted = True
            run.stopped = f"the read stopped, nothing of it moved the checkpoint: {exc}"
            return False
        run.passes.append(self._passing.run(source.provider, read.lines, since, until, read.known))
        return True

    def _advance(self, provider: str, previous: int | None, until: int) -> bool:
        """The checkpoint moved from `previous` to `until`; False when another run moved it."""
        return checkpoints.advance(self._db, self._ledger, CHECKPOINT_PK, provider, previous, until)
