"""API Gateway on loopback: HTTP requests become REST proxy events for the real ingest handler."""

from __future__ import annotations

import base64
import re
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from local_stack.lambdas import LambdaContext

ROUTE = re.compile(r"^/webhooks/(?P<provider>[^/]+)$")
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def proxy_event(
    method: str, path: str, headers: dict[str, str], body: bytes, source_ip: str
) -> dict[str, Any]:
    """As the stack's API delivers it: binary media type */*, so the body is base64."""
    url = urlsplit(path)
    match = ROUTE.match(url.path)
    query = dict(parse_qsl(url.query, keep_blank_values=True)) or None
    return {
        "resource": "/webhooks/{provider}",
        "path": url.path,
        "httpMethod": method,
        "headers": headers,
        "multiValueHeaders": {k: [v] for k, v in headers.items()},
        "queryStringParameters": query,
        "pathParameters": {"provider": match["provider"]} if match else None,
        "requestContext": {
            "resourcePath": "/webhooks/{provider}",
            "httpMethod": method,
            "stage": "local",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": source_ip},
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


class ApiFront:
    """Serves POST /webhooks/{provider} on 127.0.0.1. `slow_seconds` holds the answer back after
    ingest has run, as the incident in DESIGN.md did: the provider times out and retries."""

    def __init__(self, ingest: Handler, port: int = 0) -> None:
        self.slow_seconds: Callable[[bytes], float] = lambda _body: 0.0
        front = self

        class Request(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                if not ROUTE.match(urlsplit(self.path).path):
                    self._answer(
                        404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}'
                    )
                    return
                event = proxy_event(
                    self.command,
                    self.path,
                    dict(self.headers.items()),
                    body,
                    self.client_address[0],
                )
                response = ingest(event, LambdaContext("umavez-ingest"))
                time.sleep(front.slow_seconds(body))
                self._answer(
                    response["statusCode"], response.get("headers", {}), response["body"].encode()
                )

            def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
                try:
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the provider gave up waiting: exactly the case being simulated

            do_POST = do_GET = do_PUT = do_DELETE = _serve

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", port), Request)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> ApiFront:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
