"""Names and defaults of the operational settings shared by several functions, without
pydantic (ingest reads them too). Each function's model of its whole environment is in
functions/shared/environment.py (ingest's in functions/ingest/environment.py)."""

from __future__ import annotations

from enum import StrEnum
from typing import Final

# DELIVERY audit records and sent outbox items expire (TTL) after this many days.
RETENTION_DAYS_ENV: Final = "RETENTION_DAYS"
DEFAULT_RETENTION_DAYS: Final = 90
# An outbox item that could not be sent is given up (dead) when it is this old, not after a
# number of attempts: a sink outage of hours must not bury notifications.
OUTBOX_GIVE_UP_HOURS_ENV: Final = "OUTBOX_GIVE_UP_HOURS"
DEFAULT_OUTBOX_GIVE_UP_HOURS: Final = 24
# Which of the providers' modes this deployment applies (`-c stripeMode=live|test`).
PAYMENT_MODE_ENV: Final = "PAYMENT_MODE"
# The webhook queue: ingest sends to it, the waiting room re-drives to it.
WEBHOOK_QUEUE_URL_ENV: Final = "WEBHOOK_QUEUE_URL"


class PaymentMode(StrEnum):
    LIVE = "live"
    TEST = "test"
