"""Replay a window of provider events through the webhook queue, as if delivered again.

Webhooks get lost for longer than a provider retries (an endpoint misconfigured for a day, a
secret rotated on one side only, Asaas's queue paused). The providers keep what happened:
Stripe's Events API lists the last 30 days of events, Mercado Pago's payments search the
payments updated in a window and its Orders API search the orders created in one (those changed
in the window are replayed), Asaas's payments list the payments created or received on given
days. A replay enqueues each on the webhook queue in the message contract -- the body is the
event (Stripe: the event object its API returned; Mercado Pago: the notification its webhooks
send for that payment or order; Asaas: the webhooks it sends for the payment's state as listed),
attributes `provider`, `event_id`, `event_type` -- plus `replay` naming the source. It is not
signed: the API answered over TLS to our key, and process checks no signature (an Asaas
webhook's payment is read again from the API in any case). Process applies it like any
delivery: an event applied already is a duplicate, so replaying a window twice changes nothing.

Pages are enqueued as they are read. An API error stops the replay with the option that
resumes after the last page enqueued; resuming from further back only makes duplicates.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Final, Protocol

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.ingest.adapters import BATCH_ENTRIES
from functions.process import stripe_api
from functions.process.asaas_api import BASE_URL as ASAAS_BASE_URL
from functions.process.asaas_api import AsaasApi
from functions.process.mercadopago_api import BASE_URL as MERCADOPAGO_BASE_URL
from functions.process.mercadopago_api import MercadoPagoApi
from functions.process.provider_api import get_json
from functions.process.stripe_api import PLACEHOLDER  # an API credential's secret until set
from functions.process.waiting import Message
from functions.shared.errors import MalformedEventError, UmavezError
from functions.shared.providers import asaas
from functions.shared.providers.fields import refused
from functions.shared.providers.stripe import STRIPE_EVENTS
from functions.statement.mercadopago import MercadoPagoPaymentsSearch
from ops.outcomes import LedgerOutcomes, Tracked

REPLAY_ATTRIBUTE: Final = "replay"
STRIPE_EVENTS_API: Final = "stripe-events-api"
MERCADOPAGO_PAYMENTS_SEARCH: Final = "mercadopago-payments-search"
MERCADOPAGO_ORDERS_SEARCH: Final = "mercadopago-orders-search"
ASAAS_PAYMENTS_LIST: Final = "asaas-payments-list"
PAGE_SIZE: Final = 100  # the most each API gives per page
STRIPE_RETENTION: Final = timedelta(days=30)  # GET /v1/events lists the last 30 days
# The Orders API's search spans at most 720 hours of creation dates a request; an order changed
# in a window was created in it or before it: refunds and chargebacks come weeks later.
ORDERS_SEARCH_SPAN: Final = timedelta(hours=720)
ORDERS_LOOKBACK: Final = timedelta(days=30)
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
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ReplayRefusedError(f"{option} {text!r} is not an ISO 8601 date") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _page_size(size: int) -> int:
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
        self._page_size = _page_size(page_size)

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


# -- Mercado Pago -----------------------------------------------------------------------------


class MercadoPagoPayments:
    """Mercado Pago's payments search: `GET /v1/payments/search` with
    `range=date_last_updated`, `begin_date`, `end_date`, sorted by that date ascending, paged
    with `offset`/`limit` up to `paging.total`. Each payment becomes the notification Mercado
    Pago sends when a payment changes; process reads the payment itself from the API."""

    def __init__(
        self,
        access_token: Callable[[], str],
        base_url: str = MERCADOPAGO_BASE_URL,
        timeout_seconds: float = 10.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._access_token = access_token
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._page_size = _page_size(page_size)
        self._api = MercadoPagoApi(access_token, base_url, timeout_seconds)
        self._listed: dict[str, Mapping[str, Any]] = {}

    def payment(self, payment_id: str) -> Mapping[str, Any]:
        """As listed by the search (the state the notification is about), else from the API."""
        return self._listed.get(payment_id) or self._api.payment(payment_id)

    def pages(self, window: Window) -> Iterator[Page]:
        """Checks the token now (a refusal reads nothing); the pages come as they are read."""
        token = self._access_token()
        if not token or token == PLACEHOLDER:
            raise ReplayRefusedError(
                "searching Mercado Pago payments needs the access token "
                "in the mercadopago/access-token secret"
            )
        return self._pages(token, window)

    def _pages(self, token: str, window: Window) -> Iterator[Page]:
        # Read once a page: an error stops the replay with the option that resumes it.
        search = MercadoPagoPaymentsSearch(
            lambda: token, time.sleep, self._base_url, self._timeout, self._page_size, attempts=1
        )
        for found in search.pages(window.since, window.until):
            for payment in found.payments:
                self._listed[str(payment["id"])] = payment
            # By `--since` rather than by offset: a payment updated meanwhile moves to the end
            # of the list, and offsets would skip one.
            yield Page(tuple(map(notification, found.payments)), Resume("--since", found.resume))


def notification(payment: Mapping[str, Any]) -> Message:
    """The notification Mercado Pago sends when a payment changes."""
    return _notification(
        "payment",
        "payment.updated",
        {"id": str(payment["id"])},
        str(payment["date_last_updated"]),
        {"live_mode": bool(payment.get("live_mode", False))},
        str(payment.get("collector_id", "")),
    )


def order_notification(order: _ListedOrder) -> Message:
    """The notification Mercado Pago sends when an order changes (topic `order`, its action
    the order's status, its data a summary of the order: process reads the order itself)."""
    action = f"order.{order.status}"
    data = {"id": order.id, "external_reference": order.external_reference, "status": order.status}
    return _notification("order", action, data, order.last_updated_date, {}, order.user_id or "")


def _notification(
    topic: str,
    action: str,
    data: Mapping[str, Any],
    updated: str,
    mode: Mapping[str, Any],
    user_id: str,
) -> Message:
    """A notification of `topic`. Its id names the resource and the update
    (`replay-{id}-{update in ms}`): never a real notification's id, and the same update
    replayed twice is the same delivery."""
    event_id = f"replay-{data['id']}-{int(datetime.fromisoformat(updated).timestamp() * 1000)}"
    body = {
        "action": action,
        "api_version": "v1",
        "data": dict(data),
        "date_created": updated,
        "id": event_id,
        **mode,
        "type": topic,
        "user_id": user_id,
    }
    return Message("mercadopago", json.dumps(body), event_id, action)


class _ListedOrder(BaseModel):
    """What of an order the search lists says when it was created and last changed."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str = Field(pattern=r"^[A-Za-z0-9]{1,64}$")
    status: str = Field(pattern=r"^[a-z_]{1,40}$")
    external_reference: str | None = None
    user_id: str | None = None
    created_date: str
    last_updated_date: str

    def created(self) -> datetime:
        return _rfc3339(self.created_date, "created_date")

    def updated(self) -> datetime:
        return _rfc3339(self.last_updated_date, "last_updated_date")


class MercadoPagoOrders:
    """Mercado Pago's Orders API search
    (https://www.mercadopago.com.br/developers/pt/reference/orders/online-payments/search/get):
    `GET /v1/orders` with `begin_date` and `end_date` (RFC 3339, at most 720 hours apart),
    `sort_by=created_date`, `sort_order=asc`, paged with `page` (from 1) and `page_size` (at
    most 100) up to `paging.total`. It filters orders by creation, not by change: the changes
    of a window are looked for in the orders created from `ORDERS_LOOKBACK` before it (or from
    `--orders-created-since`) to its end, read in spans of 720 hours, and each order last
    changed at or after the window's start becomes the notification Mercado Pago sends when an
    order changes; process reads the order from the API, as for any `order` notification.
    Resumed by creation date (`--orders-created-since`): an order created meanwhile is listed
    last, and page numbers would not skip one."""

    def __init__(
        self,
        access_token: Callable[[], str],
        base_url: str = MERCADOPAGO_BASE_URL,
        timeout_seconds: float = 10.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._access_token = access_token
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._page_size = _page_size(page_size)
        self._api = MercadoPagoApi(access_token, base_url, timeout_seconds)
        self._listed: dict[str, Mapping[str, Any]] = {}

    def order(self, order_id: str) -> Mapping[str, Any]:
        """As listed by the search (the state the notification is about), else from the API."""
        return self._listed.get(order_id) or self._api.order(order_id)

    def pages(self, window: Window, created_since: datetime | None = None) -> Iterator[Page]:
        """Checks the token and the bounds now (a refusal reads nothing); the pages come as
        they are read."""
        begin = created_since or window.since - ORDERS_LOOKBACK
        if begin > window.until:
            raise ReplayRefusedError(
                f"--orders-created-since {begin.isoformat()} is after --until "
                f"{window.until.isoformat()}"
            )
        token = self._access_token()
        if not token or token == PLACEHOLDER:
            raise ReplayRefusedError(
                "searching Mercado Pago orders needs the access token "
                "in the mercadopago/access-token secret"
            )
        return self._pages(token, begin, window)

    def _pages(self, token: str, begin: datetime, window: Window) -> Iterator[Page]:
        start = begin
        while True:
            end = min(start + ORDERS_SEARCH_SPAN, window.until)
            yield from self._span(token, start, end, window.since)
            if end >= window.until:
                return
            start = end

    def _span(
        self, token: str, begin: datetime, end: datetime, changed_since: datetime
    ) -> Iterator[Page]:
        """The orders created in [begin, end], a page at a time (read once: an error stops
        the replay with the option that resumes it)."""
        number = 1
        while True:
            query = {
                "begin_date": _rfc3339_text(begin),
                "end_date": _rfc3339_text(end),
                "sort_by": "created_date",
                "sort_order": "asc",
                "page": number,
                "page_size": self._page_size,
            }
            url = f"{self._base_url}/v1/orders?{urllib.parse.urlencode(query)}"
            found = get_json(url, token, self._timeout, "Mercado Pago's orders search")
            orders, total = _orders_page(found)
            changed = [order for order in orders if order.updated() >= changed_since]
            for order in changed:
                self._listed[order.id] = _listed_as_is(found, order.id)
            if orders:
                resume = Resume("--orders-created-since", orders[-1].created_date)
                yield Page(tuple(map(order_notification, changed)), resume)
            if len(orders) < self._page_size or number * self._page_size >= total:
                return
            number += 1


def _orders_page(found: Mapping[str, Any]) -> tuple[list[_ListedOrder], int]:
    """The orders of a search page and the search's total; MalformedEventError if the page is
    no such answer, InvalidFieldError naming the field an order lacks."""
    orders, paging = found.get("data"), found.get("paging")
    if not isinstance(orders, list) or not isinstance(paging, Mapping):
        raise MalformedEventError("Mercado Pago's orders search answered no data or paging")
    try:
        total = int(paging.get("total") or 0)  # a string in its answers, a number in some
    except (TypeError, ValueError) as exc:
        raise MalformedEventError(f"orders search paging.total {paging.get('total')!r}") from exc
    try:
        return [_ListedOrder.model_validate(order) for order in orders], total
    except ValidationError as exc:
        raise refused(exc, "order", what="an order the search listed") from exc


def _listed_as_is(found: Mapping[str, Any], order_id: str) -> Mapping[str, Any]:
    return next(order for order in found["data"] if order.get("id") == order_id)


def _rfc3339(text: str, field: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise MalformedEventError(f"an order's {field} {text!r} is not RFC 3339") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _rfc3339_text(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- Asaas ------------------------------------------------------------------------------------

# The day fields a window lists Asaas's payments by: the charges created on its days, and the
# charges received on them (`paymentDate`: a Pix, boleto or cash receipt's day, a card's credit).
ASAAS_DAY_FIELDS: Final = ("dateCreated", "paymentDate")
ASAAS_TIME_FORMAT: Final = "%Y-%m-%d %H:%M:%S"  # a webhook's `dateCreated`, Brazil's time
# The chargeback webhook Asaas sends for each chargeback status of a payment; a payment whose
# chargeback is over (its status back to received) is announced as requested: the map reads
# the verdict from `chargeback.status`.
ASAAS_CHARGEBACK_EVENTS: Final = {
    "CHARGEBACK_REQUESTED": "PAYMENT_CHARGEBACK_REQUESTED",
    "CHARGEBACK_DISPUTE": "PAYMENT_CHARGEBACK_DISPUTE",
    "AWAITING_CHARGEBACK_REVERSAL": "PAYMENT_AWAITING_CHARGEBACK_REVERSAL",
}


class AsaasPayments:
    """Asaas's payments list (https://docs.asaas.com/reference/list-payments): `GET
    /v3/payments` with `dateCreated[ge]`/`[le]` and `paymentDate[ge]`/`[le]` (days), paged with
    `offset`/`limit` (at most 100) while `hasMore`. Asaas filters payments by no update date, so
    a window is read by its whole days, in Brazil's time (UTC-3), each day twice: the payments
    created that day, then those received that day (a payment in both is replayed once a run).
    Each becomes the webhooks Asaas sends for its state as listed (`webhooks_of`); process reads
    the payment itself from the API, as for any Asaas webhook.

    Pages are resumed by day (`--since` the day's start): Asaas lists in no documented order,
    and a payment deleted meanwhile would shift the offsets after it, so a stopped day is read
    again whole (duplicates only, never a payment skipped)."""

    def __init__(
        self,
        api_key: Callable[[], str],
        base_url: str = ASAAS_BASE_URL,
        timeout_seconds: float = 10.0,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._api_key = api_key
        self._api = AsaasApi(api_key, base_url, timeout_seconds)
        self._page_size = _page_size(page_size)
        self._listed: dict[str, Mapping[str, Any]] = {}

    def payment(self, payment_id: str) -> Mapping[str, Any] | None:
        """As listed (the state the webhooks are about), else from the API."""
        return self._listed.get(payment_id) or self._api.payment(payment_id)

    def pages(self, window: Window) -> Iterator[Page]:
        """Checks the key now (a refusal reads nothing); the pages come as they are read."""
        key = self._api_key()
        if not key or key == PLACEHOLDER:
            raise ReplayRefusedError(
                "listing Asaas payments needs the API key in the asaas/api-key secret"
            )
        return self._pages(window)

    def _pages(self, window: Window) -> Iterator[Page]:
        replayed: set[str] = set()
        day, last = (
            window.since.astimezone(asaas.BRAZIL).date(),
            window.until.astimezone(asaas.BRAZIL).date(),
        )
        while day <= last:
            resume = Resume("--since", _brazil_day_start(day).isoformat())
            for field in ASAAS_DAY_FIELDS:
                for payments in self._listing(field, day):
                    fresh = [p for p in payments if p["id"] not in replayed]
                    for payment in fresh:
                        replayed.add(payment["id"])
                        self._listed[payment["id"]] = payment
                    yield Page(tuple(m for p in fresh for m in webhooks_of(p)), resume)
            day += timedelta(days=1)
            # The day is done: a stop from here on resumes at the next one.
            yield Page((), Resume("--since", _brazil_day_start(day).isoformat()))

    def _listing(self, field: str, day: date) -> Iterator[list[dict[str, Any]]]:
        """The payments whose `field` is `day`, a page at a time (read once: an error stops the
        replay with the option that resumes it)."""
        offset = 0
        while True:
            query = {
                f"{field}[ge]": day.isoformat(),
                f"{field}[le]": day.isoformat(),
                "offset": offset,
                "limit": self._page_size,
            }
            listed = self._api.get(
                f"/v3/payments?{urllib.parse.urlencode(query)}", "listing Asaas payments"
            )
            data = (listed or {}).get("data")
            if not isinstance(data, list) or not all(
                isinstance(p, dict) and isinstance(p.get("id"), str) for p in data
            ):
                raise MalformedEventError("Asaas's payments list answered no list of payments")
            if data:
                yield data
            offset += len(data)
            if not (listed or {}).get("hasMore") or not data:
                return


class _ListedRefund(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    dateCreated: str
    status: str | None = None


class _ListedChargeback(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    status: str | None = None
    disputeStartDate: str | None = None


class _ListedPayment(BaseModel):
    """What of a listed payment says which webhooks announce its state, and when."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str = Field(pattern=asaas.PAYMENT_ID)
    status: str | None = None
    deleted: bool = False
    dateCreated: str
    confirmedDate: str | None = None
    paymentDate: str | None = None
    clientPaymentDate: str | None = None
    refunds: list[_ListedRefund] | None = None
    chargeback: _ListedChargeback | None = None


def webhooks_of(payment: Mapping[str, Any]) -> tuple[Message, ...]:
    """The webhooks Asaas sends for the payment's state (each body: `id`, `event`,
    `dateCreated` and the payment as listed), which process books under the keys their
    deliveries use -- so a movement a webhook booked already is a duplicate:

    - money in (confirmed, received, in cash, and whatever came after: refunded, charged
      back): PAYMENT_CONFIRMED for a card confirmed and not yet credited, else
      PAYMENT_RECEIVED, at the start of the day it came in (its earliest of `confirmedDate`,
      `paymentDate`, `clientPaymentDate`): no later than the webhook it stands for;
    - a DONE refund: PAYMENT_REFUNDED (PAYMENT_PARTIALLY_REFUNDED while the payment is not
      refunded in full), at the newest DONE refund's `dateCreated` (each refund is booked at
      its own);
    - a chargeback: the webhook of its status, at the start of its `disputeStartDate`.

    Nothing for a payment with nothing received (pending, overdue, deleted). Each id names the
    payment, the event and its time (`replay-{payment}-{event}-{epoch}`): never a real
    webhook's, and the same state replayed twice is the same delivery."""
    try:
        listed = _ListedPayment.model_validate(payment)
    except ValidationError as exc:
        raise refused(exc, "payment") from exc
    if listed.deleted:
        return ()
    received = listed.status in asaas.MONEY_IN or listed.status == asaas.IN_CASH
    if not received:
        return ()
    days = [d for d in (listed.confirmedDate, listed.paymentDate, listed.clientPaymentDate) if d]
    came_in = _day_epoch(min(days, default=listed.dateCreated))
    announced = [
        ("PAYMENT_CONFIRMED" if listed.status == "CONFIRMED" else "PAYMENT_RECEIVED", came_in)
    ]
    done = [
        moment
        for refund in listed.refunds or []
        if refund.status == asaas.REFUND_DONE and (moment := _moment(refund.dateCreated))
    ]
    if done:
        refunded = "REFUNDED" if listed.status == "REFUNDED" else "PARTIALLY_REFUNDED"
        announced.append((f"PAYMENT_{refunded}", max(done)))
    if listed.chargeback is not None or listed.status in asaas.IN_CHARGEBACK:
        started = listed.chargeback.disputeStartDate if listed.chargeback else None
        event = ASAAS_CHARGEBACK_EVENTS.get(listed.status or "", "PAYMENT_CHARGEBACK_REQUESTED")
        announced.append((event, max(came_in, _day_epoch(started)) if started else came_in))
    return tuple(_asaas_webhook(payment, event, at) for event, at in announced)


def _asaas_webhook(payment: Mapping[str, Any], event: str, at: int) -> Message:
    event_id = f"replay-{payment['id']}-{event}-{at}"
    stamp = datetime.fromtimestamp(at, tz=asaas.BRAZIL).strftime(ASAAS_TIME_FORMAT)
    body = {"id": event_id, "event": event, "dateCreated": stamp, "payment": dict(payment)}
    return Message(asaas.PROVIDER, json.dumps(body), event_id, event)


def _brazil_day_start(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), asaas.BRAZIL)


def _day_epoch(day: str) -> int:
    """The start of a payment's day field (`YYYY-MM-DD`), Brazil's time, in epoch seconds."""
    try:
        return int(_brazil_day_start(date.fromisoformat(day[:10])).timestamp())
    except ValueError as exc:
        raise MalformedEventError(f"Asaas payment date {day!r} is not a day") from exc


def _moment(stamp: str) -> int | None:
    """An Asaas time (`YYYY-MM-DD HH:MM:SS`, Brazil's) in epoch seconds; None if it is not one
    (process refuses that refund itself)."""
    try:
        parsed = datetime.strptime(stamp, ASAAS_TIME_FORMAT).replace(tzinfo=asaas.BRAZIL)
    except ValueError:
        return None
    return int(parsed.timestamp())


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
