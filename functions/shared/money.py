"""Money in integer minor units, with each currency's ISO 4217 exponent.

Stripe sends minor units already (JPY 1234 is ¥1,234, BRL 5000 is R$ 50.00); Mercado Pago and
Asaas send decimals in major units (CLP 5000 is 5,000 pesos, BRL 19.99). One table converts the
decimals exactly and renders every amount, so no path assumes two decimals.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Final

from functions.shared.errors import MalformedEventError

# Stripe's zero-decimal list, which follows ISO 4217 (ISK, HUF and TWD are special cases at
# Stripe, sent with two decimals, so they stay at the default).
ZERO_DECIMAL: Final = frozenset(
    [
        "bif",
        "clp",
        "djf",
        "gnf",
        "jpy",
        "kmf",
        "krw",
        "mga",
        "pyg",
        "rwf",
        "ugx",
        "vnd",
        "vuv",
        "xaf",
        "xof",
        "xpf",
    ]
)
THREE_DECIMAL: Final = frozenset({"bhd", "jod", "kwd", "omr", "tnd"})
DEFAULT_EXPONENT: Final = 2


def exponent(currency: str) -> int:
    code = currency.lower()
    if code in ZERO_DECIMAL:
        return 0
    if code in THREE_DECIMAL:
        return 3
    return DEFAULT_EXPONENT


def to_minor(value: object, currency: str) -> int:
    """A decimal amount in major units to exact minor units; never rounds.

    JSON numbers reach us as int, float or str; `str(float)` is the shortest text that reads
    back as the same float, which is the text the provider sent (19.99 -> "19.99").
    """
    try:
        amount = Decimal(str(value))
    except InvalidOperation as exc:
        raise MalformedEventError(f"amount {value!r} is not a number") from exc
    if not amount.is_finite() or amount < 0:
        raise MalformedEventError(f"amount {value!r} is not a non-negative number")
    minor = amount.scaleb(exponent(currency))
    if minor != minor.to_integral_value():
        raise MalformedEventError(
            f"amount {value!r} has more decimals than {currency.upper()} allows "
            f"({exponent(currency)}); refusing to round money"
        )
    return int(minor)


def render(minor: int, currency: str) -> str:
    """`JPY 1234`, `BRL 50.00`, `KWD 1.500`, `BRL -20.00`."""
    places = exponent(currency)
    sign = "-" if minor < 0 else ""
    whole, fraction = divmod(abs(minor), 10**places)
    text = f"{whole}.{fraction:0{places}d}" if places else str(whole)
    return f"{currency.upper()} {sign}{text}"
