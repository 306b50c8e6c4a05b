"""The providers' REST APIs that process and the operator's `umavez replay` read, on loopback,
each with its own bearer token:

- Mercado Pago `GET /v1/payments/{id}` (the payment a notification names),
  `GET /v1/orders/{id}` (an order of its Orders API, with its transactions),
  `GET /v1/orders?begin_date=…&end_date=…&sort_by=…&sort_order=…&page=…&page_size=…` (the
  orders created in a window of at most 720 hours, 400 for what Mercado Pago refuses,
  answered `{"data": [...], "paging": {"total", "total_pages", "offset", "limit"}}`, numbers
  as strings) and
  `GET /v1/payments/search?range=…&begin_date=…&end_date=…&sort=…&criteria=…&offset=…&limit=…`
  (answered `{"paging": {"total", "limit", "offset"}, "results": [...]}`; dates in ISO 8601);
- Stripe `GET /v1/refunds?charge=…` (a charge's refunds) and
  `GET /v1/events?created[gte]=…&created[lte]=…&types[]=…` (the events of a window), both paged
  as Stripe pages lists: newest first, `limit`, `starting_after`, `has_more`;
- Stripe `GET /v1/balance_transactions?created[gte]=…&created[lt]=…&expand[]=data.source`
  (the balance's lines of a window, paged as above; `source` expanded when asked, from the
  line itself or from the charge, refund or dispute registered under its id);
- Asaas `GET /v3/payments/{id}` (the payment a webhook names, with its `refunds` and
  `chargeback`), authenticated as Asaas does: the API key in the `access_token` header;
  `GET /v3/payments?dateCreated[ge]=…&paymentDate[le]=…&offset=…&limit=…` (the payments whose
  day fields are within the bounds given, deleted ones left out, in the order registered: Asaas
  documents none), `GET /v3/financialTransactions?startDate=…&finishDate=…&offset=…&limit=…`
  (the statement's lines of those days, oldest first) and `GET /v3/webhooks` (the account's
  webhooks, each with its `enabled` and `interrupted`), each paged with `hasMore`;

Tests and the fire drill register what the providers know (`payments`, `refunds`, `events`).
From outside (`umavez send --provider mercadopago PAYMENT.json`), a Mercado Pago payment is
registered with `PUT /__fake__/v1/payments/{id}` (the MP token; the body is the payment as
`GET /v1/payments/{id}` answers it): 201 when new, 200 when it replaced one. The path says it is
the fake's: Mercado Pago's own `PUT /v1/payments/{id}` updates a payment with other semantics.
An order of the Orders API likewise with `PUT /__fake__/v1/orders/{id}` (the body is the order as
`GET /v1/orders/{id}` answers it).
An Asaas payment likewise with `PUT /__fake__/v3/payments/{id}` (the Asaas key in
`access_token`; the body is Asaas's payment object as `GET /v3/payments/{id}` answers it), and a
line of its statement with `PUT /__fake__/v3/financialTransactions/{id}`, and a webhook with
`PUT /__fake__/v3/webhooks/{id}` (Asaas's webhook object as `GET /v3/webhooks/{id}` answers
it: a queue paused is `"interrupted": true`).
What Stripe's books hold, likewise (the Stripe key as bearer): `PUT
/__fake__/v1/balance_transactions/{id}` with a balance transaction (its `source` expanded or
an id), and `PUT /__fake__/v1/charges/{id}`, `/v1/refunds/{id}`, `/v1/disputes/{id}` with the
object a line's `source` names -- a movement Stripe recorded and never announced. The objects a
thin event names are read back by id as Stripe's API serves them (`GET /v1/payment_intents/{id}`,
`/v1/charges/{id}`, `/v1/refunds/{id}`, `/v1/disputes/{id}`, `/v1/checkout/sessions/{id}`,
`/v1/invoices/{id}`, `/v1/invoice_payments/{id}`), registered likewise under the same paths.
"""

from __future__ import annotations

import json
import operator
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
)

