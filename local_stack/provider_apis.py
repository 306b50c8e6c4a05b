"""The providers' REST APIs that process reads, on loopback, each with its own bearer token:

- Mercado Pago `GET /v1/payments/{id}` (the payment a notification names);
- Stripe `GET /v1/refunds?charge=…&limit=…&starting_after=…` (a charge's refunds, paged as
  Stripe pages lists: newest first, `has_more`).
"""

from __future__ import annotations

import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from local_stack.resources import MERCADOPAGO_DEVELOPMENT_TOKEN, STRIPE_DEVELOPMENT_API_KEY


class FakeProviderApis:
    """Serves `payments` (Mercado Pago) and `refunds` (Stripe, by charge id).

    `status_override` makes every answer that status (an outage, a 404); `requests` counts
    the requests per path, so a test can see paging and retries.
    """

    def __init__(
        self,
        mercadopago_token: str = MERCADOPAGO_DEVELOPMENT_TOKEN,
        stripe_key: str = STRIPE_DEVELOPMENT_API_KEY,
    ) -> None:
        self.payments: dict[str, dict[str, Any]] = {}
        self.refunds: dict[str, list[dict[str, Any]]] = {}
        self.status_override: int | None = None
        self.requests: list[str] = []
        fake = self

        class Request(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                fake.requests.append(self.path)
                token = mercadopago_token if url.path.startswith("/v1/payments/") else stripe_key
                if self.headers.get("Authorization") != f"Bearer {token}":
                    self._answer(401, {"message": "invalid access token"})
                elif fake.status_override:
                    self._answer(fake.status_override, {"message": "injected"})
                elif url.path == "/v1/refunds":
                    self._answer(200, fake.refund_page(urllib.parse.parse_qs(url.query)))
                elif (payment_id := url.path.rsplit("/", 1)[-1]) in fake.payments:
                    self._answer(200, fake.payments[payment_id])
                else:
                    self._answer(404, {"message": "not found"})

            def _answer(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Request)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def refund_page(self, query: dict[str, list[str]]) -> dict[str, Any]:
        refunds = self.refunds.get(query.get("charge", [""])[0], [])
        limit = int(query.get("limit", ["10"])[0])
        after = query.get("starting_after", [None])[0]
        start = next((n + 1 for n, r in enumerate(refunds) if r["id"] == after), 0)
        page = refunds[start : start + limit]
        return {
            "object": "list",
            "data": page,
            "has_more": start + limit < len(refunds),
            "url": "/v1/refunds",
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
