"""Replay a window of provider events through the webhook queue, as if delivered again.

Webhooks get lost for longer than a provider retries (an endpoint misconfigured for a day, a
secret rotated on one side only, Asaas's queue paused). The providers keep what happened:
Stripe's Events API lists the last 30 days of events, Mercado Pago's payments search the
payments updated in a window and its Orders API search the orders created in one (those
changed since the window's start are replayed), Asaas's payments list the payments created or
received on given days. A replay enqueues each on the webhook queue in the message contract
-- the body is the event (Stripe: the event object its API returned; Mercado Pago: the
notification its webhooks send for that payment or order; Asaas: the webhooks it sends for the
payment's state as listed), attributes `provider`, `event_id`, `event_type` -- plus `replay`
naming the source. It is not
signed: the API answered over TLS to our key, and process checks no signature (an Asaas
webhook's payment is read again from the API in any case). Process applies it like any
delivery: an event applied already is a duplicate, so replaying a window twice changes nothing.

Pages are enqueued as they are read. An API error stops the replay with the option that
resumes after the last page enqueued; resuming from further back only makes duplicates.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from functions.ingest.adapters import BATCH_ENTRIES
from functions.process.messages import Message
from functions.shared.errors import MalformedEventError, UmavezError
from functions.shared.provider_api import get_json
from functions.stripe import api as stripe_api
from functions.stripe.api import PLACEHOLDER  # an API credential's secret until set
from functions.stripe.events import STRIPE_EVENTS
from ops.outcomes import LedgerOutcomes, Tracked

REPLAY_ATTRIBUTE: Final = "replay"
STRIPE_EVENTS_API: Final = "stripe-events-api"
PAGE_SIZE: Final = 100  # the most each API gives per page
STRIPE_RETENTION: Final = timedelta(days=30)  # GET /v1/events lists the last 30 days
STRIPE_MAX_TYPES: Final = 20  # Stripe's limit on `types[]`
# Every event type the Stripe map reads (charge.refunded is read by the interpreter itself).
# Replayed by default: every mapped type but the two that only repeat a capture of a payment
# captured in parts (the final capture's payment_intent.succeeded, and charge.captured, carry
# the total): Stripe filters on at most 20 types a listing. `--types` lists them if needed.
CAPTURE_UPDATES: Final = frozenset({"charge.updated", "payment_intent.amount_capturable_updated"})
STRIPE_TYPES: Final = tuple(sorted({*STRIPE_EVENTS, "charge.refunded"} - CAPTURE_UPDATES))


class ReplayRefusedError(UmavezError):
    """The replay cannot be done as asked; nothing was read or enqueued."""


class ReplayInterruptedError(UmavezError):
    """The provider's API or the queue failed mid-way. What was enqueued stays enqueued and
    applies once; `resume` continues after the last page enqueued (None: from the start)."""

    def __init__(self, detail: str, enqueued: list[Tracked], resume: Resume | None) -> None:
        super().__init__(detail)
        self.enqueued = enqueued
        self.resume = resume


class ReplayPageRefusedError(UmavezError):
    """The queue took some of a page's messages and refused others (throttled, too large)."""


class BatchQueue(Protocol):
    def send_batch(self, messages: Sequence[tuple[str, Mapping[str, str]]]) -> list[str | None]:
        """Enqueue each; its message id, or None if the queue refused it. Raises
        UnavailableError when the queue could not be reached."""


@dataclass(frozen=True)
class Resume:
    """The command-line option (and its value) that continues after a page."""

    option: str
    value: str


@dataclass(frozen=True)
class Page:
    messages: tuple[Message, ...]
    resume: Resume


@dataclass(frozen=True)
class Window:
    since: datetime
    until: datetime

    @classmethod
    def parse(cls, since: str, until: str | None, now: float) -> Window:
        """ISO 8601 bounds, both inclusive; without a zone they are UTC; `until` defaults to now."""
        window = cls(
            instant(since, "--since"),
            instant(until, "--until") if until else datetime.fromtimestamp(now, tz=UTC),
        )
        if window.until < window.since:
            raise ReplayRefusedError(f"--until {until} is before --since {since}")
        return window


def instant(text: str, option: str) -> datetime:
    """The time an option gives; ReplayRefusedError naming the option when it is none."""
    return zoned(text, option, ReplayRefusedError)


