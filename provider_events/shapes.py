"""The captured payload shapes (tests/events) and unique ids to fill them with."""

from __future__ import annotations

import copy
import itertools
import json
from functools import cache
from pathlib import Path
from typing import Any

EVENTS_DIR = Path(__file__).resolve().parent.parent / "tests" / "events"
_sequence = itertools.count(1)


@cache
def _loaded(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS_DIR / path).read_text())
    return loaded


def shape(path: str) -> dict[str, Any]:
    """A fresh copy of the shape at `path` under tests/events (`asaas/PAYMENT_RECEIVED.json`)."""
    return copy.deepcopy(_loaded(path))


def unique(prefix: str) -> str:
    return f"{prefix}_test{next(_sequence):08d}"
