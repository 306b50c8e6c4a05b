"""Delivering like the providers do: signed at send time, several copies at once, retried on a
timeout or a 5xx, answered late where a story plays the incident; and what they saw."""

from __future__ import annotations

import hashlib
import heapq
import hmac
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from botocore.exceptions import BotoCoreError, ClientError

from firedrill.story import Post, Story
from functions.mercadopago.models import Notification
from functions.mercadopago.signature import manifest

PROVIDER_TIMEOUT_SECONDS = 3.0
INCIDENT_TIMEOUT_SECONDS = 0.15
INCIDENT_DELAY_SECONDS = 0.4
PROVIDER_ATTEMPTS = 4


@dataclass
class DeliveryLog:
    """What the simulated providers saw."""

    attempts: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    retries: int = 0
    forged: list[tuple[str, list[int]]] = field(default_factory=list)
    accepted_event_ids: set[str] = field(default_factory=set)
    # Put on the Stripe partner bus: EventBridge, not ingest, took them to the queue.
    bus_event_ids: set[str] = field(default_factory=set)
    # Answered 200 with `ignored` (the other payment mode): acknowledged, never enqueued.
    ignored_event_ids: set[str] = field(default_factory=set)
    other_mode_event_ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Providers:
    """Signs and posts like Stripe, Mercado Pago and Asaas; retries like them on a timeout/5xx."""

    def __init__(
        self,
        base_url: str,
        secrets: dict[str, str],
        log: DeliveryLog,
        stripe_bus: Callable[[str], object] | None = None,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        # Puts a Stripe event on the stack's Stripe partner bus (the embedded stack's).
        self._stripe_bus = stripe_bus
        self._secrets = secrets
        self.log = log
        self.slow_bodies: set[bytes] = set()
        self._slow_lock = threading.Lock()

    def ingest_delay(self, body: bytes) -> float:
        """For the embedded front: the first delivery of a slow post answers late."""
        with self._slow_lock:
            if body in self.slow_bodies:
                self.slow_bodies.discard(body)
                return INCIDENT_DELAY_SECONDS
        return 0.0

    def deliver(self, post: Post) -> list[int]:
        if post.via_eventbridge:
            return self._on_the_bus(post)
        if post.slow:
            with self._slow_lock:
                self.slow_bodies.add(post.body.encode())
        statuses = []
        timeout = INCIDENT_TIMEOUT_SECONDS if post.slow else PROVIDER_TIMEOUT_SECONDS
        for attempt in range(PROVIDER_ATTEMPTS):
            status = self._attempt(post, timeout)
            statuses.append(status)
            if status < 500 and status != 0:
                break
            timeout = PROVIDER_TIMEOUT_SECONDS
            with self.log.lock:
                self.log.retries += 1
            time.sleep(0.05 * (attempt + 1))
        with self.log.lock:
            event_id = _event_id(post)
            if post.other_mode:
                self.log.other_mode_event_ids.add(event_id)
            if post.forgery:
                self.log.forged.append((event_id, statuses))
            elif statuses[-1] == 200 and event_id not in self.log.ignored_event_ids:
                self.log.accepted_event_ids.add(event_id)
        return statuses

    def _on_the_bus(self, post: Post) -> list[int]:
        """EventBridge takes the event, or the put fails (it is the provider's to retry):
        200 or 0, as a webhook's answer would say."""
        if self._stripe_bus is None:
            raise ValueError("this target has no Stripe partner bus to put events on")
        try:
            self._stripe_bus(post.body)
            status = 200
        except (OSError, RuntimeError, ValueError, BotoCoreError, ClientError):
            status = 0  # the put failed: nothing was delivered
        with self.log.lock:
            self.log.attempts += 1
            self.log.by_status[status] += 1
            if status == 200:
                self.log.accepted_event_ids.add(_event_id(post))
                self.log.bus_event_ids.add(_event_id(post))
        return [status]

    def _attempt(self, post: Post, timeout: float) -> int:
        headers, query = self._sign(post)
        url = f"{self._base_url}/webhooks/{post.provider}"
        if query:
            url += "?" + "&".join(f"{k}={v}" for k, v in query.items())
        request = urllib.request.Request(  # noqa: S310 - loopback or the user's own stack
            url, data=post.body.encode(), method="POST", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                status = int(response.status)
                if status == 200 and json.loads(response.read() or b"{}").get("ignored"):
                    with self.log.lock:
                        self.log.ignored_event_ids.add(_event_id(post))
        except urllib.error.HTTPError as exc:
            status = exc.code
        except (urllib.error.URLError, TimeoutError, ConnectionError):
            status = 0  # timed out or reset: the provider does not know, so it retries
        with self.log.lock:
            self.log.attempts += 1
            self.log.by_status[status] += 1
        return status

    def _sign(self, post: Post) -> tuple[dict[str, str], dict[str, str]]:
        now = int(time.time())
        secret = self._secrets[post.provider]
        if post.forgery == "bad-signature":
            secret = secret + "-forged"
        at = now - 3600 if post.forgery == "stale-timestamp" else now
        headers = {"Content-Type": "application/json"}
        if post.provider == "stripe":
            signed = hmac.new(secret.encode(), f"{at}.{post.body}".encode(), hashlib.sha256)
            headers["Stripe-Signature"] = f"t={at},v1={signed.hexdigest()}"
        elif post.provider == "mercadopago":
            request_id = str(uuid.uuid4())
            text = manifest(post.query.get("data.id"), request_id, str(at))
            digest = hmac.new(secret.encode(), text.encode(), hashlib.sha256).hexdigest()
            headers |= {"x-signature": f"ts={at},v1={digest}", "x-request-id": request_id}
        else:
            headers["asaas-access-token"] = secret
        return headers, post.query


def _event_id(post: Post) -> str:
    """The id ingest's envelope reads (a Mercado Pago order's notification has none of its own:
    its order's version names it)."""
    body = json.loads(post.body)
    if post.provider == "mercadopago":
        return Notification.model_validate(body).event_id
    return str(body["id"])


class Deliverer(Protocol):
    """What the schedule delivers through: `Providers`, or a fake in tests."""

    def deliver(self, post: Post) -> object: ...


class WallClock:
    """The schedule's time: the monotonic clock, and waits that end at a phase's due time or
    when a worker finishes, whichever comes first."""

    def now(self) -> float:
        return time.monotonic()

    def wait(self, turn: threading.Condition, timeout: float | None, idle: bool) -> None:
        turn.wait(timeout)


def run_stories(
    stories: Sequence[Story],
    providers: Deliverer,
    progress: Callable[[int, int], None],
    workers: int = 8,
    stories_per_second: float | None = None,
    clock: WallClock | None = None,
) -> None:
    """Deliver every story, its phases in order, up to `workers` phases at a time.

    A phase the provider sends `after_seconds` after the one before waits on a timer, not in a
    worker: a story that waits never holds up the others. Phases of stories already under way
    go before new stories. With `stories_per_second`, story n starts n / rate seconds in (a
    soak's fixed rate); otherwise all are ready at once, those that wait between phases first.
    """
    total = sum(post.copies for story in stories for post in story.posts)
    schedule = Schedule(
        stories, providers.deliver, progress, total, workers, stories_per_second, clock
    )
    schedule.run()


def _waits(story: Story) -> bool:
    return any(post.after_seconds for phase in story.phases for post in phase)


@dataclass(order=True)
class _Phase:
    key: tuple[int, float, int]
    story: int = field(compare=False)
    phase: int = field(compare=False)


class Schedule:
    """The delivery schedule of `run_stories`: timers for phases not yet due, a ready heap."""

    def __init__(
        self,
        stories: Sequence[Story],
        deliver: Callable[[Post], object],
        progress: Callable[[int, int], None],
        total: int,
        workers: int,
        stories_per_second: float | None,
        clock: WallClock | None = None,
    ) -> None:
        self._clock = clock or WallClock()
        self._stories = stories
        self._deliver = deliver
        self._progress = progress
        self._total = total
        self._workers = workers
        self._cond = threading.Condition()
        self._timers: list[tuple[float, int, int, int]] = []  # (due, sequence, story, phase)
        self._ready: list[_Phase] = []
        self._sequence = 0
        self._running = 0
        self._unfinished = len(stories)
        self._done = 0
        self._errors: list[BaseException] = []
        started = self._clock.now()
        if stories_per_second:
            for n in range(len(stories)):
                self._at(started + n / stories_per_second, n, 0)
        else:
            # All ready at once: stories that wait between phases go first, so that their waits
            # run while the others are delivered instead of after them.
            waiting_first = sorted(range(len(stories)), key=lambda n: not _waits(stories[n]))
            for n in waiting_first:
                self._at(started, n, 0)

    def _at(self, due: float, story: int, phase: int) -> None:
        delay = max((post.after_seconds for post in self._stories[story].phases[phase]), default=0)
        self._sequence += 1
        heapq.heappush(self._timers, (due + delay, self._sequence, story, phase))

    def run(self) -> None:
        with (
            ThreadPoolExecutor(self._workers, thread_name_prefix="phase") as phases,
            ThreadPoolExecutor(self._workers * 4, thread_name_prefix="post") as posts,
            self._cond,
        ):
            while self._unfinished:
                now = self._clock.now()
                while self._timers and self._timers[0][0] <= now:
                    due, sequence, story, phase = heapq.heappop(self._timers)
                    # Stories under way first (phase > 0), then by when they became due.
                    heapq.heappush(self._ready, _Phase((phase == 0, due, sequence), story, phase))
                while self._ready and self._running < self._workers:
                    ready = heapq.heappop(self._ready)
                    self._running += 1
                    phases.submit(self._run_phase, posts, ready.story, ready.phase)
                timeout = self._timers[0][0] - now if self._timers else None
                self._clock.wait(self._cond, timeout, idle=not self._running and not self._ready)
        if self._errors:
            raise self._errors[0]

    def _run_phase(self, posts: ThreadPoolExecutor, story: int, phase: int) -> None:
        copies = [p for p in self._stories[story].phases[phase] for _ in range(p.copies)]
        try:
            list(posts.map(self._deliver, copies))
        except BaseException as exc:  # noqa: BLE001 - re-raised by run(), after the others
            self._errors.append(exc)
        with self._cond:
            self._running -= 1
            self._done += len(copies)
            self._progress(self._done, self._total)
            if phase + 1 < len(self._stories[story].phases) and not self._errors:
                self._at(self._clock.now(), story, phase + 1)
            else:
                self._unfinished -= 1
            self._cond.notify()
