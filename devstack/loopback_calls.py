"""AWS calls to the local servers skip what only real endpoints need: SigV4 signatures and
urllib3's connection pool. Only the local stack installs this (`LocalAws.start`); deployed code
never runs it, and every call to any other address goes through botocore unchanged.

Why: the local stack's handlers, pollers and drill share one interpreter, and that interpreter's
time is what limits the fire drill (NOTES.md, "10,000 deliveries with faults"). botocore spent
most of it preparing and sending calls, ~2 ms each:
- **Signing** (a canonical request, a SHA-256 of the body, five HMACs) was a seventh of it. No
  local server checks a signature: moto reads the Authorization header's credential scope (the
  access key names the account; the region and service route the request) and the date. A loopback
  request carries the same headers, scope and date as a signed one, with a fixed signature.
- **Sending** through urllib3 (pool lookup, URL parsing, retries and timeouts objects per call)
  cost twice that. A loopback request goes over a kept-alive `http.client` connection
  from a small shared pool, and botocore gets the same `AWSResponse` it builds itself. Failures
  map to botocore's own errors, so its retries behave as they do over urllib3: a refused
  connection is an `EndpointConnectionError`, a timeout a `ConnectTimeoutError` or
  `ReadTimeoutError`, a connection closed mid-call a `ConnectionClosedError`; a kept connection
  the server closed while idle is dropped before the call, as urllib3 does.
What these shortcuts do not cover takes botocore's own path: HTTPS, streamed or chunked bodies
(sent through urllib3), a signer other than plain SigV4 (S3's, presigned URLs: signed).
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit

from botocore import auth as botocore_auth
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)
from botocore.httpsession import URLLib3Session
from urllib3.util.timeout import Timeout
from urllib3.util.wait import wait_for_read

LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})
# What stands where the signature would be: no local server verifies it.
UNSIGNED: Final = "0" * 64
SIGV4_TIMESTAMP: Final = "%Y%m%dT%H%M%SZ"

_original_add_auth = SigV4Auth.add_auth
_original_send = URLLib3Session.send
_install_lock = threading.Lock()


def is_loopback(url: str) -> bool:
    return urlsplit(url).hostname in LOOPBACK_HOSTS


# -- signing ---------------------------------------------------------------------------------


def _add_auth(self: SigV4Auth, request: Any) -> None:
    if type(self) is not SigV4Auth or self.credentials is None or not is_loopback(request.url):
        _original_add_auth(self, request)  # and botocore's NoCredentialsError without credentials
        return
    # botocore's own clock, so that whatever sets it sets both paths'.
    now = botocore_auth.get_current_datetime()  # type: ignore[attr-defined]
    request.context["timestamp"] = now.strftime(SIGV4_TIMESTAMP)
    # The date header, the session token, a retry's old Authorization removed: as signed.
    self._modify_request_before_signing(request)  # type: ignore[attr-defined]
    request.headers["Authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={self.scope(request)}, "
        f"SignedHeaders=host;x-amz-date, Signature={UNSIGNED}"
    )


# -- sending ---------------------------------------------------------------------------------


class _ReadBody:
    """The response body, already read, as botocore reads a urllib3 response's."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, *_: Any, **__: Any) -> Iterator[bytes]:
        body, self._body = self._body, b""
        if body:
            yield body

    def read(self, *_: Any, **__: Any) -> bytes:
        body, self._body = self._body, b""
        return body

    def close(self) -> None:
        self._body = b""


class _KeptConnections:
    """Idle connections per server, shared by every thread: a call takes one (or opens one)
    and gives it back once its answer is read whole. Threads that live for one request (the
    API front's) reuse them as the pollers do, and nothing is left for the collector."""

    def __init__(self, most_idle: int = 64) -> None:
        self._idle: dict[tuple[str, int], list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()
        self._most_idle = most_idle

    def take(self, host: str, port: int) -> http.client.HTTPConnection:
        while True:
            with self._lock:
                idle = self._idle.get((host, port))
                connection = idle.pop() if idle else None
            if connection is None:
                return http.client.HTTPConnection(host, port)
            if connection.sock is not None and not wait_for_read(connection.sock, timeout=0):
                return connection
            # The server closed it (or wrote to it) while it was idle: as urllib3, drop it.
            connection.close()

    def give_back(self, host: str, port: int, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            idle = self._idle.setdefault((host, port), [])
            if len(idle) < self._most_idle:
                idle.append(connection)
                return
        connection.close()


_kept = _KeptConnections()


def _timeouts(session: URLLib3Session, request: Any) -> tuple[float | None, float | None]:
    """The client's configured connect and read timeouts, as urllib3 would get them, and a
    call's own read timeout when botocore set one."""
    timeout = getattr(session, "_timeout", None)
    if isinstance(timeout, Timeout):
        connect, read = timeout.connect_timeout, timeout.read_timeout
    else:
        connect = read = timeout
    context = getattr(request, "context", None) or {}
    return connect, context.get("read_timeout", read)  # type: ignore[return-value]


def _covered(request: Any, url: SplitResult) -> bool:
    transfer = request.headers.get("Transfer-Encoding", b"")
    return (
        url.scheme == "http"
        and url.hostname in LOOPBACK_HOSTS
        and not request.stream_output
        and isinstance(request.body, bytes | type(None))
        and (transfer.encode() if isinstance(transfer, str) else transfer).lower() != b"chunked"
    )


def _send(self: URLLib3Session, request: Any) -> AWSResponse:
    url = urlsplit(request.url)  # once: this runs for every call the process makes
    if not _covered(request, url):
        return _original_send(self, request)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    connect_timeout, read_timeout = _timeouts(self, request)
    connection = _kept.take(host, port)
    target = (url.path or "/") + (f"?{url.query}" if url.query else "")
    try:
        if connection.sock is None:
            connection.timeout = connect_timeout
            connection.connect()
        connection.sock.settimeout(read_timeout)
        connection.request(
            request.method, target, body=request.body, headers=dict(request.headers.items())
        )
        response = connection.getresponse()
        body = response.read()
    except (ConnectionRefusedError, socket.gaierror) as exc:
        connection.close()
        raise EndpointConnectionError(endpoint_url=request.url, error=exc) from exc
    except TimeoutError as exc:
        connected = connection.sock is not None
        connection.close()
        if not connected:
            raise ConnectTimeoutError(endpoint_url=request.url, error=exc) from exc
        raise ReadTimeoutError(endpoint_url=request.url, error=exc) from exc
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise ConnectionClosedError(endpoint_url=request.url, request=request, error=exc) from exc
    except BaseException:
        connection.close()  # half used: never handed to another call
        raise
    if response.will_close:
        connection.close()
    else:
        _kept.give_back(host, port, connection)
    headers: Any = response.getheaders()  # AWSResponse makes them a case-blind HeadersDict
    return AWSResponse(request.url, response.status, headers, _ReadBody(body))


# -- installing ------------------------------------------------------------------------------


def install() -> None:
    """From now on, in this process, loopback calls are stamped and sent lean (idempotent)."""
    with _install_lock:
        SigV4Auth.add_auth = _add_auth  # type: ignore[method-assign]
        URLLib3Session.send = _send  # type: ignore[method-assign]


def uninstall() -> None:
    with _install_lock:
        SigV4Auth.add_auth = _original_add_auth  # type: ignore[method-assign]
        URLLib3Session.send = _original_send  # type: ignore[method-assign]


def installed() -> bool:
    return bool(URLLib3Session.send is _send and SigV4Auth.add_auth is _add_auth)
