"""What the written stories fill the providers' payloads with: numbers no other story of the
run uses, and timestamps as each provider writes them."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

_numbers = itertools.count(1)
BRAZIL = timezone(timedelta(hours=-3))


def next_number() -> int:
    """The run's next number: one count for every story, so that ids built on it never meet."""
    return next(_numbers)


def utc_iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds")


def brazil_iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=BRAZIL).isoformat(timespec="milliseconds")


def brazil_local(epoch: int) -> str:
    """Brazil's wall clock, as Asaas writes its dates (`2026-11-29 18:02:52`)."""
    return datetime.fromtimestamp(epoch, tz=BRAZIL).strftime("%Y-%m-%d %H:%M:%S")
