"""Which handler answers a request to an in-memory service: the one its operation names, or
the service's own error for an operation the store does not hold (AWS answers an unknown
action the same way: with the service's error, not a crash)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

Handler = TypeVar("Handler")


def handler_for(
    operations: Mapping[str, Handler],
    operation: str,
    error: Callable[[str, str], Exception],
    code: str,
) -> Handler:
    """`operations[operation]`, or `error(code, ...)` raised naming the operation."""
    handler = operations.get(operation)
    if handler is None:
        raise error(code, f"{operation} is not held in memory")
    return handler
