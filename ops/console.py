"""The local commands' console shows what a person needs (the stack's URLs, progress, the
report); warnings raised meanwhile, by the handlers or the libraries under them, go to a file
of their own, as one JSON line each (the handlers' own lines are in each stack's log)."""

from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

LOG_PATH = Path(".local/warnings.jsonl")


@contextmanager
def warnings_to_log(path: Path = LOG_PATH) -> Iterator[None]:
    """While inside, `warnings` are written to `path` instead of stderr (filters unchanged)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    with path.open("a") as log, warnings.catch_warnings():

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            record: dict[str, Any] = {
                "level": "WARNING",
                "location": f"{filename}:{lineno}",
                "message": str(message),
                "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "service": "py.warnings",
                "category": category.__name__,
            }
            with lock:
                log.write(json.dumps(record) + "\n")
                log.flush()

        warnings.showwarning = show
        yield
