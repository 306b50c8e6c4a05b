"""Provider adapters: turn a provider's raw payload into what it means for our orders."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from functions.shared.domain import Interpretation
from functions.shared.errors import UnknownProviderError
from functions.shared.providers import stripe

Interpreter = Callable[[str], Interpretation]

INTERPRETERS: Final[Mapping[str, Interpreter]] = {
    stripe.PROVIDER: stripe.interpret,
}


def interpret(provider: str, raw_body: str) -> Interpretation:
    try:
        interpreter = INTERPRETERS[provider]
    except KeyError as exc:
        raise UnknownProviderError(f"no adapter for provider {provider!r}") from exc
    return interpreter(raw_body)
