"""Operational settings the stack passes to the functions as environment variables.

One place for their names and defaults, read by the functions, the local stack and infra.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
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


class PaymentMode(StrEnum):
    LIVE = "live"
    TEST = "test"


def retention_seconds(environ: Mapping[str, str] = os.environ) -> int:
    return int(environ.get(RETENTION_DAYS_ENV, DEFAULT_RETENTION_DAYS)) * 86_400


def outbox_give_up_seconds(environ: Mapping[str, str] = os.environ) -> int:
    return int(environ.get(OUTBOX_GIVE_UP_HOURS_ENV, DEFAULT_OUTBOX_GIVE_UP_HOURS)) * 3600


def payment_mode(environ: Mapping[str, str] = os.environ) -> PaymentMode:
    """Test unless configured: a deployment never applies live money by default by accident,
    and the stack sets `live` explicitly in prod."""
    return PaymentMode(environ.get(PAYMENT_MODE_ENV, PaymentMode.TEST.value))
