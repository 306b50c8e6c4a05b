"""Mercado Pago's payments as its statement: every payment updated in a window, as it is now.

`GET /v1/payments/search?range=date_last_updated&begin_date=…&end_date=…&sort=date_last_updated
&criteria=asc&offset=…&limit=…` with the access token. A payment is its own books: its status,
its `refunds`, what Mercado Pago kept of it (`fee_details`, the collector's part) and what it
paid out (`transaction_details.net_received_amount`). Each payment is read as the notification
of its change is read (the same map, the same keys), and becomes lines: the payment's own
(its payment, dispute and verdict entries; its fee and net) and one per refund that moved money
(its entry; net the refund's amount, out). Pages are resumed from the last payment's
`date_last_updated`: a payment updated meanwhile moves to the end of the list, and offsets
would skip one.

An order of the Orders API is on the search through the Payments API objects its transactions
name (`reference.id`): the same keys, matched as any payment. A transaction that names none is
not on the search, so an entry an `order` notification booked under the transaction's own id is
not matched by it (`outside_payments_search`).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.mercadopago.api import BASE_URL
from functions.mercadopago.events import Interpreter
from functions.mercadopago.models import (
    MONEY_RECEIVED,
    PROVIDER,
    DisputeBooks,
    dispute_refs,
    nothing_booked,
)
from functions.mercadopago.orders import TOPIC as ORDERS_TOPIC
from functions.shared.domain import VIA_STATEMENT, Effect, Interpretation, Transition
from functions.shared.errors import MalformedEventError
from functions.shared.money import to_minor
from functions.shared.provider_api import get_json
from functions.shared.provider_fields import refused
from functions.statement.lines import Line
from functions.statement.reading import ATTEMPTS, StatementNotConfiguredError, read_page
from functions.stripe.api import PLACEHOLDER

PAGE_SIZE: Final = 100
# A payment's last update reaches the search within seconds; a window is read once its end is
# this far in the past.
SETTLE_SECONDS: Final = 300
MERCHANT_PAYS: Final = "collector"  # fee_details[].fee_payer of a fee taken from the merchant


class _Fee(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    amount: float | int | str
    fee_payer: str | None = None


class _Details(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    net_received_amount: float | int | str | None = None


class _Books(BaseModel):
    """What a payment says Mercado Pago kept and paid out."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str | int
    currency_id: str
    date_last_updated: str
    fee_details: list[_Fee] = Field(default_factory=list)
    transaction_details: _Details | None = None
    status: str


@dataclass(frozen=True)
class PaymentsPage:
    payments: tuple[Mapping[str, Any], ...]
    resume: str  # `--since` for the page after this one: the last payment's update


class MercadoPagoPaymentsSearch:
    def __init__(
        self,
        access_token: Callable[[], str],
        sleep: Callable[[float], None],
        base_url: str = BASE_URL,
        timeout_seconds: float = 10.0,
        page_size: int = PAGE_SIZE,
        attempts: int = ATTEMPTS,
    ) -> None:
        self._attempts = attempts
        self._token = access_token
        self._sleep = sleep
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout_seconds
        self._page_size = page_size

    def pages(self, since: datetime, until: datetime) -> Iterator[PaymentsPage]:
        """The payments updated in [since, until], oldest update first. Checks the token now:
        a refusal reads nothing."""
        token = self._token()
        if not token or token == PLACEHOLDER:
            raise StatementNotConfiguredError(
                "searching Mercado Pago payments needs the access token "
                "in the mercadopago/access-token secret"
            )
        return self._pages(token, since, until)

    def _pages(self, token: str, since: datetime, until: datetime) -> Iterator[PaymentsPage]:
        offset, resume = 0, None
        while True:
            query: dict[str, str | int] = {
                "range": "date_last_updated",
                "begin_date": since.isoformat(timespec="milliseconds"),
                "end_date": until.isoformat(timespec="milliseconds"),
                "sort": "date_last_updated",
                "criteria": "asc",
                "offset": offset,
                "limit": self._page_size,
            }
            url = f"{self._base_url}/v1/payments/search?{urllib.parse.urlencode(query)}"

            def search(url: str = url) -> Mapping[str, Any]:
                return get_json(url, token, self._timeout, "Mercado Pago's payments search")

            found = read_page(
                search, self._sleep, "Mercado Pago's payments search", resume, self._attempts
            )
            payments, paging = found.get("results"), found.get("paging")
            if not isinstance(payments, list) or not isinstance(paging, Mapping):
                raise MalformedEventError("Mercado Pago's payments search answered no results")
            if payments:
                resume = str(payments[-1]["date_last_updated"])
                yield PaymentsPage(tuple(payments), resume)
            offset += len(payments)
            if not payments or offset >= int(paging.get("total", 0)):
                return


