"""API Gateway on loopback: HTTP requests become proxy events for the real ingest handler, in the
shape the stack's `apiType` delivers: an HTTP API's (payload format 2.0, the default) or a REST
API's (payload format 1.0)."""

from __future__ import annotations

import base64
import re
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from devstack.lambdas import LambdaContext
from infra.config import DEFAULT_API_TYPE, ApiType

ROUTE = re.compile(r"^/webhooks/(?P<provider>[^/]+)$")
ROUTE_KEY = "POST /webhooks/{provider}"
STAGE = "live"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
# What an HTTP API hands a Lambda as text; any other body (or none declared) arrives base64.
TEXT_TYPES = re.compile(r"^(text/.*|application/(json|xml|javascript))$")


def _grouped(pairs: Sequence[tuple[str, str]], lower: bool = False) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for name, value in pairs:
        grouped.setdefault(name.lower() if lower else name, []).append(value)
    return grouped


def rest_event(
    method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes, source_ip: str
) -> dict[str, Any]:
    """As the stack's REST API delivers it: binary media type */*, so the body is base64; each
    single-value map holds a repeated name's last value, the multi-value maps all of them."""
    url = urlsplit(path)
    match = ROUTE.match(url.path)
    multi_headers = _grouped(headers)
    multi_query = _grouped(parse_qsl(url.query, keep_blank_values=True)) or None
    return {
        "resource": "/webhooks/{provider}",
        "path": url.path,
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in multi_headers.items()},
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {k: v[-1] for k, v in (multi_query or {}).items()} or None,
        "multiValueQueryStringParameters": multi_query,
        "pathParameters": {"provider": match["provider"]} if match else None,
        "requestContext": {
            "resourcePath": "/webhooks/{provider}",
            "httpMethod": method,
            "stage": STAGE,
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": source_ip},
        },
        "body": base64.b64encode(body).decode(),
        "isBase64Encoded": True,
    }


def http_api_event(
    method: str, path: str, headers: Sequence[tuple[str, str]], body: bytes, source_ip: str
) -> dict[str, Any]:
    """As the stack's HTTP API delivers it (payload 2.0): header names lower-case and repeated
    ones comma-joined, cookies apart, the raw query string beside the comma-joined parameters, a
    JSON or text body as text and anything else base64."""
    url = urlsplit(path)
    match = ROUTE.match(url.path)
    multi_headers = _grouped(headers, lower=True)
    cookies = [c for value in multi_headers.pop("cookie", []) for c in value.split("; ")]
    query = _grouped(parse_qsl(url.query, keep_blank_values=True))
    media_type = multi_headers.get("content-type", [""])[0].split(";")[0].strip().lower()
    try:
        text = body.decode("utf-8") if TEXT_TYPES.match(media_type) else None
    except UnicodeDecodeError:
        text = None
    now = time.time()
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": ROUTE_KEY,
        "rawPath": url.path,
        "rawQueryString": url.query,
        "headers": {k: ",".join(v) for k, v in multi_headers.items()},
        "requestContext": {
            "accountId": "000000000000",
            "apiId": "local",
            "domainName": multi_headers.get("host", ["127.0.0.1"])[0],
            "domainPrefix": "local",
            "http": {
                "method": method,
                "path": url.path,
                "protocol": "HTTP/1.1",
                "sourceIp": source_ip,
                "userAgent": multi_headers.get("user-agent", [""])[0],
            },
            "requestId": str(uuid.uuid4()),
            "routeKey": ROUTE_KEY,
            "stage": STAGE,
            "time": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "timeEpoch": int(now * 1000),
        },
        "pathParameters": {"provider": match["provider"]} if match else None,
        "isBase64Encoded": bool(body) and text is None,
    }
    if cookies:
        event["cookies"] = cookies
    if query:
        event["queryStringParameters"] = {k: ",".join(v) for k, v in query.items()}
    if body:
        event["body"] = text if text is not None else base64.b64encode(body).decode()
    return event


EVENTS: dict[ApiType, Callable[..., dict[str, Any]]] = {
    ApiType.REST: rest_event,
    ApiType.HTTP: http_api_event,
}


class ApiFront:
    """Serves POST /webhooks/{provider} on 127.0.0.1. `slow_seconds` holds the answer back after
    ingest has run, as the incident in docs/design.md did ("The problem"): the provider times out
    and retries.

    As an HTTP API, only the route's method reaches ingest (anything else is API Gateway's own
    404); a REST API's front hands every method to ingest, which answers 405."""

    def __init__(
        self, ingest: Handler, port: int = 0, api_type: ApiType = DEFAULT_API_TYPE
    ) -> None:
        self.slow_seconds: Callable[[bytes], float] = lambda _body: 0.0
        self.api_type = api_type
        self.ingest = ingest
        front = self
        make_event = EVENTS[api_type]

        class Request(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                routed = ROUTE.match(urlsplit(self.path).path) and (
                    api_type is ApiType.REST or self.command == "POST"
                )
                if not routed:
                    self._answer(
                        404, {"Content-Type": "application/json"}, b'{"message": "Not Found"}'
                    )
                    return
                event = make_event(
                    self.command, self.path, self.headers.items(), body, self.client_address[0]
                )
                response = front.ingest(event, LambdaContext("umavez-ingest"))
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
