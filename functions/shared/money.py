"""Money in integer minor units, with each currency's ISO 4217 exponent, read strictly.

Stripe sends minor units already (JPY 1234 is ¥1,234, BRL 5000 is R$ 50.00); Mercado Pago and
Asaas send decimals in major units (CLP 5000 is 5,000 pesos, BRL 19.99). One table converts the
decimals exactly and renders every amount, so no path assumes two decimals.

What a provider sends is refused, naming the field, unless it is money: a currency of ISO 4217
(in the ledger's case), an amount that is an integer of minor units (Stripe) or a decimal with
no more places than its currency has (Mercado Pago, Asaas), within `max_minor`. The magnitude
is checked before any decimal arithmetic, so no context ever rounds, or overflows, on the way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Final

from functions.shared.errors import MalformedEventError


class InvalidFieldError(MalformedEventError):
    """A field of a provider's payload that cannot be what it must be. `field` is its path in
    the payload (`data.object.amount_received`, `payment.refunds.0.amount`), so the dead letter
    says what to look at; retrying cannot help."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


class InvalidMoneyError(InvalidFieldError):
    """An amount or a currency that is not money the ledger can hold."""


# ISO 4217 list one, the active codes that have a minor unit, with their exponent. Left out on
# purpose: the codes whose minor unit is "N.A." (precious metals XAU XAG XPT XPD, the units of
# account XDR XSU XUA and XBA..XBD, the testing code XTS and "no currency" XXX: no payment is
# made in them) and withdrawn codes (HRK, CUC, ANG, ZWL, ...). Two entries follow Stripe instead,
# because the ledger keeps Stripe's minor units verbatim and entries must stay comparable:
# ISK (ISO 0) is sent by Stripe with two decimals, MGA (ISO 2) with none.
def _table(*rows: tuple[int, str]) -> dict[str, int]:
    return {code: places for places, codes in rows for code in codes.split()}


CURRENCY_EXPONENTS: Final[Mapping[str, int]] = _table(
    (0, "bif clp djf gnf jpy kmf krw mga pyg rwf ugx uyi vnd vuv xaf xof xpf"),
    (3, "bhd iqd jod kwd lyd omr tnd"),
    (4, "clf uyw"),
    (
        2,
        "aed afn all amd aoa ars aud awg azn bam bbd bdt bgn bmd bnd bob bov brl bsd btn "
        "bwp byn bzd cad cdf che chf chw cny cop cou crc cup cve czk dkk dop dzd egp ern "
        "etb eur fjd fkp gbp gel ghs gip gmd gtq gyd hkd hnl htg huf idr ils inr irr isk "
        "jmd kes kgs khr kpw kyd kzt lak lbp lkr lrd lsl mad mdl mkd mmk mnt mop mru mur "
        "mvr mwk mxn mxv myr mzn nad ngn nio nok npr nzd pab pen pgk php pkr pln qar ron "
        "rsd rub sar sbd scr sdg sek sgd shp sle sll sos srd ssp stn svc syp szl thb tjs "
        "tmt top try ttd twd tzs uah usd usn uyu uzs ved ves wst xcd xcg yer zar zmw zwg",
    ),
)
DEFAULT_EXPONENT: Final = 2

# The largest amount one entry may hold: under a trillion major units of its currency (more
# than any single payment, refund or dispute: Stripe caps an amount at 8 digits of minor units,
# 12 for a few currencies) and never past 2^53 - 1, the largest integer a JavaScript consumer of
# the EventBridge events reads exactly (only CLF and UYW, with 4 decimals, reach that cap).
# DynamoDB's 38 digits are far above either, so totals of many entries stay exact too.
MAX_MAJOR_DIGITS: Final = 12
MAX_MAJOR_UNITS: Final = 10**MAX_MAJOR_DIGITS
MAX_SAFE_INTEGER: Final = 2**53 - 1

# A decimal sent as text: digits, optionally a point and more digits; no sign, exponent,
# spaces, separators or other scripts' digits (Decimal reads "1_000" and Arabic-Indic digits).
_DECIMAL_TEXT: Final = re.compile(r"[0-9]{1,40}(?:\.[0-9]{1,40})?")


def canonical_currency(value: object, field: str) -> str:
    """The ledger's form of an ISO 4217 code: lower case, as Stripe sends it and every entry
    so far holds it ("USD" and "usd" are one currency)."""
    if not isinstance(value, str) or not value.isascii():
        raise InvalidMoneyError(field, f"{_shown(value)} is not an ISO 4217 currency code")
    code = value.lower()
    if code not in CURRENCY_EXPONENTS:
        raise InvalidMoneyError(field, f"{_shown(value)} is not an ISO 4217 currency code")
    return code


