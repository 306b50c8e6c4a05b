"""Stripe's events delivered by an Amazon EventBridge event destination, not a webhook.

Stripe's event destination puts each event on a partner event bus in the merchant's account
(source `aws.partner/stripe.com/<destination>`, detail-type the event's type, detail the
event itself, snapshot or thin: https://docs.stripe.com/event-destinations/eventbridge), and
the stack's rule on that bus sends it to the webhook queue as EventBridge's envelope, with no
message attributes. There is no signature on this path: the bus accepts only its partner
source, and only that rule may send to the queue besides ingest (its policy), so the envelope
is Stripe's.
What the webhook path checks still holds: the event's `livemode` is the stack's, else it is
ignored (acknowledged, never applied), as ingest does for a webhook.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from functions.shared.errors import MalformedEventError

STRIPE_PARTNER_SOURCE: Final = "aws.partner/stripe.com/"
# A snapshot event, or a thin one (its object read from Stripe's API, as for a webhook).
STRIPE_EVENT_OBJECTS: Final = frozenset({"event", "v2.core.event"})


@dataclass(frozen=True)
class StripeEnvelope:
    """The Stripe event an EventBridge envelope carries, as the webhook would have sent it."""

    body: str
    event_id: str
    event_type: str
    livemode: bool


def stripe_event_of(body: str) -> StripeEnvelope:
    """The Stripe event in `body`, an EventBridge envelope; MalformedEventError if the body is
    no such envelope (a message without the provider attribute that ingest always sets)."""
    try:
        envelope: Any = json.loads(body)
    except ValueError as exc:
        raise MalformedEventError("message has no 'provider' attribute and is not JSON") from exc
    source = envelope.get("source") if isinstance(envelope, dict) else None
    detail = envelope.get("detail") if isinstance(envelope, dict) else None
    if not (isinstance(source, str) and source.startswith(STRIPE_PARTNER_SOURCE)):
        raise MalformedEventError(
            "message has no 'provider' attribute and is not a Stripe event from EventBridge "
            f"(source {str(source)[:60]!r})"
        )
    if not isinstance(detail, dict) or detail.get("object") not in STRIPE_EVENT_OBJECTS:
        raise MalformedEventError(f"EventBridge event from {source} carries no Stripe event")
    event_id, event_type = detail.get("id"), detail.get("type")
    if not (isinstance(event_id, str) and isinstance(event_type, str)):
        raise MalformedEventError(f"the Stripe event from {source} has no id or type")
    return StripeEnvelope(json.dumps(detail), event_id, event_type, detail.get("livemode") is True)
