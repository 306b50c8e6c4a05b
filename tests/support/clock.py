"""An injected clock, so no test sleeps or depends on the machine's time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class FakeClock:
    now: float = 1_764_460_800.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
