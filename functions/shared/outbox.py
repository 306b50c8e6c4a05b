"""The outbox item: written by process in the effect's transaction, read by the sender."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    pass

# The e-mail channel's name in an item's `channels_sent`: a notification that left before the
# order knew whom to e-mail is re-opened (`reopen_for_email`).
EMAIL_CHANNEL: Final = "email"
# Set on an item sent without the e-mail its policy owes, for want of a recipient: the only
# items `reopen_for_email` re-opens (a resend naming the customer of an item never e-mailed by
# policy changes nothing).
EMAIL_OWED: Final = "email_owed"


class OutboxStatus(StrEnum):
    PENDING = "pending"
    SENDING = "sending"
    SENT = "sent"
    DEAD = "dead"


def outbox_id_for(effect_key: str) -> str:
    """One outbox item per effect: its id, and so every sink's dedupe key, derives from the key."""
    return f"obx_{effect_key}"


class OutboxItem(BaseModel):
    """What to notify, to whom, with the data it needs."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    outbox_id: str = Field(pattern=r"^obx_[0-9a-f]{64}$")
    effect_key: str
    order_id: str
    transition: str
    amount: int
    currency: str
    provider: str
    external_ref: str
    event_id: str
    recipient: str | None = None
    payment: str | None = None
    # Provider time of the movement, and whether it arrived after a newer event of its order
    # (a stale entry: counted and announced, its status change discarded).
    provider_time: int | None = None
    late: bool = False
    # Late, and a newer movement of the same payment was counted before it (a payment after
    # its own refund): news the customer was already told otherwise. A late movement of
    # another payment of the order (a deposit and its balance crossing) contradicts nothing.
    # None (an item written without it) reads as `late`.
    superseded: bool | None = None
    # Booked from the provider's statement (its books read back): no delivery brought it.
    found_by_statement: bool = False
    status: OutboxStatus
    attempts: int = 0
    created_at: str
    # Set when an operator revives a dead item: the give-up age counts from here then.
    revived_at: str | None = None
    # Filled at send time from the order (the transaction that wrote the item reads nothing):
    # its status, and what the provider kept and paid out of it once its statement was read
    # (fees and net in the account's settlement currency).
    financial_status: str | None = None
    fee_total: int | None = None
    net_total: int | None = None
    settlement_currency: str | None = None

    @property
    def idempotency_key(self) -> str:
        return self.outbox_id


def give_up_clock_start(item: Mapping[str, Any]) -> float:
    """When the item's give-up age starts: its revival if it was revived, else its creation.

    An unreadable time counts as the epoch, so such an item is given up on its first failure
    (visible, alarmed) instead of retried forever.
    """
    stamp = item.get("revived_at") or item.get("created_at")
    try:
        moment = datetime.fromisoformat(str(stamp))
    except ValueError:
        return 0.0
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def iso_time(epoch_seconds: float) -> str:
    """The format `created_at` is written in (UTC, milliseconds)."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC).isoformat(timespec="milliseconds")
