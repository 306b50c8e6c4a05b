"""The ingest -> process message contract, read from an SQS record.

Written by ingest: the body is the provider's raw payload text, unchanged; the `provider`
message attribute names the provider; `event_id` and `event_type` are informative only. A
Stripe event that Stripe's EventBridge destination delivered carries no attributes
(functions/process/eventbridge.py) and is read as ingest would have sent it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from functions.process.eventbridge import stripe_event_of
from functions.shared.errors import MalformedEventError
from functions.shared.settings import PaymentMode

# The attributes of a re-check's message: the object to read again and its watch's generation.
RECHECK_OBJECT: Final = "recheck_object"
RECHECK_GENERATION: Final = "recheck_generation"


@dataclass(frozen=True)
class Message:
    """A queue message in the ingest -> process contract: the raw body and its provider."""

    provider: str
    body: str
    event_id: str
    event_type: str


def message_of(record: SQSRecord) -> Message:
    attributes = record.message_attributes
    if attributes["provider"] is None:
        carried = stripe_event_of(record.body)
        return Message("stripe", carried.body, carried.event_id, carried.event_type)
    return Message(
        provider_of(record),
        record.body,
        text(record, "event_id") or record.message_id,
        text(record, "event_type"),
    )


def of_the_other_mode(record: SQSRecord, mode: Callable[[], PaymentMode]) -> bool:
    """A Stripe event EventBridge delivered whose `livemode` is not the stack's `mode()`
    (ingest checks a webhook's; `mode` is read only for such an event)."""
    if record.message_attributes["provider"] is not None:
        return False
    return stripe_event_of(record.body).livemode is not (mode() is PaymentMode.LIVE)


def provider_of(record: SQSRecord) -> str:
    provider = record.message_attributes["provider"]
    if provider is None or not provider.string_value:
        raise MalformedEventError("message has no 'provider' attribute")
    return provider.string_value


def rechecked(record: SQSRecord) -> tuple[str, str] | None:
    """The watched object and the watch's generation a re-check re-drive names, if it is one."""
    watched, generation = text(record, RECHECK_OBJECT), text(record, RECHECK_GENERATION)
    return (watched, generation) if watched and generation else None


def event_id_of(record: SQSRecord) -> str:
    """The event the record carries, for its log lines and its failure record: ingest's
    attribute, or the id of the Stripe event an EventBridge envelope holds; "" if neither."""
    if record.message_attributes["provider"] is not None:
        return text(record, "event_id")
    try:
        return stripe_event_of(record.body).event_id
    except MalformedEventError:
        return ""


def receives(record: SQSRecord) -> int:
    return int(record.attributes.approximate_receive_count or 1)


def text(record: SQSRecord, name: str) -> str:
    value = record.message_attributes[name]
    return value.string_value if value and value.string_value else ""
