"""What must happen before the 200, and nothing more: authenticate, check, enqueue once."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from functions.asaas.signature import AsaasVerifier
from functions.mercadopago.signature import MercadoPagoVerifier
from functions.shared.rejections import (
    MalformedRequestError,
    MethodNotAllowedError,
    PayloadTooLargeError,
    UnknownRouteError,
)
from functions.shared.settings import PaymentMode
from functions.shared.webhooks import Envelope, WebhookRequest, WebhookVerifier
from functions.stripe.signature import StripeVerifier

MAX_BODY_BYTES: Final = 256 * 1024
VERIFIERS: Final[Mapping[str, WebhookVerifier]] = {
    "stripe": StripeVerifier(),
    "mercadopago": MercadoPagoVerifier(),
    "asaas": AsaasVerifier(),
}


class SecretStore(Protocol):
    def active_secrets(self, provider: str) -> tuple[str, ...]:
        """Every secret currently valid for `provider` (more than one during a rotation)."""


class Queue(Protocol):
    def send(self, body: str, attributes: Mapping[str, str]) -> str:
        """Enqueue durably and return the message id, or raise UnavailableError."""


@dataclass(frozen=True)
class Accepted:
    provider: str
    envelope: Envelope
    message_id: str


@dataclass(frozen=True)
class Ignored:
    """Authentic, but not for this deployment: answered 200 (a 4xx would make the provider
    retry for days and flag the endpoint), never enqueued, counted under its reason."""

    provider: str
    envelope: Envelope
    reason: str
    message: str


class WebhookIngest:
    def __init__(
        self,
        verifiers: Mapping[str, WebhookVerifier],
        secrets: SecretStore,
        queue: Queue,
        clock: Callable[[], float],
        max_body_bytes: int = MAX_BODY_BYTES,
        mode: PaymentMode = PaymentMode.TEST,
    ) -> None:
        self._verifiers = verifiers
        self._secrets = secrets
        self._queue = queue
        self._clock = clock
        self._max_body_bytes = max_body_bytes
        self._mode = mode

    def accept(self, request: WebhookRequest) -> Accepted | Ignored:
        if request.method != "POST":
            raise MethodNotAllowedError("method_not_allowed", "only POST is accepted")
        verifier = self._verifiers.get(request.provider)
        if verifier is None:
            raise UnknownRouteError("unknown_provider", f"no provider {request.provider!r} here")
        if len(request.body) > self._max_body_bytes:
            raise PayloadTooLargeError(
                "payload_too_large", f"body over {self._max_body_bytes} bytes"
            )
        verifier.verify(request, self._secrets.active_secrets(request.provider), self._clock())
        envelope = verifier.envelope(_json_object(request.body), request)
        if envelope.live is not None and envelope.live != (self._mode is PaymentMode.LIVE):
            # Stripe Connect platforms' live endpoints legitimately receive test events; and a
            # test secret left among the active ones must never credit a live order.
            event_mode = PaymentMode.LIVE if envelope.live else PaymentMode.TEST
            return Ignored(
                request.provider,
                envelope,
                f"{event_mode.value}_mode",
                f"a {event_mode.value}-mode event on a {self._mode.value} deployment",
            )
        message_id = self._queue.send(
            sqs_safe_json(request.body.decode("utf-8")),
            {
                "provider": request.provider,
                "event_id": queue_attribute(envelope.event_id),
                "event_type": queue_attribute(envelope.event_type),
            },
        )
        return Accepted(request.provider, envelope, message_id)


def _json_object(body: bytes) -> Mapping[str, Any]:
    try:
        # UTF-8 strictly, as JSON is exchanged: `json.loads(bytes)` would also take UTF-16 and
        # UTF-32, and surrogates encoded in UTF-8, which the queue's text could never carry.
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise MalformedRequestError("not_json", "body is not JSON") from exc
    except RecursionError as exc:
        # Nested deeper than the parser recurses (about a thousand levels): no provider sends
        # that, and the request must be refused, not end the invocation in a 5xx.
        raise MalformedRequestError("too_deep", "body is nested too deeply to read") from exc
    if not isinstance(payload, dict):
        raise MalformedRequestError("not_json", "body is not a JSON object")
    return payload


# What an SQS message may not contain (it allows #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
# #x10000-#x10FFFF). Surrogates never survive a strict UTF-8 decode; the C0 controls cannot
# appear raw in JSON that parsed (only escaped); U+FFFE and U+FFFF can, inside strings.
NOT_SQS_TEXT: Final = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def sqs_safe_json(text: str) -> str:
    """The body as the queue can carry it: each code point SQS refuses written as its JSON
    escape. Valid JSON has such characters only inside strings, where the escape is the same
    value, so process reads the same payload (it parses JSON and checks no signature: ingest
    did, on the raw bytes). Any other body is sent exactly as received."""
    return NOT_SQS_TEXT.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def queue_attribute(value: str) -> str:
    """SQS attributes are informative here; keep them short and printable so a send never fails."""
    printable = "".join(ch if ch.isprintable() else "?" for ch in value)
    return printable[:256] or "?"
