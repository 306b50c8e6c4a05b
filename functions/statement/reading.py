"""Reading a provider's statement API: one page, tried again while the provider is limiting
the rate or cannot answer now, with a pause that doubles; then the read stops, saying where to
resume."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from functions.shared.errors import UmavezError
from functions.shared.provider_api import ProviderApiUnavailableError

RETRIED_STATUSES: Final = frozenset({429, 500, 502, 503, 504})
ATTEMPTS: Final = 5  # a page read at most this many times: pauses of 1, 2, 4 and 8 s
FIRST_PAUSE_SECONDS: Final = 1.0

T = TypeVar("T")


class StatementNotConfiguredError(UmavezError):
    """No credential to read the statement with: nothing was read."""


class StatementInterruptedError(UmavezError):
    """The API kept failing mid-way; `resume` is the cursor that continues after the last page
    read (None: from the start). Nothing read is booked until the read is complete."""

    def __init__(self, detail: str, resume: str | None) -> None:
        super().__init__(detail)
        self.resume = resume


def read_page(
    get: Callable[[], T],
    sleep: Callable[[float], None],
    what: str,
    resume: str | None,
    attempts: int = ATTEMPTS,
) -> T:
    """`get()` once, or again after 1, 2, 4, 8 s while it answers 429 or 5xx (or nothing), at
    most `attempts` times in all (a page, or one object the statement names)."""
    pause, attempt = FIRST_PAUSE_SECONDS, 1
    while True:
        try:
            return get()
        except ProviderApiUnavailableError as exc:
            transient = exc.status is None or exc.status in RETRIED_STATUSES
            if not transient or attempt >= attempts:
                raise StatementInterruptedError(f"{what}: {exc}", resume) from exc
        sleep(pause)
        pause, attempt = pause * 2, attempt + 1
