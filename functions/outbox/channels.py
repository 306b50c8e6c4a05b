"""Where notifications go. Every channel carries the outbox item's id as its dedupe key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import http.client
import ipaddress
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from email.utils import parsedate_to_datetime
from typing import IO, TYPE_CHECKING, Final, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from functions.outbox.templates import emails_customer, render
from functions.shared.errors import RetryableError, SettingsError
from functions.shared.outbox import EMAIL_CHANNEL, OutboxItem
from functions.shared.redaction import error_text, redacted

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sesv2 import SESV2Client

EVENT_SOURCE: Final = "umavez"


class ChannelError(RetryableError):
    """The sink did not take the notification; the item goes back to pending with backoff.

    `retry_after_seconds`: the sink asked to be tried again no sooner (`Retry-After`)."""

    def __init__(self, message: str, retry_after_seconds: int | None = None) -> None:
        super().__init__(message)
        self.retry_after_seconds = retry_after_seconds


class SinkGoneError(ChannelError):
    """The sink answered 410 Gone: it wants no more notifications. The item is not retried
    on it (the other channels still are); counted and logged so that someone is paged."""


class Channel(Protocol):
    @property
    def name(self) -> str:
        """Recorded per item once this channel took it, so a retry skips it."""

    def applies_to(self, item: OutboxItem) -> bool:
        """Whether this item is for this channel at all (e.g. e-mail needs a recipient)."""

    def send(self, item: OutboxItem) -> None:
        """Deliver once, keyed by item.idempotency_key, or raise ChannelError."""


class SesEmailChannel:
    name = EMAIL_CHANNEL

    def __init__(
        self, client: SESV2Client, sender: str, configuration_set: str | None = None
    ) -> None:
        self._client = client
        self._sender = sender
        # Named on every send when the stack was given one: SES authorizes a send against the
        # configuration set it uses as well as the identity, and the role is granted exactly it.
        self._configuration_set = (
            {"ConfigurationSetName": configuration_set} if configuration_set else {}
        )

    def applies_to(self, item: OutboxItem) -> bool:
        return bool(item.recipient) and emails_customer(item)

    def send(self, item: OutboxItem) -> None:
        message = render(item)
        try:
            self._client.send_email(
                FromEmailAddress=self._sender,
                Destination={"ToAddresses": [str(item.recipient)]},
                Content={
                    "Simple": {
                        "Subject": {"Data": message.subject},
                        "Body": {"Text": {"Data": message.body}},
                    }
                },
                EmailTags=[{"Name": "outbox_id", "Value": item.idempotency_key}],
                **self._configuration_set,  # type: ignore[arg-type]
            )
        except (ClientError, BotoCoreError) as exc:
            # SES's refusals name the recipient (a sandbox's "identities failed the check ...:
            # customer@..."): the code and the redacted message only.
            raise ChannelError(f"SES: {error_text(exc)}") from exc


class EventBridgeChannel:
    name = "eventbridge"

    def __init__(self, client: EventBridgeClient, bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        detail = {
            "idempotency_key": item.idempotency_key,
            "order_id": item.order_id,
            "transition": item.transition,
            "amount": item.amount,
            "currency": item.currency,
            "provider": item.provider,
            "external_ref": item.external_ref,
            "payment": item.payment,
            "effect_key": item.effect_key,
            "financial_status": item.financial_status,
            "late": item.late,
            "provider_time": item.provider_time,
            "found_by_statement": item.found_by_statement,
            "fee_total": item.fee_total,
            "net_total": item.net_total,
            "settlement_currency": item.settlement_currency,
        }
        try:
            response = self._client.put_events(
                Entries=[
                    {
                        "Source": EVENT_SOURCE,
                        "DetailType": item.transition,
                        "Detail": json.dumps(detail),
                        "EventBusName": self._bus,
                        "Resources": [],
                    }
                ]
            )
        except (ClientError, BotoCoreError) as exc:
            raise ChannelError(f"EventBridge: {error_text(exc)}") from exc
        if response.get("FailedEntryCount", 0) > 0:
            failures = [e.get("ErrorCode") for e in response["Entries"] if e.get("ErrorCode")]
            raise ChannelError(f"EventBridge rejected the event: {failures}")


class _RefuseRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is the sink's answer, not a delivery: urllib would follow a 301/302/303 to a
    POST with a body-less GET, and count that GET's 200 as the notification taken."""

    def redirect_request(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
        newurl: str,
    ) -> None:
        return None  # urllib then raises HTTPError for the 3xx itself


SECRET_PREFIX: Final = "whsec_"  # noqa: S105 - the format's prefix, not a secret
# The Standard Webhooks spec's bounds on a signing secret's key.
SECRET_BYTES: Final = (24, 64)


