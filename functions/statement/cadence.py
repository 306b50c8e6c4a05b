"""How often the schedule reads a provider's statement, and the windows it reads it by.

- **Hourly** (Stripe, Mercado Pago: books listed by the second): windows of an hour at most
  after the checkpoint, the last one ending the provider's settle lag ago.
- **Daily** (Asaas: a statement listed by whole days of Brazil's time): each day read once,
  after its end plus the settle lag. A day read before it ended would be read again whole, with
  every payment it names, the next time: the account's API quota pays for each read.

Either way the checkpoint is the end of the last window read whole; a first run reads the last
window settled before it (the hour, or yesterday).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, tzinfo
from typing import Final

DAY_SECONDS: Final = 86_400


@dataclass(frozen=True)
class Cadence:
    name: str
    window_seconds: int  # the longest window (hourly); a day's (daily)
    zone: tzinfo | None = None  # set: each window is one whole day of this zone

    @property
    def by_day(self) -> bool:
        return self.zone is not None

    def with_window(self, seconds: int | None) -> Cadence:
        """This cadence with windows of `seconds` at most (None: its own); a day stays a day."""
        return self if seconds is None or self.by_day else replace(self, window_seconds=seconds)

    def next_window(self, checkpoint: int | None, settled: int) -> tuple[int, int] | None:
        """The window after `checkpoint` whose end is at or before `settled`; None when none
        has settled yet."""
        if self.zone is None:
            since = settled - self.window_seconds if checkpoint is None else checkpoint
            until = min(since + self.window_seconds, settled)
        else:
            since = self._day_start(self._day_of(settled) - timedelta(days=1))
            since = since if checkpoint is None else checkpoint
            # To the end of the checkpoint's day: a whole day once the checkpoint is a day's end.
            until = self._day_start(self._day_of(since) + timedelta(days=1))
        return (since, until) if since < until <= settled else None

    def due(self, settled: int) -> int:
        """Where a caught-up checkpoint is when `settled` has settled: the end of the last
        window the cadence could read by then (the last whole day's, daily)."""
        return settled if self.zone is None else self._day_start(self._day_of(settled))

    def settled_at_utc(self, settle_seconds: int, step_minutes: int = 15) -> tuple[int, int]:
        """(hour, minute) in UTC at which a daily cadence's rule fires: the first `step_minutes`
        mark after the zone's midnight plus the settle lag, so that the day just ended has
        settled when the run reads it."""
        if self.zone is None:
            raise ValueError(f"the {self.name} cadence reads no days")
        ready = self._day_start(date(2026, 1, 1)) + settle_seconds
        step = step_minutes * 60
        minutes = (-(-ready // step) * step // 60) % (24 * 60)
        return minutes // 60, minutes % 60

    def _day_of(self, seconds: int) -> date:
        return datetime.fromtimestamp(seconds, tz=self.zone).date()

    def _day_start(self, day: date) -> int:
        return int(datetime.combine(day, time(), self.zone).timestamp())


HOURLY: Final = Cadence("hourly", 3600)


def daily(zone: tzinfo) -> Cadence:
    return Cadence("daily", DAY_SECONDS, zone)
