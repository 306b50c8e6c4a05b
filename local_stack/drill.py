"""The fire drill: deliver like providers do, then prove every guarantee from the state.

Providers deliver at least once: the same event several times at once, the same payment
announced by different event types, refunds before their payment, same-second timestamps,
resends long after, forged and stale signatures, and the incident (ingest answering after the
provider's timeout, so the provider retries while the first delivery is still in flight).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

from functions.ingest.providers.mercadopago import manifest
from functions.shared import books
from functions.shared.domain import COUNTED_OUTCOMES, Outcome, financial_status
from local_stack.stories import Post, Story

PROVIDER_TIMEOUT_SECONDS = 3.0
INCIDENT_TIMEOUT_SECONDS = 0.15
INCIDENT_DELAY_SECONDS = 0.4
PROVIDER_ATTEMPTS = 4


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class DeliveryLog:
    """What the simulated providers saw."""

    attempts: int = 0
    by_status: Counter[int] = field(default_factory=Counter)
    retries: int = 0
    forged: list[tuple[str, list[int]]] = field(default_factory=list)
    accepted_event_ids: set[str] = field(default_factory=set)
    # Answered 200 with `ignored` (the other payment mode): acknowledged, never enqueued.
    ignored_event_ids: set[str] = field(default_factory=set)
    other_mode_event_ids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Providers:
    """Signs and posts like Stripe, Mercado Pago and Asaas; retries like them on a timeout/5xx."""

    def __init__(self, base_url: str, secrets: dict[str, str], log: DeliveryLog) -> None:
        self._base_url = base_url.rstrip("/")
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
    return str(json.loads(post.body)["id"])


def run_stories(
    stories: Sequence[Story],
    providers: Providers,
    progress: Callable[[int, int], None],
    workers: int = 8,
) -> None:
    total = sum(post.copies for story in stories for post in story.posts)
    done = 0
    lock = threading.Lock()

    def tick(count: int) -> None:
        nonlocal done
        with lock:
            done += count
            progress(done, total)

    def run(story: Story) -> None:
        with ThreadPoolExecutor(max_workers=8) as phase_pool:
            for phase in story.phases:
                time.sleep(max((post.after_seconds for post in phase), default=0))
                copies = [post for post in phase for _ in range(post.copies)]
                list(phase_pool.map(providers.deliver, copies))
                tick(len(copies))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(run, stories))


class ProgressBar:
    """A bar redrawn in place on a terminal; anywhere else (a file, a pipe, a CI log) a plain
    line every `every_seconds` and one at the end, never a carriage return."""

    def __init__(
        self,
        stream: TextIO = sys.stderr,
        width: int = 40,
        every_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._width = width
        self._every = every_seconds
        self._clock = clock
        self._tty = _isatty(stream)
        self._started: float | None = None
        self._last_line = -float("inf")
        self._finished = False

    def __call__(self, done: int, total: int) -> None:
        now = self._clock()
        if self._started is None:
            self._started = now
        if self._finished:
            return
        self._finished = done >= total
        if self._tty:
            filled = int(self._width * done / max(total, 1))
            self._stream.write(
                f"\r  delivering [{'#' * filled}{'.' * (self._width - filled)}] {done}/{total}"
            )
            if self._finished:
                self._stream.write("\n")
        elif self._finished or now - self._last_line >= self._every:
            self._last_line = now
            share = 100 * done // max(total, 1)
            self._stream.write(
                f"  delivered {done}/{total} ({share}%), {now - self._started:.0f} s\n"
            )
        self._stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def check_state(stories: Sequence[Story], state: Any, log: DeliveryLog) -> list[Check]:
    """Every guarantee of DESIGN.md section 2, judged from the tables."""
    checks: list[Check] = []
    twice, lost, extra, wrong_status, wrong_totals, unbalanced = [], [], [], [], [], []
    stale_off, outbox_off, credited_twice = [], [], []
    conflicts = {d.get("order_id") for d in state.deliveries if d.get("outcome") == "conflict"}
    for story in stories:
        order_id = story.order_id
        if other := story.conflicting_order:
            # Processing is asynchronous: whichever order's event was processed first is bound.
            if other in conflicts and order_id not in conflicts:
                pass
            elif order_id in conflicts and other not in conflicts:
                order_id, other = other, order_id
            won = state.orders.get(other)
            if other not in conflicts or (won and won.effects):
                credited_twice.append(f"{story.order_id} / {story.conflicting_order}")
        view = state.orders.get(order_id)
        effects = view.effects if view else []
        counted = [e for e in effects if e["outcome"] in COUNTED_OUTCOMES]
        seen = Counter((e["transition"], e["external_ref"]) for e in counted)
        twice += [f"{story.order_id} {k}" for k, n in seen.items() if n > 1]
        lost += [f"{story.order_id} {k}" for k in story.expected.effects - set(seen)]
        possible = story.expected.effects | story.expected.either_way
        extra += [f"{story.order_id} {k}" for k in set(seen) - possible]
        order = view.order if view else {}
        status = financial_status(order) if order else None
        if status != story.expected.status:
            wrong_status.append(
                f"{story.order_id} ({story.kind}): {status} != {story.expected.status}"
            )
        totals = {name: int(order.get(name, 0) or 0) for name in story.expected.totals}
        if totals != story.expected.totals or order.get("currency") != story.expected.currency:
            wrong_totals.append(
                f"{story.order_id} ({story.kind}): {_nonzero(totals)} {order.get('currency')} "
                f"!= {_nonzero(story.expected.totals)} {story.expected.currency}"
            )
        if order:
            unbalanced += [
                f"{m.order_id} {m.detail}" for m in books.unbalanced_totals(order, effects)
            ]
        stale = sum(e["outcome"] == Outcome.STALE.value for e in effects)
        low, high = story.expected.stale
        if not low <= stale <= high:
            stale_off.append(f"{story.order_id} ({story.kind}): {stale} stale")
        outbox_off += _announcements_off(story.order_id, counted, view.outbox if view else [])
    checks += [
        Check("no effect applied twice", not twice, _summary(twice)),
        Check("no legitimate effect lost", not lost, _summary(lost)),
        Check("nothing counted that did not happen", not extra, _summary(extra)),
        Check(
            "financial status is what the history implies", not wrong_status, _summary(wrong_status)
        ),
        Check(
            "totals follow the history, in minor units", not wrong_totals, _summary(wrong_totals)
        ),
        Check("totals equal the signed sum of the entries", not unbalanced, _summary(unbalanced)),
        Check("stale events recorded, status kept", not stale_off, _summary(stale_off)),
        Check(
            "every money movement announced once (late ones flagged)",
            not outbox_off,
            _summary(outbox_off),
        ),
        Check(
            "one payment, one order: a second claim is a recorded conflict",
            not credited_twice,
            _summary(credited_twice),
        ),
    ]
    forged_accepted = [eid for eid, statuses in log.forged if statuses[-1] != 401]
    recorded = {d["event_id"] for d in state.deliveries} | {
        e["event_id"] for v in state.orders.values() for e in v.effects
    }
    forged_recorded = [eid for eid, _ in log.forged if eid in recorded]
    checks.append(
        Check(
            "forged and stale signatures refused, nothing enqueued",
            not forged_accepted and not forged_recorded,
            f"{len(log.forged)} refused"
            if not (forged_accepted or forged_recorded)
            else _summary(forged_accepted + forged_recorded),
        )
    )
    other_mode_applied = sorted(log.other_mode_event_ids & recorded)
    not_acknowledged = sorted(log.other_mode_event_ids - log.ignored_event_ids)
    checks.append(
        Check(
            "events of the other payment mode acknowledged (200), never applied",
            not other_mode_applied and not not_acknowledged,
            f"{len(log.other_mode_event_ids)} live-mode events ignored"
            if not (other_mode_applied or not_acknowledged)
            else f"applied {other_mode_applied[:3]}, not acknowledged {not_acknowledged[:3]}",
        )
    )
    return checks


def _announcements_off(
    order_id: str, counted: list[dict[str, Any]], outbox: list[dict[str, Any]]
) -> list[str]:
    """One outbox item per counted entry, flagged late exactly when the entry was stale."""
    late = {e["effect_key"]: e["outcome"] == Outcome.STALE.value for e in counted}
    items = Counter(i["effect_key"] for i in outbox)
    problems = [f"{order_id} {k[:12]}: {items[k]} items" for k in late if items[k] != 1]
    problems += [f"{order_id} {k[:12]}: not counted" for k in items if k not in late]
    problems += [
        f"{order_id} {i['effect_key'][:12]}: late={i.get('late')}"
        for i in outbox
        if i["effect_key"] in late and bool(i.get("late")) != late[i["effect_key"]]
    ]
    return problems


def _nonzero(totals: dict[str, int]) -> dict[str, int]:
    return {name.removesuffix("_total"): n for name, n in totals.items() if n}


def _summary(problems: list[str]) -> str:
    if not problems:
        return "ok"
    return f"{len(problems)}: " + "; ".join(problems[:3]) + (" ..." if len(problems) > 3 else "")


def render(checks: Sequence[Check], facts: dict[str, Any], stream: TextIO = sys.stdout) -> None:
    width = max(len(c.name) for c in checks) + 2
    stream.write("\n  fire drill\n  " + "-" * (width + 50) + "\n")
    for name, value in facts.items():
        stream.write(f"  {name:<{width}}{value}\n")
    stream.write("  " + "-" * (width + 50) + "\n")
    for check in checks:
        mark = "PASS" if check.ok else "FAIL"
        stream.write(f"  {mark}  {check.name:<{width}}{check.detail}\n")
    verdict = "every guarantee held" if all(c.ok for c in checks) else "GUARANTEES VIOLATED"
    stream.write("  " + "-" * (width + 50) + f"\n  {verdict}\n")
