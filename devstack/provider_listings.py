"""The fake providers' lists, searches and pages (`devstack/provider_apis.py` serves them): what
each provider filters by, how it sorts, and how it pages its answers (Stripe: newest first,
`limit`, `starting_after`, `has_more`; Asaas: `offset`, `limit`, `hasMore`; Mercado Pago's
searches: by offset, or by page with its numbers as strings).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

Query = dict[str, list[str]]
# The Orders API's search spans at most this many hours of creation dates.
ORDERS_SEARCH_SPAN = timedelta(hours=720)
# The bounds of a list filter on a day field, as Asaas names them (`paymentDate[ge]`).
_DAY_BOUNDS: dict[str, Callable[[str, str], bool]] = {"ge": operator.ge, "le": operator.le}
_DAY_FILTER = re.compile(r"^(\w+)\[(ge|le)\]$")
_CREATED_BOUNDS: dict[str, Callable[[int, int], bool]] = {
    "gte": operator.ge,
    "gt": operator.gt,
    "lte": operator.le,
    "lt": operator.lt,
}


def balance_page(
    lines: Iterable[dict[str, Any]], objects: Mapping[str, dict[str, Any]], query: Query
) -> dict[str, Any]:
    """The lines in the `created` bounds, newest first; `source` expanded when asked."""
    expand = "data.source" in query.get("expand[]", [])

    def as_listed(line: dict[str, Any]) -> dict[str, Any]:
        source = line.get("source")
        if expand and isinstance(source, str) and source in objects:
            return {**line, "source": objects[source]}
        if not expand and isinstance(source, dict):
            return {**line, "source": source["id"]}
        return line

    within = [
        line
        for line in lines
        if all(
            holds(int(line["created"]), int(bound))
            for name, holds in _CREATED_BOUNDS.items()
            if (bound := first_of(query, f"created[{name}]")) is not None
        )
    ]
    listed = sorted(within, key=lambda line: (-int(line["created"]), line["id"]))
    return _stripe_page([as_listed(line) for line in listed], query, "/v1/balance_transactions")


def asaas_payment_list(payments: Iterable[dict[str, Any]], query: Query) -> dict[str, Any]:
    """The payments not deleted whose day fields (`dateCreated`, `paymentDate`, ...: the
    day, `YYYY-MM-DD`) are within every `field[ge]`/`field[le]` bound asked; a payment
    without that field is outside them."""
    bounds = [
        (matched.group(1), _DAY_BOUNDS[matched.group(2)], values[0])
        for name, values in query.items()
        if (matched := _DAY_FILTER.match(name))
    ]
    within = [
        payment
        for payment in payments
        if not payment.get("deleted")
        and all(
            payment.get(field) is not None and holds(str(payment[field])[:10], bound)
            for field, holds, bound in bounds
        )
    ]
    return asaas_page(within, query)


def asaas_statement(lines: Iterable[dict[str, Any]], query: Query) -> dict[str, Any]:
    """The lines dated startDate .. finishDate (days, inclusive), oldest first."""
    first, last = first_of(query, "startDate") or "", first_of(query, "finishDate") or "9999"
    within = sorted(
        (t for t in lines if first <= str(t["date"]) <= last),
        key=lambda t: (str(t["date"]), str(t["id"])),
    )
    return asaas_page(within, query)


def refund_page(refunds: Mapping[str, list[dict[str, Any]]], query: Query) -> dict[str, Any]:
    of_charge = refunds.get(first_of(query, "charge") or "", [])
    return _stripe_page(of_charge, query, "/v1/refunds")


def event_page(events: Iterable[dict[str, Any]], query: Query) -> dict[str, Any]:
    """Events in the `created` bounds, of the `types[]` (or `type`) asked, newest first."""
    types = set(query.get("types[]", []) + query.get("type", []))

    def wanted(event: dict[str, Any]) -> bool:
        created = int(event["created"])
        for name, holds in _CREATED_BOUNDS.items():
            bound = first_of(query, f"created[{name}]")
            if bound is not None and not holds(created, int(bound)):
                return False
        return not types or event["type"] in types

    listed = sorted(filter(wanted, events), key=lambda e: -int(e["created"]))
    return _stripe_page(listed, query, "/v1/events")


def payment_search(payments: Iterable[dict[str, Any]], query: Query) -> dict[str, Any]:
    """Payments whose `range` date is within [begin_date, end_date], sorted, offset-paged."""
    field = first_of(query, "range") or "date_created"
    begin, end = first_of(query, "begin_date"), first_of(query, "end_date")
    found = [
        p
        for p in payments
        if (begin is None or _instant(begin) <= _instant(p[field]))
        and (end is None or _instant(p[field]) <= _instant(end))
    ]
    sort = first_of(query, "sort") or "date_created"
    found.sort(key=lambda p: _instant(p[sort]), reverse=first_of(query, "criteria") == "desc")
    offset, limit = int(first_of(query, "offset") or 0), int(first_of(query, "limit") or 30)
    return {
        "paging": {"total": len(found), "limit": limit, "offset": offset},
        "results": found[offset : offset + limit],
    }


def order_search(orders: Iterable[dict[str, Any]], query: Query) -> tuple[int, dict[str, Any]]:
    """Orders created within [begin_date, end_date] (both required, zoned, at most 720
    hours apart, the start not in the future), sorted by `sort_by` (`created_date` or
    `last_updated_date`; `sort_order` `asc` or `desc`, `desc` unless asked), paged by
    `page` (from 1) and `page_size` (20 unless asked, at most 100); 400 with Mercado Pago's
    codes otherwise. Paging's numbers are strings, as its answers have them."""
    begin, end = first_of(query, "begin_date"), first_of(query, "end_date")
    if begin is None or end is None:
        return 400, {"code": "missing_required_params", "message": "begin_date, end_date"}
    sort = first_of(query, "sort_by") or "created_date"
    order = first_of(query, "sort_order") or "desc"
    try:
        since, until = zoned(begin), zoned(end)
        number, size = int(first_of(query, "page") or 1), int(first_of(query, "page_size") or 20)
    except (ValueError, OverflowError):
        return 400, {"code": "invalid_parameter", "message": "dates or paging"}
    if not (
        since <= until <= since + ORDERS_SEARCH_SPAN
        and since <= datetime.now(UTC)
        and number >= 1
        and 1 <= size <= 100
        and sort in ("created_date", "last_updated_date")
        and order in ("asc", "desc")
    ):
        return 400, {"code": "invalid_parameter", "message": "dates, paging or sorting"}
    found = sorted(
        (o for o in orders if since <= zoned(o["created_date"]) <= until),
        key=lambda o: zoned(o[sort]),
        reverse=order == "desc",
    )
    pages = -(-len(found) // size)
    return 200, {
        "data": found[(number - 1) * size : number * size],
        "paging": {
            "total": str(len(found)),
            "total_pages": str(pages),
            "offset": str((number - 1) * size),
            "limit": str(size),
        },
    }


def first_of(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def zoned(stamp: str) -> datetime:
    """An ISO 8601 time with its zone; ValueError without one."""
    moment = datetime.fromisoformat(stamp)
    if moment.tzinfo is None:
        raise ValueError(f"{stamp!r} names no time zone")
    return moment


def asaas_page(items: Sequence[dict[str, Any]], query: Query) -> dict[str, Any]:
    """A list as Asaas pages one: `offset`, `limit` (10 unless asked), `hasMore`."""
    offset, limit = int(first_of(query, "offset") or 0), int(first_of(query, "limit") or 10)
    return {
        "object": "list",
        "hasMore": offset + limit < len(items),
        "totalCount": len(items),
        "limit": limit,
        "offset": offset,
        "data": list(items[offset : offset + limit]),
    }


def _stripe_page(items: Sequence[dict[str, Any]], query: Query, url: str) -> dict[str, Any]:
    limit = int(first_of(query, "limit") or 10)
    after = first_of(query, "starting_after")
    start = next((n + 1 for n, item in enumerate(items) if item["id"] == after), 0)
    return {
        "object": "list",
        "data": list(items[start : start + limit]),
        "has_more": start + limit < len(items),
        "url": url,
    }
