"""The reconciliation's times as the ledger writes them: ISO stamps to the millisecond, in UTC,
sortable as text, and a window cut at each hour (the `changed` index is bucketed by hour)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta


def iso(seconds: float) -> str:
    """The format the process function stamps `updated_at` with (sortable as text)."""
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds")


def hours(start: str, until: str) -> Iterator[tuple[str, str]]:
    """[start, until] cut at each hour: the `changed` index is bucketed by hour."""
    cursor = datetime.fromisoformat(start)
    end = datetime.fromisoformat(until)
    while cursor <= end:
        next_hour = cursor.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
        hour_end = min(end, next_hour - timedelta(milliseconds=1))
        yield _stamp(cursor), _stamp(hour_end)
        cursor = next_hour


def shifted(stamp: str, seconds: float) -> str:
    return _stamp(datetime.fromisoformat(stamp) + timedelta(seconds=seconds))


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")
