"""Where notifications go. Every channel carries the outbox item's id as its dedupe key."""

from __future__ import annotations

import http.client
import json
import urllib.request
from typing import IO, TYPE_CHECKING, Final, Protocol

from botocore.exceptions import BotoCoreError, ClientError

from functions.outbox.templates import emails_customer, render
from functions.shared.errors import RetryableError
from functions.shared.outbox import EMAIL_CHANNEL, OutboxItem

if TYPE_CHECKING:
    from mypy_boto3_events import EventBridgeClient
    from mypy_boto3_sesv2 import SESV2Client

EVENT_SOURCE: Final = "umavez"


class ChannelError(RetryableError):
    """The sink did not take the notification; the item goes back to pending with backoff."""


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
            raise ChannelError(f"SES: {exc}") from exc


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
            raise ChannelError(f"EventBridge: {exc}") from exc
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


class HttpChannel:
    """POSTs the notification as JSON with an `Idempotency-Key` header.

    Only a 2xx to that very POST counts as delivered. Any other answer, a redirect included,
    and any failure of the connection (refused, reset, closed without an answer, a garbled
    answer, a timeout) is a ChannelError: the item backs off and is sent again with its key.
    """

    name = "http"

    def __init__(self, url: str, timeout_seconds: float = 5.0) -> None:
        self._url = url
        self._timeout = timeout_seconds
        self._opener = urllib.request.build_opener(_RefuseRedirects())

    def applies_to(self, item: OutboxItem) -> bool:
        return True

    def send(self, item: OutboxItem) -> None:
        body = item.model_dump_json(exclude={"status", "attempts", "revived_at"}).encode()
        request = urllib.request.Request(  # noqa: S310 - URL from the stack's configuration
            self._url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Idempotency-Key": item.idempotency_key},
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                status = response.status
        # URLError/HTTPError, TimeoutError and ConnectionResetError are OSErrors;
        # RemoteDisconnected and BadStatusLine are HTTPExceptions.
        except (OSError, http.client.HTTPException) as exc:
            raise ChannelError(f"HTTP sink: {exc!r}") from exc
        if not 200 <= status < 300:
            raise ChannelError(f"HTTP sink answered {status}")
