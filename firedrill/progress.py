"""The drill's progress on the console: a bar on a terminal, plain lines anywhere else."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO


class ProgressBar:
    """A bar redrawn in place on a terminal; anywhere else (a file, a pipe, a CI log) a plain
    line every `every_seconds` and one at the end, never a carriage return."""

    def __init__(
        self,
        stream: TextIO = sys.stderr,
        width: int = 40,
        every_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stream = stream
        self._width = width
        self._every = every_seconds
        self._clock = clock
        self._tty = _isatty(stream)
        self._started: float | None = None
        self._last_line = -float("inf")
        self._finished = False

    def __call__(self, done: int, total: int) -> None:
        now = self._clock()
        if self._started is None:
            self._started = now
        if self._finished:
            return
        self._finished = done >= total
        if self._tty:
            filled = int(self._width * done / max(total, 1))
            self._stream.write(
                f"\r  delivering [{'#' * filled}{'.' * (self._width - filled)}] {done}/{total}"
            )
            if self._finished:
                self._stream.write("\n")
        elif self._finished or now - self._last_line >= self._every:
            self._last_line = now
            share = 100 * done // max(total, 1)
            self._stream.write(
                f"  delivered {done}/{total} ({share}%), {now - self._started:.0f} s\n"
            )
        self._stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False
