"""The Orders API search as `replay mercadopago` reads it, against canned answers: every order
listed becomes its notification however little the listing says of it, a page that is no
answer stops the replay, and the spans of 720 hours never overlap."""

from __future__ import annotations

import itertools
import json
import urllib.parse
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from functions.shared.errors import MalformedEventError
from ops import replay_mercadopago
from ops.replay import Window
from ops.replay_mercadopago import ORDERS_SEARCH_SPAN, MercadoPagoOrders

START = datetime(2026, 11, 1, tzinfo=UTC)


class CannedSearch:
    """Answers each search with the next canned page, and keeps the queries asked."""

    def __init__(self, *pages: Mapping[str, Any]) -> None:
        self.pages = list(pages)
        self.queries: list[dict[str, str]] = []

    def __call__(self, url: str, *_: Any, **__: Any) -> Mapping[str, Any]:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
        self.queries.append({name: values[0] for name, values in query.items()})
        return self.pages.pop(0) if self.pages else {"data": [], "paging": {"total": "0"}}


def replayed(search: CannedSearch, window: Window, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    monkeypatch.setattr(replay_mercadopago, "get_json", search)
    orders = MercadoPagoOrders(lambda: "APP_USR-test-not-real", "https://api.example.com")
    return [m for page in orders.pages(window, created_since=window.since) for m in page.messages]


def test_an_order_listed_without_its_dates_or_their_zone_is_still_notified(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a search listing an order without dates and one whose dates name no zone
    listed = [
        {"id": "ORD01BARE", "status": "processed"},
        {
            "id": "ORD01NAIVE",
            "status": "refunded",
            "created_date": "2026-11-01T10:00:00.000",
            "last_updated_date": "2026-11-01T12:00:00.000",
        },
    ]
    search = CannedSearch({"data": listed, "paging": {"total": "2"}})

    # When the window is replayed
    messages = replayed(search, Window(START, START + timedelta(days=1)), monkeypatch)

    # Then both are notified (process reads each order from the API): the one without dates
    # named by its order alone, the other stamped in UTC, as process reads a moment
    bodies = [json.loads(m.body) for m in messages]
    assert [m.event_id for m in messages] == [
        "replay-ORD01BARE",
        f"replay-ORD01NAIVE-{int(datetime(2026, 11, 1, 12, tzinfo=UTC).timestamp() * 1000)}",
    ]
    assert "date_created" not in bodies[0]
    assert bodies[1]["date_created"] == "2026-11-01T12:00:00.000Z"
    assert [(b["type"], b["action"]) for b in bodies] == [
        ("order", "order.processed"),
        ("order", "order.refunded"),
    ]


@pytest.mark.parametrize("paging", [{}, {"total": "many"}, {"total": None}])
def test_a_page_without_a_readable_total_stops_the_replay(
    paging: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a search whose page gives no total it can be paged by
    search = CannedSearch({"data": [{"id": "ORD01A"}], "paging": paging})

    # When the window is replayed, Then it stops as on any answer that is none
    with pytest.raises(MalformedEventError, match=r"paging\.total"):
        replayed(search, Window(START, START + timedelta(days=1)), monkeypatch)


def test_a_long_window_is_read_in_spans_of_720_hours_that_never_overlap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a window of 61 days
    search = CannedSearch()
    window = Window(START, START + timedelta(days=61))

    # When it is replayed
    replayed(search, window, monkeypatch)

    # Then three searches cover it end to end, each at most 720 hours, none sharing an instant
    spans = [
        (datetime.fromisoformat(q["begin_date"]), datetime.fromisoformat(q["end_date"]))
        for q in search.queries
    ]
    assert len(spans) == 3
    assert spans[0][0] == window.since
    assert spans[-1][1] == window.until
    assert all(end - begin <= ORDERS_SEARCH_SPAN for begin, end in spans)
    assert all(
        later[0] == earlier[1] + timedelta(milliseconds=1)
        for earlier, later in itertools.pairwise(spans)
    )
