"""One reading of `umavez status` (a name, its line, whether a person is needed, its facts),
and ages as the readings say them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reading:
    name: str
    summary: str
    needs_person: bool
    facts: dict[str, Any] = field(default_factory=dict)


def age_text(seconds: float) -> str:
    """An age as the readings say it: in seconds, minutes, hours or days."""
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 2 * 3600:
        return f"{seconds // 60} min"
    if seconds < 2 * 86_400:
        return f"{seconds // 3600} h"
    return f"{seconds // 86_400} d"
