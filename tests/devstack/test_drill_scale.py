"""The drill's size, its delivery schedule, its drain accounting and its report's fields."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest

from devstack.drain import Drained, InFlight
from devstack.resources import DEVELOPMENT_SECRETS
from devstack.stack import EmbeddedStack, StageTimes
from firedrill.checks import nothing_lost
from firedrill.delivery import DeliveryLog, Providers, WallClock, run_stories
from firedrill.operator_runs import attach_as_an_operator
from firedrill.report import drains_line, server_facts, stage_facts
from firedrill.run import DrillOptions
from firedrill.stories import KINDS, SIMULATED_EVERY
from firedrill.story import Expected, Post, Story
from fixtures import stripe
from functions.shared.errors import WriteContendedError

NOW = int(time.time())


def test_deliveries_size_the_drill_to_just_past_the_number_asked() -> None:
    # Given a drill sized by deliveries, not orders
    options = DrillOptions(deliveries=1000)

    # When it makes its stories
    made = options.stories(NOW)

    # Then they make at least 1,000 deliveries, one story fewer would not, every written kind
    # in turn, every third story a lifecycle drawn from the provider simulators
    deliveries = [story.deliveries for story in made]
    assert sum(deliveries) >= 1000 > sum(deliveries[:-1])
    written = [story for n, story in enumerate(made) if n % SIMULATED_EVERY != SIMULATED_EVERY - 1]
    assert [story.kind for story in written[: len(KINDS)]] == [
        kind(stripe.unique("ord"), NOW).kind for kind in KINDS
    ]
    simulated = made[SIMULATED_EVERY - 1 :: SIMULATED_EVERY]
    assert simulated
    assert all(story.kind.startswith("simulated ") for story in simulated)
    # And the same seed draws the same lifecycles
    again = DrillOptions(deliveries=1000).stories(NOW)
    assert [s.kind for s in again] == [s.kind for s in made]
    assert options.stories_per_second(made) is None  # all ready at once


def test_a_soak_spreads_its_deliveries_over_its_minutes_at_the_rate_asked() -> None:
    # Given a two-minute soak at 5 deliveries a second
    options = DrillOptions(soak_minutes=2, rate=5)

    # When it makes its stories
    made = options.stories(NOW)

    # Then it plans 600 deliveries, its stories started evenly over the 120 s
    assert sum(story.deliveries for story in made) >= 600 > sum(s.deliveries for s in made[:-1])
    assert options.stories_per_second(made) == len(made) / 120


def _story(name: str, phases: int, copies: int = 1, after: float = 0) -> Story:
    return Story(
        name,
        name,
        [
            [Post("stripe", f"{name}:{n}", copies=copies, after_seconds=after if n else 0)]
            for n in range(phases)
        ],
        Expected("paid"),
    )


def test_the_schedule_delivers_every_copy_and_each_storys_phases_in_order() -> None:
    # Given stories of several phases, some sending copies at once, and a provider that notes
    # what it is handed
    stories = [_story(f"s{n}", phases=1 + n % 4, copies=1 + n % 3) for n in range(30)]
    handed: list[str] = []
    lock = threading.Lock()

    def deliver(post: Post) -> None:
        with lock:
            handed.append(post.body)

    progress: list[tuple[int, int]] = []

    # When the schedule runs them with three workers
    run_stories(stories, _Recorder(deliver), lambda d, t: progress.append((d, t)), workers=3)

    # Then every copy was delivered, each story's phases one after the other, and the progress
    # reached the total
    expected = Counter(post.body for s in stories for post in s.posts for _ in range(post.copies))
    assert Counter(handed) == expected
    for story in stories:
        bodies = [b for b in handed if b.startswith(f"{story.kind}:")]
        assert bodies == sorted(bodies, key=lambda body: int(body.split(":")[1]))
    total = sum(s.deliveries for s in stories)
    assert progress[-1] == (total, total)


def test_stories_that_wait_between_phases_start_first_so_their_waits_overlap_the_rest() -> None:
    # Given six stories ready at once: five of one phase, then one whose second phase the
    # provider sends a moment after its first
    stories = [_story(f"plain{n}", phases=1) for n in range(5)]
    stories.append(_story("late", phases=2, after=0.05))
    handed: list[str] = []

    # When the schedule runs them with one worker, on a clock whose time passes only while
    # nothing is being delivered (a wait long beside a delivery, however slow this machine)
    run_stories(
        stories,
        _Recorder(lambda post: handed.append(post.body)),
        lambda d, t: None,
        1,
        clock=_IdleTime(),
    )

    # Then the waiting story's first phase went first, and its wait did not hold up the others
    assert handed[0] == "late:0"
    assert handed[1:6] == [f"plain{n}:0" for n in range(5)]
    assert handed[-1] == "late:1"


class _IdleTime(WallClock):
    """Time that passes only when the schedule is idle: a wait then ends at once, at its due
    time; while a phase is delivered, the schedule waits for it, and no time passes."""

    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time

    def wait(self, turn: threading.Condition, timeout: float | None, idle: bool) -> None:
        if timeout is None or not idle:
            turn.wait()
        else:
            self.time += timeout


class _Recorder:
    """Delivers to a function instead of over HTTP."""

    def __init__(self, deliver: Callable[[Post], None]) -> None:
        self.deliver = deliver


def test_a_stopped_poller_leaves_deliveries_not_yet_processed_never_lost() -> None:
    with EmbeddedStack() as stack:
        # Given the embedded stack whose process pollers have stopped (the Lambda is throttled)
        for poller in stack.process_pollers:
            poller.stop()
        for poller in stack.process_pollers:
            poller.join(timeout=10)
        log = DeliveryLog()
        providers = Providers(stack.front.url, DEVELOPMENT_SECRETS, log)

        # When a payment is accepted and the drain is allowed only a few seconds
        order, intent = stripe.unique("ord"), stripe.unique("pi")
        assert providers.deliver(
            Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, NOW))
        ) == [200]
        drained = stack.drain(base_seconds=2, seconds_per_item=1, stall_seconds=2)
        check = nothing_lost(stack, log, [drained])

    # Then the drain gave up with the message still queued, and the check fails saying it is
    # not yet processed, and that nothing is lost
    assert not drained
    assert drained.left.queued + drained.left.receiving == 1
    assert drained.bound_seconds == 3  # 2 s, plus 1 s for the one message in flight
    assert not check.ok
    assert "not yet processed when the drain gave up" in check.detail
    assert "1 accepted deliveries still queued, never received" in check.detail
    assert "lost: 0" in check.detail
    assert "dead letters: 0" in check.detail


def test_the_report_names_each_stage_each_drain_and_the_servers_costliest_requests() -> None:
    # Given the stage times, drains and server statistics of a run
    times = StageTimes()
    ingest = times.wrap("ingest", lambda event, context: None)
    process = times.wrap("process", lambda event, context: None)
    for _ in range(4):
        ingest({}, None)
    process({"Records": [{}, {}, {}]}, None)
    drains = [
        Drained(True, 12.0, 460.0, 400, InFlight()),
        Drained(False, 70.0, 62.0, 2, InFlight(queued=1, waiting=1), waits_let_pass=True),
    ]
    stats = {
        "calls": {
            "dynamodb Query": [100, 9.5],
            "dynamodb TransactWriteItems": [50, 2.0],
            "sqs SendMessage": [40, 1.0],
        }
    }

    # When the report states them
    stages = stage_facts(times)
    drain = drains_line(drains)
    server = server_facts(stats)

    # Then each stage has its invocations and records, each drain its time next to its bound,
    # and the server its requests per service, costliest first
    assert stages["stage: ingest"].endswith("in 4 invocations, 4 requests (0 ms a request)")
    assert "in 1 invocations, 3 records" in stages["stage: process"]
    assert "outbox" not in " ".join(stages)  # no invocation, no line
    assert drain.startswith("12 s of 460 s allowed (peak 400 in flight): quiet; ")
    assert "70 s of 62 s allowed (peak 2 in flight, waits let pass): GAVE UP with 1 queued" in drain
    assert server["server requests"] == "190 in 12.5 s under its lock"
    assert server["server: dynamodb"] == "Query 100 (9.5 s), TransactWriteItems 50 (2.0 s)"
    assert list(server) == ["server requests", "server: dynamodb", "server: sqs"]


class _ContendedRoom:
    """A waiting room whose attach is contended the first `times` it is run."""

    def __init__(self, times: int) -> None:
        self.times = times
        self.runs = 0

    def attach(self, provider: str, object_id: str, order_id: str) -> int:
        self.runs += 1
        if self.runs <= self.times:
            raise WriteContendedError("attach contended: ('TransactionConflict',)")
        return 1


def test_the_drill_runs_a_contended_attach_again_as_an_operator_would() -> None:
    # Given `umavez attach` reporting contention twice (three conflicts in a row, twice)
    room = _ContendedRoom(times=2)

    # When the drill attaches as an operator
    redriven = attach_as_an_operator(room, "stripe", "pi_1", "ord_1")  # type: ignore[arg-type]

    # Then it ran the command again until it went through
    assert (redriven, room.runs) == (1, 3)


def test_an_attach_contended_every_time_fails_the_drill_after_a_few_runs() -> None:
    # Given `umavez attach` contended every time
    room = _ContendedRoom(times=100)

    # When the drill attaches as an operator, Then it gives up after its runs
    with pytest.raises(WriteContendedError):
        attach_as_an_operator(room, "stripe", "pi_1", "ord_1", runs=4)  # type: ignore[arg-type]
    assert room.runs == 4