def signing_keys(secrets: Sequence[str]) -> list[bytes]:
    """The keys of `whsec_<base64>` secrets, or SettingsError naming what is wrong (never the
    secret)."""
    keys = []
    for secret in secrets:
        if not secret.startswith(SECRET_PREFIX):
            raise SettingsError("a notification signing secret must be whsec_<base64>")
        try:
            key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise SettingsError("a notification signing secret is not valid base64") from exc
        if not SECRET_BYTES[0] <= len(key) <= SECRET_BYTES[1]:
            raise SettingsError(
                f"a notification signing secret must be {SECRET_BYTES[0]} to {SECRET_BYTES[1]}"
                f" bytes, not {len(key)}"
            )
        keys.append(key)
    return keys


def signature_headers(
    secrets: Sequence[str], message_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """Standard Webhooks: HMAC-SHA256 of "{id}.{timestamp}.{body}", one `v1,<base64>` per
    active secret, space-separated, so a receiver holding either secret of a rotation
    verifies."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    signatures = [
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        for key in signing_keys(secrets)
    ]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signatures),
    }


def check_notify_url(url: str, allow_loopback_http: bool = False) -> None:
    """https only: a notification carries money and customers. Plain http is allowed only to
    a loopback address, and only when asked (the embedded stack's own sink)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "https" and parsed.hostname:
        return
    if parsed.scheme == "http" and allow_loopback_http and _is_loopback(parsed.hostname):
        return
    raise SettingsError(
        f"notifyUrl must be an https:// URL, not {redacted(url)!r}"
        " (plain http only to loopback, for the embedded stack's sink)"
    )


def _is_loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def retry_after_seconds(value: str | None, now: float) -> int | None:
    """A `Retry-After` header, delay-seconds or an HTTP-date, as seconds from now."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return int(text)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0, int(when.timestamp() - now))


def _active(secrets: Sequence[str]) -> Sequence[str]:
    if not secrets:
        raise SettingsError("no notification signing secret is active")
    return secrets


class HttpChannel:
    """POSTs the notification as JSON, signed the Standard Webhooks way: `webhook-id` (the
    outbox id, the receiver's dedupe key; also sent as `Idempotency-Key`), `webhook-timestamp`
    and `webhook-signature` (docs/notifications.md shows the receiving side).

    Only a 2xx to that very POST counts as delivered. Any other answer, a redirect included,
    and any failure of the connection (refused, reset, closed without an answer, a garbled
    answer, a timeout) is a ChannelError: the item backs off and is sent again with its key,
    no sooner than a `Retry-After` asks. A 410 Gone is a SinkGoneError: not retried there.
    """

    name = "http"

    def __init__(
        self,
        url: str,
        secrets: Callable[[], Sequence[str]],
        clock: Callable[[], float] = time.time,
        timeout_seconds: float = 5.0,
        allow_loopback_http: bool = False,
    ) -> None:
        self._url = url
        self._secrets = secrets
        self._clock = clock
        self._timeout = timeout_seconds
        self._allow_loopback_http = allow_loopback_http
        self._opener = urllib.request.build_opener(_RefuseRedirects())

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        try:
            # Checked at each send too, not only when the stack is synthesized: a URL set by
            # hand on the function never gets a notification in the clear.
            check_notify_url(self._url, self._allow_loopback_http)
            secrets = _active(self._secrets())
            body = item.model_dump_json(exclude={"status", "attempts", "revived_at"}).encode()
            headers = signature_headers(secrets, item.idempotency_key, int(self._clock()), body)
        except SettingsError as exc:
            raise ChannelError(f"HTTP sink: {exc}") from exc
        request = urllib.request.Request(  # noqa: S310 - https, checked above
            self._url,
            data=body,
            method="POST",
            headers={
                "Content-Type": "application/json",
                "Idempotency-Key": item.idempotency_key,
                **headers,
            },
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            self._refused(exc.code, exc.headers.get("Retry-After") if exc.headers else None)
            raise  # not reached: _refused raises
        # URLError, TimeoutError and ConnectionResetError are OSErrors; RemoteDisconnected
        # and BadStatusLine are HTTPExceptions. Their text can carry the URL: redacted.
        except (OSError, http.client.HTTPException) as exc:
            raise ChannelError(f"HTTP sink: {error_text(exc)}") from exc
        if not 200 <= status < 300:
            self._refused(status, response.headers.get("Retry-After"))

    def _refused(self, status: int, retry_after: str | None) -> None:
        if status == http.HTTPStatus.GONE:
            raise SinkGoneError("HTTP sink answered 410 Gone: it takes no more notifications")
        raise ChannelError(
            f"HTTP sink answered {status}", retry_after_seconds(retry_after, self._clock())
        )
