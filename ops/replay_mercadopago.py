"""Replaying Mercado Pago: the orders changed since a window's start (its Orders API search),
then the payments updated in the window (its payments search), each as the notification Mercado
Pago sends for it (ops/replay.py says how a replay runs)."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.mercadopago.api import BASE_URL as MERCADOPAGO_BASE_URL
from functions.mercadopago.api import MercadoPagoApi
from functions.process.messages import Message
from functions.shared.errors import MalformedEventError
from functions.shared.provider_api import get_json
from functions.shared.provider_fields import refused
from functions.statement.mercadopago import MercadoPagoPaymentsSearch
from functions.stripe.api import PLACEHOLDER  # an API credential's secret until set
from ops.replay import (
    PAGE_SIZE,
    Page,
    ReplayRefusedError,
    Resume,
    Window,
    checked_page_size,
    zoned,
)

MERCADOPAGO_PAYMENTS_SEARCH: Final = "mercadopago-payments-search"
MERCADOPAGO_ORDERS_SEARCH: Final = "mercadopago-orders-search"
# The Orders API's search spans at most 720 hours of creation dates a request; an order changed
# in a window was created in it or before it: refunds and chargebacks come weeks later.
ORDERS_SEARCH_SPAN: Final = timedelta(hours=720)
ORDERS_LOOKBACK: Final = timedelta(days=30)
ONE_MILLISECOND: Final = timedelta(milliseconds=1)  # the search's dates' precision


class _Search:
    """A search of Mercado Pago's with the access token; what it lists is kept, so that
    process's read of a listed object is the state its notification is about."""

    searched = "objects"

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
        self._page_size = checked_page_size(page_size)
        self._api = MercadoPagoApi(access_token, base_url, timeout_seconds)
        self._listed: dict[str, Mapping[str, Any]] = {}

    def _token(self) -> str:
        """The access token, read now: a search without one is refused before any read."""
        token = self._access_token()
        if not token or token == PLACEHOLDER:
            raise ReplayRefusedError(
                f"searching Mercado Pago {self.searched} needs the access token "
                "in the mercadopago/access-token secret"
            )
        return token


class MercadoPagoPayments(_Search):
    """Mercado Pago's payments search: `GET /v1/payments/search` with
    `range=date_last_updated`, `begin_date`, `end_date`, sorted by that date ascending, paged
    with `offset`/`limit` up to `paging.total`. Each payment becomes the notification Mercado
    Pago sends when a payment changes; process reads the payment itself from the API."""

    searched = "payments"

    def payment(self, payment_id: str) -> Mapping[str, Any]:
        """As listed by the search (the state the notification is about), else from the API."""
        return self._listed.get(payment_id) or self._api.payment(payment_id)

    def pages(self, window: Window) -> Iterator[Page]:
        """Checks the token now (a refusal reads nothing); the pages come as they are read."""
        return self._pages(self._token(), window)

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
    action = f"order.{order.status or 'updated'}"
    summary = {"external_reference": order.external_reference, "status": order.status}
    data = {"id": order.id, **{k: v for k, v in summary.items() if v is not None}}
    updated = order.moment("last_updated_date")
    changed = _rfc3339_text(updated) if updated else None
    user_id = "" if order.user_id is None else str(order.user_id)
    return _notification("order", action, data, changed, {}, user_id)


def _notification(
    topic: str,
    action: str,
    data: Mapping[str, Any],
    changed: str | None,
    mode: Mapping[str, Any],
    user_id: str,
) -> Message:
    """A notification of `topic`. Its id names the resource and the change
    (`replay-{id}-{change in ms}`; `replay-{id}` when the listing says no date): never a real
    notification's id, and the same change replayed twice is the same delivery."""
    event_id = f"replay-{data['id']}"
    if changed is not None:
        event_id += f"-{int(_rfc3339(changed, 'date').timestamp() * 1000)}"
    body = {
        "action": action,
        "api_version": "v1",
        "data": dict(data),
        **({"date_created": changed} if changed is not None else {}),
        "id": event_id,
        **mode,
        "type": topic,
        "user_id": user_id,
    }
    return Message("mercadopago", json.dumps(body), event_id, action)