def lines_of(payment: Mapping[str, Any], disputes: DisputeBooks = nothing_booked) -> list[Line]:
    """The payment's lines (see the module's doc); one unreadable line if it cannot be read."""
    payment_id = str(payment.get("id", ""))
    try:
        books = _Books.model_validate(payment)
        readings = _as_statement(Interpreter(lambda _: payment, disputes)(_notification(payment)))
        currency = books.currency_id
        fee = sum(
            to_minor(f.amount, currency, f"payment.fee_details.{n}.amount")
            for n, f in enumerate(books.fee_details)
            if f.fee_payer in (MERCHANT_PAYS, None)
        )
        net_field = "payment.transaction_details.net_received_amount"
        received = books.transaction_details and books.transaction_details.net_received_amount
        net = to_minor(received, currency, net_field) if received is not None else 0
        updated = _updated_at(books.date_last_updated)
    except ValidationError as exc:
        return [Line.unreadable_payment(PROVIDER, payment_id, str(refused(exc, "payment")))]
    except MalformedEventError as exc:
        return [Line.unreadable_payment(PROVIDER, payment_id, str(exc))]
    refunds = [r for r in readings if _is_refund(r)]
    own = tuple(r for r in readings if not _is_refund(r))
    moved = books.status in MONEY_RECEIVED
    line = Line(
        PROVIDER,
        f"payment:{payment_id}",
        "payment",
        updated,
        fee if moved else 0,
        net if moved else 0,
        currency.lower(),  # as the entries name it
        (payment_id, *dispute_refs(payment_id)),
        moves_money=moved,
        readings=own,
    )
    return [line] + [
        Line.of_refund(payment_id, refund) for refund in refunds if isinstance(refund, Effect)
    ]


def outside_payments_search(entry: Mapping[str, Any]) -> bool:
    """An entry of an order whose transaction names no Payments API object: the payments
    search cannot list it (see the module's doc)."""
    of_an_order = str(entry.get("event_type", "")).startswith(f"{ORDERS_TOPIC}.")
    return of_an_order and not str(entry.get("payment", "")).isdigit()


def payment_lines(
    payments: Sequence[Mapping[str, Any]], disputes: DisputeBooks = nothing_booked
) -> list[Line]:
    return [line for payment in payments for line in lines_of(payment, disputes)]


def _is_refund(reading: Interpretation) -> bool:
    return isinstance(reading, Effect) and reading.transition is Transition.REFUNDED


def _as_statement(readings: Sequence[Interpretation]) -> tuple[Interpretation, ...]:
    """The readings as booked from the statement, not from a delivery."""
    return tuple(replace(r, delivery=replace(r.delivery, via=VIA_STATEMENT)) for r in readings)


def _notification(payment: Mapping[str, Any]) -> str:
    """The notification Mercado Pago sends when the payment changes, naming this update (the
    same update read twice is the same statement line)."""
    updated = str(payment.get("date_last_updated", ""))
    stamp = _updated_at(updated)
    return json.dumps(
        {
            "action": "payment.updated",
            "api_version": "v1",
            "data": {"id": str(payment["id"])},
            "date_created": updated,
            "id": f"statement-{payment['id']}-{stamp}",
            "live_mode": bool(payment.get("live_mode", False)),
            "type": "payment",
        }
    )


def _updated_at(stamp: str) -> int:
    try:
        return int(datetime.fromisoformat(stamp).timestamp())
    except ValueError as exc:
        raise MalformedEventError(f"payment.date_last_updated {stamp!r} is not a date") from exc