FAKE_PAYMENTS_PATH = "/__fake__/v1/payments/"
FAKE_ORDERS_PATH = "/__fake__/v1/orders/"
ORDERS_PATH = "/v1/orders/"
ORDERS_SEARCH_PATH = "/v1/orders"
# The Orders API's search spans at most this many hours of creation dates.
ORDERS_SEARCH_SPAN = timedelta(hours=720)
FAKE_STRIPE_PATH = "/__fake__/v1/"
# What a balance transaction's `source` may name, registered for its expansion.
STRIPE_SOURCES = ("charges", "refunds", "disputes")
# What a thin event may name, read by id (`GET /v1/{collection}/{id}`).
STRIPE_OBJECTS = (
    *STRIPE_SOURCES,
    "payment_intents",
    "checkout/sessions",
    "invoices",
    "invoice_payments",
)
FAKE_ASAAS_PAYMENTS_PATH = "/__fake__/v3/payments/"
FAKE_ASAAS_STATEMENT_PATH = "/__fake__/v3/financialTransactions/"
FAKE_ASAAS_WEBHOOKS_PATH = "/__fake__/v3/webhooks/"
ASAAS_PAYMENTS_PATH = "/v3/payments/"
ASAAS_PAYMENTS_LIST = "/v3/payments"
ASAAS_STATEMENT_PATH = "/v3/financialTransactions"
ASAAS_WEBHOOKS_PATH = "/v3/webhooks"
# The bounds of a list filter on a day field, as Asaas names them (`paymentDate[ge]`).
_DAY_BOUNDS: dict[str, Callable[[str, str], bool]] = {"ge": operator.ge, "le": operator.le}
_DAY_FILTER = re.compile(r"^(\w+)\[(ge|le)\]$")

Query = dict[str, list[str]]
_CREATED_BOUNDS: dict[str, Callable[[int, int], bool]] = {
    "gte": operator.ge,
    "gt": operator.gt,
    "lte": operator.le,
    "lt": operator.lt,
}


