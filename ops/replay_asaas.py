"""Replaying Asaas: the payments created or received on a window's days (its payments list),
each as the webhooks Asaas sends for its state (ops/replay.py says how a replay runs)."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from datetime import date, datetime, timedelta
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.asaas import models as asaas
from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
from functions.asaas.api import AsaasApi
from functions.process.messages import Message
from functions.shared.errors import MalformedEventError
from functions.shared.provider_fields import refused
from functions.stripe.api import PLACEHOLDER  # an API credential's secret until set
from ops.replay import PAGE_SIZE, Page, ReplayRefusedError, Resume, Window, checked_page_size

ASAAS_PAYMENTS_LIST: Final = "asaas-payments-list"

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
        self._page_size = checked_page_size(page_size)
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
