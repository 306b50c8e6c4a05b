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
import threading
import urllib.parse
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from devstack import provider_listings as listings
from devstack.fake_registration import (
    FAKE_ASAAS_PAYMENTS_PATH,
    FAKE_ASAAS_STATEMENT_PATH,
    FAKE_ASAAS_WEBHOOKS_PATH,
    FAKE_ORDERS_PATH,
    FAKE_PAYMENTS_PATH,
    FAKE_STRIPE_PATH,
)
from devstack.provider_listings import Query, asaas_page, zoned
from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
)

ORDERS_PATH = "/v1/orders/"
ORDERS_SEARCH_PATH = "/v1/orders"
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
ASAAS_PAYMENTS_PATH = "/v3/payments/"
ASAAS_PAYMENTS_LIST = "/v3/payments"
ASAAS_STATEMENT_PATH = "/v3/financialTransactions"
ASAAS_WEBHOOKS_PATH = "/v3/webhooks"


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
                zoned(order[field])
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
        return listings.balance_page(self.balance_transactions.values(), self.stripe_objects, query)

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
        return listings.asaas_payment_list(self.asaas_payments.values(), query)

    def asaas_statement(self, query: Query) -> dict[str, Any]:
        return listings.asaas_statement(self.asaas_transactions.values(), query)

    def refund_page(self, query: Query) -> dict[str, Any]:
        return listings.refund_page(self.refunds, query)

    def event_page(self, query: Query) -> dict[str, Any]:
        return listings.event_page(self.events, query)

    def payment_search(self, query: Query) -> dict[str, Any]:
        return listings.payment_search(self.payments.values(), query)

    def order_search(self, query: Query) -> tuple[int, dict[str, Any]]:
        with self._lock:
            known = list(self.orders.values())
        return listings.order_search(known, query)

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
            self._answer(200, asaas_page(list(self.fake.asaas_webhooks.values()), query))
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