class FakeProviderApis:
    """Serves `payments` (Mercado Pago, by id and searched), `refunds` (Stripe, by charge id),
    `events` (Stripe, by window and type), `asaas_payments` (Asaas, by id and listed) and
    `asaas_webhooks` (Asaas's webhooks, by id and listed).

    `status_override` makes every answer that status (an outage, a 404); `fail` makes one
    request of a path fail (an outage on page 3); `requests` records every request's path and
    query, so a test can see paging and retries.
    """

    def __init__(
        self,
        mercadopago_token: str = MERCADOPAGO_DEVELOPMENT_TOKEN,
        stripe_key: str = STRIPE_DEVELOPMENT_API_KEY,
        port: int = 0,
        asaas_key: str = ASAAS_DEVELOPMENT_API_KEY,
    ) -> None:
        self.payments: dict[str, dict[str, Any]] = {}
        self.orders: dict[str, dict[str, Any]] = {}
        self.asaas_payments: dict[str, dict[str, Any]] = {}
        self.asaas_transactions: dict[str, dict[str, Any]] = {}
        self.asaas_webhooks: dict[str, dict[str, Any]] = {}
        self.refunds: dict[str, list[dict[str, Any]]] = {}
        self.events: list[dict[str, Any]] = []
        self.balance_transactions: dict[str, dict[str, Any]] = {}
        self.stripe_objects: dict[str, dict[str, Any]] = {}
        # The `Stripe-Version` each read of an object by id asked for (None: the account's).
        self.stripe_versions: list[str | None] = []
        self.status_override: int | None = None
        self.requests: list[str] = []
        self._failures: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()
        keys = _Keys(mercadopago_token, stripe_key, asaas_key)
        request = type("Request", (_Request,), {"fake": self, "keys": keys})
        self._server = ThreadingHTTPServer(("127.0.0.1", port), request)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def fail(self, path: str, request: int, status: int = 500) -> None:
        """The `request`-th request to `path` (1 is the first ever) answers `status`, once."""
        with self._lock:
            self._failures[(path, request)] = status

    def _record(self, full_path: str, path: str) -> int | None:
        """Records the request; the status injected for it, if any."""
        with self._lock:
            self.requests.append(full_path)
            nth = sum(urllib.parse.urlsplit(p).path == path for p in self.requests)
            return self._failures.pop((path, nth), None)

    def register_payment(self, payment_id: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """A payment as `GET /v1/payments/{id}` will answer it: 201 new, 200 replaced, 400 not
        a JSON object whose `id` is the path's."""
        try:
            payment = json.loads(body)
        except ValueError:
            return 400, {"message": "the body is not JSON"}
        if not isinstance(payment, dict) or str(payment.get("id")) != payment_id:
            return 400, {"message": f"the body must be a payment whose id is {payment_id!r}"}
        with self._lock:
            known = payment_id in self.payments
            self.payments[payment_id] = payment
        return (200 if known else 201), payment

    def register_order(self, order_id: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """An order as `GET /v1/orders/{id}` will answer it: 201 new, 200 replaced, 400 not a
        JSON object whose `id` is the path's."""
        try:
            order = json.loads(body)
        except ValueError:
            return 400, {"message": "the body is not JSON"}
        if not isinstance(order, dict) or order.get("id") != order_id:
            return 400, {"message": f"the body must be an order whose id is {order_id!r}"}
        try:  # what the orders search sorts and filters by
            for field in ("created_date", "last_updated_date"):
                _zoned(order[field])
        except (KeyError, TypeError, ValueError):
            return 400, {"message": "an order needs zoned created_date and last_updated_date"}
        with self._lock:
            known = order_id in self.orders
            self.orders[order_id] = order
        return (200 if known else 201), order

    def register_asaas_payment(self, payment_id: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """An Asaas payment as `GET /v3/payments/{id}` will answer it: 201 new, 200 replaced,
        400 not a JSON object whose `id` is the path's."""
        try:
            payment = json.loads(body)
        except ValueError:
            return 400, {"errors": [{"description": "the body is not JSON"}]}
        if not isinstance(payment, dict) or payment.get("id") != payment_id:
            return 400, {"errors": [{"description": f"the body must be payment {payment_id!r}"}]}
        with self._lock:
            known = payment_id in self.asaas_payments
            self.asaas_payments[payment_id] = payment
        return (200 if known else 201), payment

    def stripe_object_at(self, path: str) -> tuple[int, dict[str, Any]] | None:
        """`GET /v1/{collection}/{id}` of an object registered; None for another path."""
        collection, _, object_id = path.removeprefix("/v1/").rpartition("/")
        if not path.startswith("/v1/") or collection not in STRIPE_OBJECTS:
            return None
        with self._lock:
            held = self.stripe_objects.get(object_id)
        if held is None:
            return 404, {
                "error": {"code": "resource_missing", "message": f"No such object: {object_id!r}"}
            }
        return 200, held

    def register_stripe(self, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """`balance_transactions/{id}`, or an object by id (`charges|refunds|disputes|
        payment_intents|checkout/sessions|invoices|invoice_payments/{id}`): 201 new, 200
        replaced, 400 not a JSON object whose `id` is the path's, 404 another path."""
        collection, _, object_id = path.rpartition("/")
        if collection not in ("balance_transactions", *STRIPE_OBJECTS) or not object_id:
            return 404, {"error": {"message": f"Unrecognized request URL ({path})"}}
        try:
            stripe_object = json.loads(body)
        except ValueError:
            return 400, {"error": {"message": "the body is not JSON"}}
        if not isinstance(stripe_object, dict) or stripe_object.get("id") != object_id:
            return 400, {"error": {"message": f"the body must be {object_id!r} itself"}}
        held = (
            self.balance_transactions
            if collection == "balance_transactions"
            else self.stripe_objects
        )
        with self._lock:
            known = object_id in held
            held[object_id] = stripe_object
        return (200 if known else 201), stripe_object

    def balance_page(self, query: Query) -> dict[str, Any]:
        """The lines in the `created` bounds, newest first; `source` expanded when asked."""
        expand = "data.source" in query.get("expand[]", [])

        def as_listed(line: dict[str, Any]) -> dict[str, Any]:
            source = line.get("source")
            if expand and isinstance(source, str) and source in self.stripe_objects:
                return {**line, "source": self.stripe_objects[source]}
            if not expand and isinstance(source, dict):
                return {**line, "source": source["id"]}
            return line

        within = [
            line
            for line in self.balance_transactions.values()
            if all(
                holds(int(line["created"]), int(bound))
                for name, holds in _CREATED_BOUNDS.items()
                if (bound := _first(query, f"created[{name}]")) is not None
            )
        ]
        listed = sorted(within, key=lambda line: (-int(line["created"]), line["id"]))
        return _stripe_page([as_listed(line) for line in listed], query, "/v1/balance_transactions")

    def register_asaas_transaction(self, line_id: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """A line of Asaas's statement: 201 new, 200 replaced, 400 not one whose `id` is the
        path's."""
        try:
            line = json.loads(body)
        except ValueError:
            return 400, {"errors": [{"description": "the body is not JSON"}]}
        if not isinstance(line, dict) or line.get("id") != line_id:
            return 400, {"errors": [{"description": f"the body must be line {line_id!r}"}]}
        with self._lock:
            known = line_id in self.asaas_transactions
            self.asaas_transactions[line_id] = line
        return (200 if known else 201), line

    def register_asaas_webhook(self, webhook_id: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """One of the account's webhooks as `GET /v3/webhooks/{id}` will answer it: 201 new,
        200 replaced, 400 not one whose `id` is the path's."""
        try:
            webhook = json.loads(body)
        except ValueError:
            return 400, {"errors": [{"description": "the body is not JSON"}]}
        if not isinstance(webhook, dict) or webhook.get("id") != webhook_id:
            return 400, {"errors": [{"description": f"the body must be webhook {webhook_id!r}"}]}
        with self._lock:
            known = webhook_id in self.asaas_webhooks
            self.asaas_webhooks[webhook_id] = webhook
        return (200 if known else 201), webhook

    def asaas_payment_list(self, query: Query) -> dict[str, Any]:
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
            for payment in self.asaas_payments.values()
            if not payment.get("deleted")
            and all(
                payment.get(field) is not None and holds(str(payment[field])[:10], bound)
                for field, holds, bound in bounds
            )
        ]
        return _asaas_page(within, query)

    def asaas_statement(self, query: Query) -> dict[str, Any]:
        """The lines dated startDate .. finishDate (days, inclusive), oldest first."""
        first, last = _first(query, "startDate") or "", _first(query, "finishDate") or "9999"
        within = sorted(
            (t for t in self.asaas_transactions.values() if first <= str(t["date"]) <= last),
            key=lambda t: (str(t["date"]), str(t["id"])),
        )
        return _asaas_page(within, query)

    def refund_page(self, query: Query) -> dict[str, Any]:
        refunds = self.refunds.get(_first(query, "charge") or "", [])
        return _stripe_page(refunds, query, "/v1/refunds")

    def event_page(self, query: Query) -> dict[str, Any]:
        """Events in the `created` bounds, of the `types[]` (or `type`) asked, newest first."""
        types = set(query.get("types[]", []) + query.get("type", []))

        def wanted(event: dict[str, Any]) -> bool:
            created = int(event["created"])
            for name, holds in _CREATED_BOUNDS.items():
                bound = _first(query, f"created[{name}]")
                if bound is not None and not holds(created, int(bound)):
                    return False
            return not types or event["type"] in types

        listed = sorted(filter(wanted, self.events), key=lambda e: -int(e["created"]))
        return _stripe_page(listed, query, "/v1/events")

    def payment_search(self, query: Query) -> dict[str, Any]:
        """Payments whose `range` date is within [begin_date, end_date], sorted, offset-paged."""
        field = _first(query, "range") or "date_created"
        begin, end = _first(query, "begin_date"), _first(query, "end_date")
        found = [
            p
            for p in self.payments.values()
            if (begin is None or _instant(begin) <= _instant(p[field]))
            and (end is None or _instant(p[field]) <= _instant(end))
        ]
        sort = _first(query, "sort") or "date_created"
        found.sort(key=lambda p: _instant(p[sort]), reverse=_first(query, "criteria") == "desc")
        offset, limit = int(_first(query, "offset") or 0), int(_first(query, "limit") or 30)
        return {
            "paging": {"total": len(found), "limit": limit, "offset": offset},
            "results": found[offset : offset + limit],
        }

    def order_search(self, query: Query) -> tuple[int, dict[str, Any]]:
        """Orders created within [begin_date, end_date] (both required, zoned, at most 720
        hours apart, the start not in the future), sorted by `sort_by` (`created_date` or
        `last_updated_date`; `sort_order` `asc` or `desc`, `desc` unless asked), paged by
        `page` (from 1) and `page_size` (20 unless asked, at most 100); 400 with Mercado Pago's
        codes otherwise. Paging's numbers are strings, as its answers have them."""
        begin, end = _first(query, "begin_date"), _first(query, "end_date")
        if begin is None or end is None:
            return 400, {"code": "missing_required_params", "message": "begin_date, end_date"}
        sort = _first(query, "sort_by") or "created_date"
        order = _first(query, "sort_order") or "desc"
        try:
            since, until = _zoned(begin), _zoned(end)
            number, size = int(_first(query, "page") or 1), int(_first(query, "page_size") or 20)
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
        with self._lock:
            known = list(self.orders.values())
        found = sorted(
            (o for o in known if since <= _zoned(o["created_date"]) <= until),
            key=lambda o: _zoned(o[sort]),
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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FakeProviderApis:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass(frozen=True)
class _Keys:
    """The credential each provider's fake takes."""

    mercadopago: str
    stripe: str
    asaas: str


class _Request(BaseHTTPRequestHandler):
    """One request to the fake APIs: each provider's routes, its credential, its errors. The
    fake and the credentials are set on a subclass per fake (`FakeProviderApis`)."""

    fake: FakeProviderApis
    keys: _Keys

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        injected = self.fake._record(self.path, url.path)
        if url.path.startswith("/v3/"):
            self._asaas(url.path, query, injected)
            return
        of_mercadopago = url.path.startswith(("/v1/payments/", ORDERS_PATH)) or (
            url.path == ORDERS_SEARCH_PATH
        )
        token = self.keys.mercadopago if of_mercadopago else self.keys.stripe
        if self.headers.get("Authorization") != f"Bearer {token}":
            self._answer(401, {"message": "invalid access token"})
        elif injected or self.fake.status_override:
            self._answer(injected or self.fake.status_override or 500, {"message": "injected"})
        elif url.path == "/v1/refunds":
            self._answer(200, self.fake.refund_page(query))
        elif url.path == "/v1/events":
            self._answer(200, self.fake.event_page(query))
        elif url.path == "/v1/balance_transactions":
            self._answer(200, self.fake.balance_page(query))
        elif url.path == "/v1/payments/search":
            self._answer(200, self.fake.payment_search(query))
        elif url.path == ORDERS_SEARCH_PATH:
            self._answer(*self.fake.order_search(query))
        elif url.path.startswith(ORDERS_PATH):
            order = self.fake.orders.get(url.path.removeprefix(ORDERS_PATH))
            self._answer(*((200, order) if order else (404, {"message": "not found"})))
        elif (answer := self.fake.stripe_object_at(url.path)) is not None:
            self.fake.stripe_versions.append(self.headers.get("Stripe-Version"))
            self._answer(*answer)
        elif (payment_id := url.path.rsplit("/", 1)[-1]) in self.fake.payments:
            self._answer(200, self.fake.payments[payment_id])
        else:
            self._answer(404, {"message": "not found"})

    def do_PUT(self) -> None:
        path = urllib.parse.urlsplit(self.path).path
        self.fake._record(self.path, path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if path.startswith(
            (FAKE_ASAAS_PAYMENTS_PATH, FAKE_ASAAS_STATEMENT_PATH, FAKE_ASAAS_WEBHOOKS_PATH)
        ):
            if self.headers.get("access_token") != self.keys.asaas:
                self._answer(401, {"errors": [{"code": "invalid_access_token"}]})
            elif path.startswith(FAKE_ASAAS_STATEMENT_PATH):
                line_id = path.removeprefix(FAKE_ASAAS_STATEMENT_PATH)
                self._answer(*self.fake.register_asaas_transaction(line_id, body))
            elif path.startswith(FAKE_ASAAS_WEBHOOKS_PATH):
                webhook_id = path.removeprefix(FAKE_ASAAS_WEBHOOKS_PATH)
                self._answer(*self.fake.register_asaas_webhook(webhook_id, body))
            else:
                payment_id = path.removeprefix(FAKE_ASAAS_PAYMENTS_PATH)
                self._answer(*self.fake.register_asaas_payment(payment_id, body))
        elif path.startswith(FAKE_STRIPE_PATH) and not path.startswith(
            (FAKE_PAYMENTS_PATH, FAKE_ORDERS_PATH)
        ):
            if self.headers.get("Authorization") != f"Bearer {self.keys.stripe}":
                self._answer(401, {"error": {"message": "Invalid API Key provided"}})
            else:
                self._answer(*self.fake.register_stripe(path.removeprefix(FAKE_STRIPE_PATH), body))
        elif not path.startswith((FAKE_PAYMENTS_PATH, FAKE_ORDERS_PATH)):
            self._answer(404, {"message": "not found"})
        elif self.headers.get("Authorization") != f"Bearer {self.keys.mercadopago}":
            self._answer(401, {"message": "invalid access token"})
        elif path.startswith(FAKE_ORDERS_PATH):
            self._answer(*self.fake.register_order(path.removeprefix(FAKE_ORDERS_PATH), body))
        else:
            self._answer(*self.fake.register_payment(path.removeprefix(FAKE_PAYMENTS_PATH), body))

    def _asaas(self, path: str, query: Query, injected: int | None) -> None:
        """Asaas's answers: its key in `access_token`, its errors as `errors[]`."""
        payment_id = path.removeprefix(ASAAS_PAYMENTS_PATH)
        if self.headers.get("access_token") != self.keys.asaas:
            self._answer(401, {"errors": [{"code": "invalid_access_token"}]})
        elif injected or self.fake.status_override:
            self._answer(injected or self.fake.status_override or 500, {"errors": []})
        elif path == ASAAS_STATEMENT_PATH:
            self._answer(200, self.fake.asaas_statement(query))
        elif path == ASAAS_PAYMENTS_LIST:
            self._answer(200, self.fake.asaas_payment_list(query))
        elif path == ASAAS_WEBHOOKS_PATH:
            self._answer(200, _asaas_page(list(self.fake.asaas_webhooks.values()), query))
        elif path.startswith(f"{ASAAS_WEBHOOKS_PATH}/") and (
            webhook := self.fake.asaas_webhooks.get(path.rsplit("/", 1)[-1])
        ):
            self._answer(200, webhook)
        elif path.startswith(ASAAS_PAYMENTS_PATH) and payment_id in self.fake.asaas_payments:
            self._answer(200, self.fake.asaas_payments[payment_id])
        else:
            self._answer(404, {"errors": [{"code": "not_found"}]})

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


class FakeApiError(Exception):
    """The fake provider API could not be reached, or refused what it was given."""


def register_mercadopago_payment(
    api_url: str, token: str, payment: dict[str, Any], timeout_seconds: float = 5.0
) -> bool:
    """Registers (or replaces) a payment with the fake Mercado Pago API; True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_PAYMENTS_PATH}{payment['id']}"
    headers = {"Authorization": f"Bearer {token}"}
    return _put_fake(url, headers, payment, "Mercado Pago", timeout_seconds)


def register_mercadopago_order(
    api_url: str, token: str, order: dict[str, Any], timeout_seconds: float = 5.0
) -> bool:
    """Registers (or replaces) an order with the fake Mercado Pago Orders API; True if new."""
    url = f"{api_url.rstrip('/')}{FAKE_ORDERS_PATH}{order['id']}"
    return _put_fake(
        url, {"Authorization": f"Bearer {token}"}, order, "Mercado Pago", timeout_seconds
    )


def register_asaas_payment(
    api_url: str, api_key: str, payment: dict[str, Any], timeout_seconds: float = 5.0
) -> bool:
    """Registers (or replaces) a payment with the fake Asaas API; True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_ASAAS_PAYMENTS_PATH}{payment['id']}"
    return _put_fake(url, {"access_token": api_key}, payment, "Asaas", timeout_seconds)


def register_asaas_webhook(api_url: str, api_key: str, webhook: dict[str, Any]) -> bool:
    """Registers (or replaces) one of the account's webhooks with the fake Asaas API (a queue
    paused: `"interrupted": true`); True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_ASAAS_WEBHOOKS_PATH}{webhook['id']}"
    return _put_fake(url, {"access_token": api_key}, webhook, "Asaas", 5.0)


def register_asaas_transaction(api_url: str, api_key: str, line: dict[str, Any]) -> bool:
    """Registers (or replaces) a line of Asaas's statement with the fake; True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_ASAAS_STATEMENT_PATH}{line['id']}"
    return _put_fake(url, {"access_token": api_key}, line, "Asaas", 5.0)


def register_stripe_object(
    api_url: str, api_key: str, collection: str, stripe_object: dict[str, Any]
) -> bool:
    """Registers (or replaces) what Stripe's books hold with the fake Stripe API: a balance
    transaction (`balance_transactions`) or an object by id (`STRIPE_OBJECTS`: the sources a
    line names, the objects a thin event names). True if it was new."""
    url = f"{api_url.rstrip('/')}{FAKE_STRIPE_PATH}{collection}/{stripe_object['id']}"
    return _put_fake(url, {"Authorization": f"Bearer {api_key}"}, stripe_object, "Stripe", 5.0)


def _put_fake(
    url: str, headers: dict[str, str], body: dict[str, Any], provider: str, timeout: float
) -> bool:
    api_url = url.split("/__fake__/", 1)[0]
    request = urllib.request.Request(  # noqa: S310 - the local fake, http on loopback
        url,
        data=json.dumps(body).encode(),
        method="PUT",
        headers={**headers, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            return int(response.status) == 201
    except urllib.error.HTTPError as exc:
        reason = exc.read().decode(errors="replace")
        raise FakeApiError(
            f"the fake {provider} API at {api_url} answered {exc.code}: {reason}"
        ) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise FakeApiError(
            f"no fake {provider} API at {api_url} (is `umavez serve` running?): {exc}"
        ) from exc


def _first(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _instant(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp)


def _zoned(stamp: str) -> datetime:
    """An ISO 8601 time with its zone; ValueError without one."""
    moment = datetime.fromisoformat(stamp)
    if moment.tzinfo is None:
        raise ValueError(f"{stamp!r} names no time zone")
    return moment


def _asaas_page(items: Sequence[dict[str, Any]], query: Query) -> dict[str, Any]:
    """A list as Asaas pages one: `offset`, `limit` (10 unless asked), `hasMore`."""
    offset, limit = int(_first(query, "offset") or 0), int(_first(query, "limit") or 10)
    return {
        "object": "list",
        "hasMore": offset + limit < len(items),
        "totalCount": len(items),
        "limit": limit,
        "offset": offset,
        "data": list(items[offset : offset + limit]),
    }


def _stripe_page(items: Sequence[dict[str, Any]], query: Query, url: str) -> dict[str, Any]:
    limit = int(_first(query, "limit") or 10)
    after = _first(query, "starting_after")
    start = next((n + 1 for n, item in enumerate(items) if item["id"] == after), 0)
    return {
        "object": "list",
        "data": list(items[start : start + limit]),
        "has_more": start + limit < len(items),
        "url": url,
    }
