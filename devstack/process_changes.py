"""What the embedded stack changes in the process it runs in (the functions' environment, module
attributes, cached wiring, log streams), each change put back when the stack stops, the last
first: a second stack, or a test after it, starts from the process as it was."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any


class ProcessChanges:
    def __init__(self) -> None:
        self._undo: list[Callable[[], object]] = []

    def on_undo(self, step: Callable[[], object]) -> None:
        """`step` runs when the stack stops (before the steps added earlier)."""
        self._undo.append(step)

    def set_environment(self, values: dict[str, str]) -> None:
        previous = {name: os.environ.get(name) for name in values}

        def restore() -> None:
            for name, value in previous.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

        os.environ.update(values)
        self._undo.append(restore)

    def patch(self, module: Any, name: str, value: Any) -> None:
        original = getattr(module, name)
        setattr(module, name, value)
        self._undo.append(lambda: setattr(module, name, original))

    def clear_caches(self, *cached: Any) -> None:
        """The functions' cached wiring, built anew for this stack and again once it stops."""
        for wiring in cached:
            wiring.cache_clear()
            self._undo.append(wiring.cache_clear)

    def redirect_logs(self, logger: Any, stream: Any) -> None:
        handler = logger.registered_handler
        if isinstance(handler, logging.StreamHandler):
            previous = handler.setStream(stream)
            self._undo.append(lambda: handler.setStream(previous))

    def undo_all(self) -> None:
        for undo in reversed(self._undo):
            undo()