def exponent(currency: str) -> int:
    """The places of `currency`'s minor unit; a code outside the table (only ever one already
    stored) renders with two."""
    return CURRENCY_EXPONENTS.get(currency.lower(), DEFAULT_EXPONENT)


def max_minor(currency: str) -> int:
    """The largest amount, in minor units of `currency`, one entry may hold (see above)."""
    trillion: int = MAX_MAJOR_UNITS * 10 ** exponent(currency)
    return min(trillion - 1, MAX_SAFE_INTEGER)


def checked_minor(value: object, currency: str, field: str) -> int:
    """Minor units as Stripe sends them: a JSON integer (not a boolean, a float or text),
    zero or more, within the bound. Whether zero is a movement is the caller's to say."""
    if type(value) is not int:
        raise InvalidMoneyError(field, f"{_shown(value)} is not an integer of minor units")
    if value < 0:
        raise InvalidMoneyError(field, f"{value} is negative")
    if value > max_minor(currency):
        raise InvalidMoneyError(
            field, f"{value} is past the bound of {max_minor(currency)} minor units"
        )
    return value


def to_minor(value: object, currency: str, field: str = "amount") -> int:
    """A decimal amount in major units (a JSON number, or its plain text) to exact minor
    units; never rounds. Refused: booleans, NaN and infinities, negative amounts, more places
    than the currency has, and magnitudes past the bound, checked before any arithmetic.

    A JSON number that is not an integer reaches us as a float; `repr(float)` is the shortest
    text that reads back as the same float, which is the text the provider sent
    (19.99 -> "19.99").
    """
    amount = _decimal(value, field)
    # adjusted(): the power of ten of the leading digit, read without any arithmetic
    if amount.adjusted() >= MAX_MAJOR_DIGITS:
        raise InvalidMoneyError(
            field, f"{_shown(value)} is past the bound of 10^{MAX_MAJOR_DIGITS} major units"
        )
    _, digits, power = amount.as_tuple()
    if not isinstance(power, int):  # NaN and infinities are refused in _decimal already
        raise InvalidMoneyError(field, f"{_shown(value)} is not a finite amount")
    coefficient = int("".join(map(str, digits)))
    places = exponent(currency)
    while power < -places and coefficient and coefficient % 10 == 0:  # 19.990 is 19.99
        coefficient, power = coefficient // 10, power + 1
    if coefficient and power < -places:
        raise InvalidMoneyError(
            field,
            f"{_shown(value)} has more decimals than {currency.upper()} allows ({places}); "
            "refusing to round money",
        )
    # power + places >= 0 here, and power < MAX_MAJOR_DIGITS: a small, exact product
    minor: int = coefficient * 10 ** (power + places) if coefficient else 0
    bound = max_minor(currency)
    if minor > bound:
        raise InvalidMoneyError(field, f"{_shown(value)} is past the bound of {bound} minor units")
    return minor


def _decimal(value: object, field: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidMoneyError(field, f"{_shown(value)} is not a decimal amount")
    if isinstance(value, str) and not _DECIMAL_TEXT.fullmatch(value):
        raise InvalidMoneyError(field, f"{_shown(value)} is not a plain decimal amount")
    if isinstance(value, int) and value.bit_length() > 128:
        # Past any bound; spared the conversion (Python refuses to print ints of 4,300 digits)
        raise InvalidMoneyError(field, "an integer of more than 38 digits is past the bound")
    try:
        amount = Decimal(repr(value) if isinstance(value, float) else value)
    except InvalidOperation as exc:  # unreachable after the checks above; kept typed
        raise InvalidMoneyError(field, f"{_shown(value)} is not a number") from exc
    if not amount.is_finite():
        raise InvalidMoneyError(field, f"{_shown(value)} is not a finite amount")
    if amount.is_signed() and amount:
        raise InvalidMoneyError(field, f"{_shown(value)} is negative")
    return amount


def _shown(value: object) -> str:
    """The offending value, short: a dead letter's reason must stay readable."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def render(minor: int, currency: str) -> str:
    """`JPY 1234`, `BRL 50.00`, `KWD 1.500`, `BRL -20.00`."""
    places = exponent(currency)
    sign = "-" if minor < 0 else ""
    whole, fraction = divmod(abs(minor), 10**places)
    text = f"{whole}.{fraction:0{places}d}" if places else str(whole)
    return f"{currency.upper()} {sign}{text}"
