"""The windows each cadence reads (functions/statement/cadence.py): an hour at most, or a whole
day of a zone, and where a caught-up checkpoint is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from functions.asaas.models import BRAZIL
from functions.statement.cadence import HOURLY, daily

DAILY = daily(BRAZIL)
# 2026-11-29T00:00:00-03:00: a Brazil day's start.
DAY_START = int(datetime(2026, 11, 29, 3, tzinfo=UTC).timestamp())


def test_a_daily_window_reads_from_a_checkpoint_inside_a_day_to_that_day_s_end() -> None:
    # Given a checkpoint at 14:00 of a Brazil day (left by an hourly schedule, or an operator)
    checkpoint = DAY_START + 14 * 3600

    # Then the next window is the rest of that day, and after it whole days
    settled = DAY_START + 3 * 86_400
    assert DAILY.next_window(checkpoint, settled) == (checkpoint, DAY_START + 86_400)
    assert DAILY.next_window(DAY_START + 86_400, settled) == (
        DAY_START + 86_400,
        DAY_START + 2 * 86_400,
    )


def test_a_first_daily_window_is_the_last_whole_day_settled() -> None:
    # A minute after Brazil's midnight has settled, the day that just ended
    assert DAILY.next_window(None, DAY_START + 60) == (DAY_START - 86_400, DAY_START)
    # A minute before it, the day before that
    assert DAILY.next_window(None, DAY_START - 60) == (DAY_START - 2 * 86_400, DAY_START - 86_400)


def test_a_caught_up_checkpoint_is_due_at_the_cadence_s_last_window_end() -> None:
    assert DAILY.due(DAY_START + 23 * 3600) == DAY_START
    assert HOURLY.due(DAY_START + 23 * 3600) == DAY_START + 23 * 3600


def test_a_shorter_window_shortens_an_hourly_cadence_and_leaves_a_day_a_day() -> None:
    assert HOURLY.with_window(600).window_seconds == 600
    assert DAILY.with_window(600) == DAILY


def test_a_daily_rule_fires_at_the_quarter_hour_after_the_zone_s_midnight_has_settled() -> None:
    # Brazil's midnight is 03:00 UTC; 5 minutes of lag, the next quarter hour
    assert DAILY.settled_at_utc(300) == (3, 15)
    assert DAILY.settled_at_utc(0) == (3, 0)
    with pytest.raises(ValueError, match="reads no days"):
        HOURLY.settled_at_utc(300)
