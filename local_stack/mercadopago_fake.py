"""Mercado Pago's payments API on loopback: GET /v1/payments/{id} with a bearer token."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from local_stack.resources import MERCADOPAGO_DEVELOPMENT_TOKEN


class FakeMercadoPago:
    """Serves `payments`; `status_override` makes every answer that status (an outage, a 404)."""

    def __init__(self, token: str = MERCADOPAGO_DEVELOPMENT_TOKEN) -> None:
        self.payments: dict[str, dict[str, Any]] = {}
        self.status_override: int | None = None
        fake = self

        class Request(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                payment_id = self.path.rsplit("/", 1)[-1]
                if self.headers.get("Authorization") != f"Bearer {token}":
                    self._answer(401, {"message": "invalid access token"})
                elif fake.status_override:
                    self._answer(fake.status_override, {"message": "injected"})
                elif payment_id in fake.payments:
                    self._answer(200, fake.payments[payment_id])
                else:
                    self._answer(404, {"message": "Payment not found"})

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

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> FakeMercadoPago:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
