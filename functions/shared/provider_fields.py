"""What every adapter reads strictly, as pydantic types, and the one way a payload that fails
them is refused: an InvalidFieldError naming the first field at fault, so the dead letter says
which field to look at.

Lax parsing would coerce: `true` to 1, `"20.00"` to 20, 20.0 to 20, `"USD"` to a currency of
its own. Here a Stripe amount is a JSON integer, a decimal amount keeps the value it arrived as
(converted later, exactly, with its currency's exponent), and a currency is an ISO 4217 code in
the ledger's case.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from pydantic import Field, PlainValidator, Strict, ValidationError
from pydantic_core import PydanticCustomError

from functions.shared.money import InvalidFieldError, InvalidMoneyError, canonical_currency

# Seconds since the epoch, before the year 2286: a larger value is milliseconds or garbage, and
# as an ordering token it would make every later event of its order stale.
MAX_EPOCH_SECONDS: Final = 10**10


def _currency(value: object) -> str:
    try:
        return canonical_currency(value, "currency")
    except InvalidMoneyError as exc:
        raise PydanticCustomError("currency", "{problem}", {"problem": exc.problem}) from exc


def _decimal_as_sent(value: object) -> int | float | str:
    """The amount unchanged (pydantic's lax union would read `true` as 1); its form and
    magnitude are checked where its currency is known (`money.to_minor`)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PydanticCustomError(
            "decimal_amount", "{kind} is not a decimal amount", {"kind": type(value).__name__}
        )
    return value


Currency = Annotated[str, PlainValidator(_currency)]
MinorUnits = Annotated[int, Strict(), Field(ge=0)]
DecimalAmount = Annotated[int | float | str, PlainValidator(_decimal_as_sent)]
EpochSeconds = Annotated[int, Strict(), Field(gt=0, lt=MAX_EPOCH_SECONDS)]


def refused(exc: ValidationError, prefix: str = "", what: str = "") -> InvalidFieldError:
    """The first field pydantic refused, by its path under `prefix` (the rest in the text);
    `what` says what the payload failed to be."""
    errors = exc.errors(include_url=False)

    def path(error: Any) -> str:
        parts = [prefix, *(str(part) for part in error["loc"])]
        return ".".join(part for part in parts if part) or "body"

    others = "; ".join(f"{path(error)}: {error['msg']}" for error in errors[1:5])
    problem = (
        (f"{what}: " if what else "") + errors[0]["msg"] + (f" (also {others})" if others else "")
    )
    return InvalidFieldError(path(errors[0]), problem)
