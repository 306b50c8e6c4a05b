"""Decimal amounts (Mercado Pago, Asaas send reais) to integer minor units, exactly."""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

from functions.shared.errors import MalformedEventError


def minor_units(value: object) -> int:
    try:
        amount = Decimal(str(value))
    except InvalidOperation as exc:
        raise MalformedEventError(f"amount {value!r} is not a number") from exc
    if not amount.is_finite() or amount < 0:
        raise MalformedEventError(f"amount {value!r} is not a non-negative number")
    return int((amount * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))
