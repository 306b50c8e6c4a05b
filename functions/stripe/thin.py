"""Stripe's thin events ("event notifications"): what changed, named, never shown.

A thin event names its event type (`v1.` and the snapshot event's type), when it happened and
the object it is about (`related_object`: id, type and the API path that reads it); the object
itself is read from Stripe's API (https://docs.stripe.com/event-destinations#thin-events, the
SDKs' `parse_event_notification` and `fetch_related_object`). It is signed like a snapshot
event (`Stripe-Signature`), so ingest verifies both the same way.

umavez reads the related object with the restricted key, on the newest API version the map
was checked against (thin events have no version of their own; the object comes in the version
asked for), and reads it through the same map, under the same keys, as the snapshot event of
that type: a payment announced thin and snapshot, on one stack, is one effect. The object is
read as it is *now*, as the statement reads a source: a refund that failed since books its
reversal too; a dispute read after its verdict books its opening and its verdict. The two
updates whose meaning is what changed (`charge.updated`, `charge.dispute.updated`) are read as
what the object now holds (what was captured so far; the dispute's opening or verdict), so the
event itself (`GET /v2/core/events/{id}`) is never needed.

The path read is built here from the object's type and id, never taken from the payload: the
key is never sent where a body says.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from functions.shared.errors import MalformedEventError
from functions.shared.provider_fields import refused

THIN_OBJECT: Final = "v2.core.event"
V1_PREFIX: Final = "v1."

# The v1 objects umavez books, by `related_object.type`: where the API reads each one, and
# the shape of its id.
RELATED_PATHS: Final[Mapping[str, tuple[str, re.Pattern[str]]]] = {
    "payment_intent": ("/v1/payment_intents/", re.compile(r"^pi_\w+$")),
    "charge": ("/v1/charges/", re.compile(r"^(ch|py)_\w+$")),
    "refund": ("/v1/refunds/", re.compile(r"^(re|pyr)_\w+$")),
    "dispute": ("/v1/disputes/", re.compile(r"^(dp|du)_\w+$")),
    "checkout.session": ("/v1/checkout/sessions/", re.compile(r"^cs_\w+$")),
    "invoice": ("/v1/invoices/", re.compile(r"^in_\w+$")),
    "invoice_payment": ("/v1/invoice_payments/", re.compile(r"^inpay_\w+$")),
}

# The object each event type is about, by the longest prefix of the snapshot type.
_RELATED_BY_TYPE: Final = (
    ("charge.dispute.", "dispute"),
    ("charge.refund.", "refund"),
    ("charge.", "charge"),
    ("payment_intent.", "payment_intent"),
    ("refund.", "refund"),
    ("checkout.session.", "checkout.session"),
    ("invoice_payment.", "invoice_payment"),
    ("invoice.", "invoice"),
)

# Updates read as what the object now holds, through the rule of the event that shows it.
READ_AS: Final[Mapping[str, str]] = {
    "charge.updated": "charge.captured",
    "charge.dispute.updated": "charge.dispute.funds_withdrawn",
}

# Reads a related object: (API path, connected account or None, API version) -> the object.
RelatedObjectSource = Callable[[str, str | None, str], Mapping[str, Any]]


class ThinEventError(MalformedEventError):
    """A thin event umavez cannot read: its related object is not the one its type is about,
    or names a path other than the object's own."""


class RelatedObject(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1, max_length=255)
    type: str = Field(min_length=1)
    url: str = Field(min_length=1)


class EventNotification(BaseModel):
    """A thin event as Stripe delivers it (webhook body, or EventBridge's `detail`)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(pattern=r"^evt_\w+$")
    object: Literal["v2.core.event"]
    type: str = Field(min_length=1)
    created: datetime
    livemode: StrictBool
    # A connected account's events name it: its objects are read in its context.
    context: str | None = Field(default=None, pattern=r"^acct_\w+(/acct_\w+)*$")
    related_object: RelatedObject | None = None

    @field_validator("created")
    @classmethod
    def _zoned(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("created has no time zone")
        return value

    @property
    def created_seconds(self) -> int:
        return int(self.created.timestamp())

    @property
    def snapshot_type(self) -> str | None:
        """The snapshot event's type this one announces; None for a v2 event (no v1 object)."""
        return self.type.removeprefix(V1_PREFIX) if self.type.startswith(V1_PREFIX) else None


def is_thin(payload: Mapping[str, Any]) -> bool:
    return payload.get("object") == THIN_OBJECT


def notification_of(payload: Mapping[str, Any]) -> EventNotification:
    try:
        return EventNotification.model_validate(payload)
    except ValidationError as exc:
        raise refused(exc, what="not a Stripe thin event") from exc


def related_path(notification: EventNotification, snapshot_type: str) -> str:
    """The API path of the object the event is about, checked against its type."""
    related = notification.related_object
    if related is None:
        raise ThinEventError(f"thin event {notification.id} ({notification.type}) names no object")
    expected = next(
        (kind for prefix, kind in _RELATED_BY_TYPE if snapshot_type.startswith(prefix)), None
    )
    if expected is None or related.type != expected:
        raise ThinEventError(
            f"thin event {notification.id} ({notification.type}) names a {related.type!r}, "
            f"not a {expected!r}"
        )
    base, id_shape = RELATED_PATHS[expected]
    if not id_shape.match(related.id):
        raise ThinEventError(f"{related.id!r} is not a Stripe {expected} id")
    path = f"{base}{related.id}"
    if related.url.split("?", 1)[0] != path:
        raise ThinEventError(
            f"thin event {notification.id} reads {related.id} at {related.url[:80]!r}, not {path}"
        )
    return path


def snapshot_of(
    notification: EventNotification,
    snapshot_type: str,
    read: RelatedObjectSource,
    api_version: str,
) -> dict[str, Any]:
    """The snapshot event the map reads for a thin one: its related object as the API answers
    it now, in `api_version`, under the type whose rule reads what that object holds."""
    path = related_path(notification, snapshot_type)
    current = read(path, notification.context, api_version)
    related_id = notification.related_object.id if notification.related_object else ""
    if current.get("id") != related_id:
        raise ThinEventError(f"Stripe answered {path} with {str(current.get('id'))[:40]!r}")
    return {
        "id": notification.id,
        "object": "event",
        "type": READ_AS.get(snapshot_type, snapshot_type),
        "created": notification.created_seconds,
        "api_version": api_version,
        "livemode": notification.livemode,
        "data": {"object": dict(current)},
    }