def zoned(text: str, what: str, error: type[UmavezError]) -> datetime:
    """An ISO 8601 time, UTC when it names no zone; `error` naming `what` when it is none."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise error(f"{what} {text!r} is not an ISO 8601 date") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def checked_page_size(size: int) -> int:
    if not 1 <= size <= PAGE_SIZE:
        raise ReplayRefusedError(f"a page holds 1 to {PAGE_SIZE} events; {size} asked")
    return size


# -- Stripe -----------------------------------------------------------------------------------


class StripeEvents:
    """Stripe's Events API: `GET /v1/events`, the window as `created[gte]`/`created[lte]`,
    `types[]`, newest first, paged with `starting_after` while `has_more`."""

    def __init__(
        self,
        api_key: Callable[[], str],
        clock: Callable[[], float],
        base_url: str = stripe_api.BASE_URL,
        timeout_seconds: float = 10.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._api_key = api_key
        self._clock = clock
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._page_size = checked_page_size(page_size)

    def pages(
        self,
        window: Window,
        types: Sequence[str] = STRIPE_TYPES,
        starting_after: str | None = None,
    ) -> Iterator[Page]:
        """Checks the request now (a refusal reads nothing); the pages come as they are read."""
        oldest = datetime.fromtimestamp(self._clock(), tz=UTC) - STRIPE_RETENTION
        if window.since < oldest:
            raise ReplayRefusedError(
                f"Stripe keeps events for {STRIPE_RETENTION.days} days: --since "
                f"{window.since.isoformat()} is before {oldest.isoformat(timespec='seconds')}; "
                "older events can only be resent from the Stripe dashboard"
            )
        if not types or len(types) > STRIPE_MAX_TYPES:
            raise ReplayRefusedError(
                f"Stripe filters on 1 to {STRIPE_MAX_TYPES} event types; {len(types)} given "
                "(replay the others in a second run)"
            )
        key = self._api_key()
        if not key or key == PLACEHOLDER:
            raise ReplayRefusedError(
                "listing Stripe events needs an API key with Events: read "
                "in the stripe/api-key secret"
            )
        return self._pages(key, window, types, starting_after)

    def _pages(
        self, key: str, window: Window, types: Sequence[str], after: str | None
    ) -> Iterator[Page]:
        while True:
            query: list[tuple[str, str | int]] = [
                ("created[gte]", int(window.since.timestamp())),
                ("created[lte]", int(window.until.timestamp())),
                ("limit", self._page_size),
                *(("types[]", t) for t in types),
            ]
            if after:
                query.append(("starting_after", after))
            url = f"{self._base_url}/v1/events?{urllib.parse.urlencode(query)}"
            listed = get_json(url, key, self._timeout, "Stripe events API")
            events = listed.get("data")
            if not isinstance(events, list):
                raise MalformedEventError("Stripe events API answered no list")
            if events:
                after = str(events[-1]["id"])
                yield Page(tuple(map(_stripe_message, events)), Resume("--starting-after", after))
            if not listed.get("has_more") or not events:
                return


def _stripe_message(event: Mapping[str, Any]) -> Message:
    """The event object as the API returned it (same fields, same order), as JSON text."""
    return Message(
        "stripe", json.dumps(event, indent=2, ensure_ascii=False), str(event["id"]), event["type"]
    )


# -- the replay -------------------------------------------------------------------------------


class Replayer:
    """Enqueues each page's deliveries, noting first what the ledger already holds of them."""

    def __init__(self, queue: BatchQueue, ledger: LedgerOutcomes, source: str) -> None:
        self._queue = queue
        self._ledger = ledger
        self._source = source

    def replay(self, pages: Iterator[Page]) -> list[Tracked]:
        """Each page's messages in batches (ten a request); a page is done when all of its
        messages are enqueued, and a resume starts after the last page done."""
        enqueued: list[Tracked] = []
        resume: Resume | None = None
        try:
            for page in pages:
                tracked = self._ledger.track(page.messages)
                refused = 0
                # A group at a time: what a failing request leaves out was enqueued before it.
                for start in range(0, len(tracked), BATCH_ENTRIES):
                    group = tracked[start : start + BATCH_ENTRIES]
                    ids = self._queue.send_batch(
                        [(t.message.body, self._attributes(t.message)) for t in group]
                    )
                    for t, message_id in zip(group, ids, strict=True):
                        if message_id is not None:
                            t.queue_message_id = message_id
                            enqueued.append(t)
                    refused += ids.count(None)
                if refused:
                    raise ReplayPageRefusedError(
                        f"the queue refused {refused} of the page's {len(tracked)} messages"
                    )
                resume = page.resume
        except (UmavezError, ClientError, BotoCoreError) as exc:
            raise ReplayInterruptedError(str(exc), enqueued, resume) from exc
        return enqueued

    def _attributes(self, message: Message) -> dict[str, str]:
        return {
            "provider": message.provider,
            "event_id": message.event_id,
            "event_type": message.event_type,
            REPLAY_ATTRIBUTE: self._source,
        }


def replay_in_turn(
    queue: BatchQueue, ledger: LedgerOutcomes, sources: Sequence[tuple[str, Iterator[Page]]]
) -> list[Tracked]:
    """Each source's pages, one source after the other (Mercado Pago: payments, then orders);
    an interruption keeps what the sources before it enqueued, and its resume is the failing
    source's."""
    enqueued: list[Tracked] = []
    for source, pages in sources:
        try:
            enqueued += Replayer(queue, ledger, source).replay(pages)
        except ReplayInterruptedError as exc:
            raise ReplayInterruptedError(str(exc), enqueued + exc.enqueued, exc.resume) from exc
    return enqueued