class _ListedOrder(BaseModel):
    """What of a listed order names it and says when it changed; process reads the rest from
    the API, so an order listed without its dates is still replayed (at worst a duplicate)."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str = Field(pattern=r"^[A-Za-z0-9]{1,64}$")
    status: str | None = Field(default=None, pattern=r"^[a-z_]{1,40}$")
    external_reference: str | None = None
    user_id: str | int | None = None
    created_date: str | None = None
    last_updated_date: str | None = None

    def moment(self, field: str) -> datetime | None:
        """The date `field` holds, zoned (UTC when it names none); None when absent."""
        text = getattr(self, field)
        return None if text is None else _rfc3339(text, f"order {self.id}'s {field}")


class MercadoPagoOrders(_Search):
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

    searched = "orders"

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
        return self._pages(self._token(), begin, window)

    def _pages(self, token: str, begin: datetime, window: Window) -> Iterator[Page]:
        start = begin
        while True:
            end = min(start + ORDERS_SEARCH_SPAN, window.until)
            yield from self._span(token, start, end, window.since)
            if end >= window.until:
                return
            start = end + ONE_MILLISECOND  # both bounds are inclusive: no order read twice

    def _span(
        self, token: str, begin: datetime, end: datetime, changed_since: datetime
    ) -> Iterator[Page]:
        """The orders created in [begin, end], a page at a time (read once: an error stops
        the replay with the option that resumes it)."""
        number, seen, resume = 1, 0, Resume("--orders-created-since", _rfc3339_text(begin))
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
            if not orders:
                return
            changed = [order for order in orders if _changed_since(order, changed_since)]
            for order in changed:
                self._listed[order.id] = _listed_as_is(found, order.id)
            created = orders[-1].moment("created_date")
            if created is not None:
                resume = Resume("--orders-created-since", _rfc3339_text(created))
            yield Page(tuple(map(order_notification, changed)), resume)
            seen += len(orders)
            if seen >= total:
                return
            number += 1


def _changed_since(order: _ListedOrder, since: datetime) -> bool:
    """Changed at or after `since`; an order listed without its last change is replayed."""
    updated = order.moment("last_updated_date")
    return updated is None or updated >= since


def _orders_page(found: object) -> tuple[list[_ListedOrder], int]:
    """The orders of a search page and the search's total; MalformedEventError if the page is
    no such answer, InvalidFieldError naming the field an order lacks."""
    orders = found.get("data") if isinstance(found, Mapping) else None
    paging = found.get("paging") if isinstance(found, Mapping) else None
    if not isinstance(orders, list) or not isinstance(paging, Mapping):
        raise MalformedEventError("Mercado Pago's orders search answered no data or paging")
    try:
        total = int(paging["total"])  # a string in its answers, a number in some
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedEventError(
            f"Mercado Pago's orders search answered paging.total {paging.get('total')!r}"
        ) from exc
    try:
        return [_ListedOrder.model_validate(order) for order in orders], total
    except ValidationError as exc:
        raise refused(exc, "order", what="an order the search listed") from exc


def _listed_as_is(found: Mapping[str, Any], order_id: str) -> Mapping[str, Any]:
    return next(order for order in found["data"] if order.get("id") == order_id)


def _rfc3339(text: str, what: str) -> datetime:
    return zoned(text, what, MalformedEventError)


def _rfc3339_text(instant: datetime) -> str:
    return instant.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def replay_sources(
    payments: MercadoPagoPayments,
    orders: MercadoPagoOrders,
    window: Window,
    orders_created_since: datetime | None,
) -> list[tuple[str, Iterator[Page]]]:
    """What `replay mercadopago` reads, in turn: the orders first, then the payments. The
    payments' resume (`--since`) narrows the window the orders are looked for in too, so the
    orders are read first: once they are done, a resume of the payments loses none of them."""
    return [
        (MERCADOPAGO_ORDERS_SEARCH, orders.pages(window, orders_created_since)),
        (MERCADOPAGO_PAYMENTS_SEARCH, payments.pages(window)),
    ]
