"""Delivering like the providers do: signed at send time, several copies at once, retried on a
timeout or a 5xx, answered late where a story plays the incident; and what they saw."""

from __future__ import annotations

import hashlib
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

from firedrill.stories import Post, Story
from functions.ingest.providers.mercadopago import manifest

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
