"""The drill's progress: a bar redrawn in place on a terminal, plain lines anywhere else."""

from __future__ import annotations

import io

from firedrill.progress import ProgressBar


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_draws_a_bar_in_place_on_a_terminal() -> None:
    terminal = FakeTerminal()
    progress = ProgressBar(terminal, width=10)

    for done in range(1, 5):
        progress(done, 4)

    drawn = terminal.getvalue()
    assert drawn.count("\r") == 4
    assert drawn.endswith("\r  delivering [##########] 4/4\n")
    assert drawn.count("\n") == 1


def test_progress_elsewhere_is_a_plain_line_every_few_seconds_and_at_the_end() -> None:
    # Given a log file (not a terminal) and a clock
    log, clock = io.StringIO(), FakeClock()
    progress = ProgressBar(log, every_seconds=5, clock=clock)

    # When 1,000 deliveries tick by over 12 seconds
    for done in range(1, 1001):
        clock.now = 100.0 + 12 * done // 1000  # whole seconds
        progress(done, 1000)

    # Then a line at the start, every 5 seconds, and at the end: no carriage return
    assert "\r" not in log.getvalue()
    assert log.getvalue().splitlines() == [
        "  delivered 1/1000 (0%), 0 s",
        "  delivered 417/1000 (41%), 5 s",
        "  delivered 834/1000 (83%), 10 s",
        "  delivered 1000/1000 (100%), 12 s",
    ]
