"""Asaas's statement: the account's financial transactions, and the payments they name.

`GET /v3/financialTransactions?startDate=YYYY-MM-DD&finishDate=YYYY-MM-DD&offset=…&limit=…
&order=asc` with the API key in `access_token` ("Recuperar extrato": every movement of the
account's balance, "for reconciliation"). A line is a day's movement (`date`, Brazil's day) with
its signed `value`, its `type` and, for a payment's money (its receipt, Asaas's fee on it, a
refund, a chargeback), the `paymentId` it belongs to. The statement names the payment only, so
each payment it names is read from `GET /v3/payments/{id}` -- as its webhooks are -- and books
what it moved: its receipt, its DONE refunds, its chargeback (`statement_readings`, the
webhooks' keys). Its lines here: the payment's own (its receipt and chargeback entries; the fee
Asaas kept, `value - netValue`, and the net), one per refund (net: the refund, out), and one per
chargeback line of the statement (`CHARGEBACK`, the disputed value blocked; `CHARGEBACK_REVERSAL`,
given back): they book no entry (the payment's line books the dispute) and move its net.

A card payment is confirmed on the day it is made and credited about 30 days later: its
statement line comes then. An entry the statement does not show yet is asked of the API
(`known`): a payment Asaas does not know, or that shows no such movement, is unknown to it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, datetime, time
from functools import cache
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.asaas.api import AsaasApi
from functions.asaas.events import statement_readings
from functions.asaas.models import BRAZIL, CURRENCY, PROVIDER
from functions.shared.domain import VIA_STATEMENT, Delivery, Effect, Transition
from functions.shared.errors import MalformedEventError
from functions.shared.money import to_minor
from functions.shared.provider_fields import refused
from functions.statement.lines import Line
from functions.statement.reading import read_page

PAGE_SIZE: Final = 100  # the most Asaas lists a page
# Payments a read asks for at once: a day names thousands, each a quarter second away; Asaas
# answers 50 GETs of an account at once (API Limits), which process's reads share.
PAYMENT_READERS: Final = 8
STATEMENT_EVENT: Final = "financialTransaction"  # the event type prefix of a statement line
# A chargeback blocks the disputed value on its day, and gives it back if reversed for the
# merchant: the payment's net moves by each line.
CHARGEBACK_LINES: Final = frozenset({"CHARGEBACK", "CHARGEBACK_REVERSAL"})
# A movement's line is on its day's statement once it happened; a window is read once its end is
# this far in the past. A card payment's line comes a month later: `known` answers for it.
SETTLE_SECONDS: Final = 300


class FinancialTransaction(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str = Field(min_length=1)
    value: float | int | str
    type: str
    date: str
    paymentId: str | None = None


class _Net(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    value: float | int | str
    netValue: float | int | str | None = None


@dataclass(frozen=True)
class TransactionsPage:
    transactions: tuple[FinancialTransaction, ...]
    resume: str  # `--since` for the page after this one: the last line's day


class AsaasStatement:
    def __init__(
        self,
        api: AsaasApi,
        sleep: Callable[[float], None],
        page_size: int = PAGE_SIZE,
    ) -> None:
        self._api = api
        self._sleep = sleep
        self._page_size = page_size

    def pages(self, first_day: date, last_day: date) -> Iterator[TransactionsPage]:
        """The lines dated first_day .. last_day, oldest first."""
        offset, resume = 0, None
        while True:
            query = {
                "startDate": first_day.isoformat(),
                "finishDate": last_day.isoformat(),
                "offset": offset,
                "limit": self._page_size,
                "order": "asc",
            }
            path = f"/v3/financialTransactions?{urllib.parse.urlencode(query)}"

            def listed(path: str = path) -> Mapping[str, Any]:
                return self._api.get(path, "reading Asaas's statement") or {}

            found = read_page(listed, self._sleep, "Asaas's statement", resume)
            data = found.get("data")
            if not isinstance(data, list):
                raise MalformedEventError("Asaas's statement answered no list")
            try:
                lines = tuple(FinancialTransaction.model_validate(line) for line in data)
            except ValidationError as exc:
                raise refused(exc, "data", "not an Asaas financial transaction") from exc
            if lines:
                resume = lines[-1].date
                yield TransactionsPage(lines, resume)
            offset += len(lines)
            if not found.get("hasMore") or not lines:
                return


def payments_read(
    payment: Callable[[str], Mapping[str, Any] | None],
    sleep: Callable[[float], None],
    transactions: Sequence[FinancialTransaction],
    readers: int = PAYMENT_READERS,
) -> Callable[[str], Mapping[str, Any] | None]:
    """Each payment the lines name, read `readers` at a time, each tried again as a page is
    (raises StatementInterruptedError when the API kept failing: nothing is booked then); what
    the lines and the match read a payment through afterwards, each payment read once a read
    (https://docs.asaas.com/docs/api-limits-1: the account's requests are its quota)."""

    @cache
    def read(payment_id: str) -> Mapping[str, Any] | None:
        return read_page(lambda: payment(payment_id), sleep, f"Asaas's payment {payment_id}", None)

    named = list(dict.fromkeys(t.paymentId for t in transactions if t.paymentId))
    with ThreadPoolExecutor(readers, thread_name_prefix="asaas-payment") as pool:
        for _ in pool.map(read, named):
            pass
    return read


def statement_lines(
    transactions: Sequence[FinancialTransaction],
    payment: Callable[[str], Mapping[str, Any] | None],
) -> list[Line]:
    """Each payment the lines name, read from the API, as its lines (see the module's doc)."""
    first_day: dict[str, str] = {}
    for line in transactions:
        if line.paymentId:
            first_day.setdefault(line.paymentId, line.date)
    own = [
        line
        for payment_id, day in first_day.items()
        for line in lines_of(payment_id, payment(payment_id), day)
    ]
    return own + [line for line in map(_withdrawal_line, transactions) if line is not None]


def _withdrawal_line(transaction: FinancialTransaction) -> Line | None:
    """A chargeback's block of the payment's money (`CHARGEBACK`), or its return to the
    merchant (`CHARGEBACK_REVERSAL`): money moved on the day of its line, whose entry the
    payment's own line books (the payment says whether the chargeback is open, won or lost)."""
    if transaction.type not in CHARGEBACK_LINES or not transaction.paymentId:
        return None
    payment_id = transaction.paymentId
    try:
        created = _day_start(transaction.date)
        net = _signed_minor(transaction.value, "financialTransaction.value")
    except MalformedEventError as exc:
        return Line.unreadable_payment(PROVIDER, payment_id, str(exc))
    return Line(
        PROVIDER,
        f"transaction:{transaction.id}",
        "chargeback",
        created,
        0,
        net,
        CURRENCY,
        (f"{payment_id}:chargeback",),
        net_of=payment_id,
    )


def lines_of(payment_id: str, answered: Mapping[str, Any] | None, day: str) -> list[Line]:
    """The lines of a payment the statement names, as the API answers it."""
    if answered is None:
        return [
            Line.unreadable_payment(
                PROVIDER, payment_id, f"the statement names {payment_id}; Asaas does not know it"
            )
        ]
    try:
        created = _day_start(day)
        delivery = Delivery(
            PROVIDER,
            f"statement-{payment_id}-{day}",
            f"{STATEMENT_EVENT}.{day}",
            created,
            via=VIA_STATEMENT,
        )
        readings = statement_readings(answered, delivery)
        net = _Net.model_validate(answered)
        gross = to_minor(net.value, CURRENCY, "payment.value")
        paid_out = (
            gross if net.netValue is None else to_minor(net.netValue, CURRENCY, "payment.netValue")
        )
    except ValidationError as exc:
        return [Line.unreadable_payment(PROVIDER, payment_id, str(refused(exc, "payment")))]
    except MalformedEventError as exc:
        return [Line.unreadable_payment(PROVIDER, payment_id, str(exc))]
    refunds = [r for r in readings if isinstance(r, Effect) and r.transition is Transition.REFUNDED]
    own = tuple(r for r in readings if r not in refunds)
    lines = [
        Line(
            PROVIDER,
            f"payment:{payment_id}",
            "payment",
            created,
            gross - paid_out if own else 0,
            paid_out if own else 0,
            CURRENCY,
            (payment_id, f"{payment_id}:chargeback"),
            moves_money=bool(readings),
            readings=own,
        )
    ]
    return lines + [Line.of_refund(payment_id, refund) for refund in refunds]


def known_to_asaas(
    payment: Callable[[str], Mapping[str, Any] | None],
) -> Callable[[Mapping[str, Any]], bool]:
    """Whether the payment an entry names shows, as the API answers it now, the movement the
    entry counted (same key, same amount): for an entry the statement does not list yet."""

    def known(entry: Mapping[str, Any]) -> bool:
        payment_id = str(entry.get("payment") or "")
        answered = payment(payment_id) if payment_id.startswith("pay_") else None
        if answered is None:
            return False
        if f"{payment_id}:cash" in str(entry["external_ref"]):
            # A receipt in cash moves nothing through Asaas (no line, ever): the merchant marked
            # it at Asaas, whose payment knew it (received, or undone since).
            return True
        delivery = Delivery(PROVIDER, f"check-{payment_id}", STATEMENT_EVENT, 0)
        try:
            readings = statement_readings(answered, delivery)
        except MalformedEventError:
            return False
        return any(
            isinstance(r, Effect)
            and r.transition.value == entry["transition"]
            and r.external_ref == entry["external_ref"]
            and r.amount.minor == int(entry["amount"])
            for r in readings
        )

    return known


def _signed_minor(value: float | int | str, field: str) -> int:
    """A statement line's signed value in minor units (money out is negative)."""
    text = str(value).strip()
    if text.startswith("-"):
        return -to_minor(text[1:], CURRENCY, field)
    return to_minor(value, CURRENCY, field)


def _day_start(day: str) -> int:
    try:
        return int(datetime.combine(date.fromisoformat(day), time(), BRAZIL).timestamp())
    except ValueError as exc:
        raise MalformedEventError(f"financial transaction date {day!r} is not a day") from exc
