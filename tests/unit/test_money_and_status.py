"""Money in each currency's minor units, and the financial status read from the totals."""

from __future__ import annotations

from typing import Final

import pytest

from functions.shared.domain import FinancialStatus
from functions.shared.errors import MalformedEventError
from functions.shared.items import Order
from functions.shared.money import exponent, render, to_minor


@pytest.mark.parametrize(
    ("currency", "places"),
    [("JPY", 0), ("clp", 0), ("krw", 0), ("brl", 2), ("usd", 2), ("kwd", 3), ("BHD", 3)],
)
def test_each_currency_has_its_iso_exponent(currency: str, places: int) -> None:
    assert exponent(currency) == places


# The three-decimal currencies of ISO 4217 that Stripe takes, written out: the table is checked
# against this list, not against itself.
THREE_DECIMAL_CURRENCIES: Final = ("BHD", "JOD", "KWD", "OMR", "TND")


@pytest.mark.parametrize("currency", THREE_DECIMAL_CURRENCIES)
def test_every_three_decimal_currency_converts_and_renders_with_three_places(
    currency: str,
) -> None:
    # Given one and a half in major units, as Mercado Pago and Asaas send amounts
    # When it is converted to minor units and rendered back, in either case of the code
    minor = to_minor("1.5", currency.lower())

    # Then it is exact in thousandths
    assert (exponent(currency), exponent(currency.lower())) == (3, 3)
    assert minor == 1500
    assert render(minor, currency) == f"{currency} 1.500"


@pytest.mark.parametrize(
    ("value", "currency", "minor"),
    [
        (19.99, "brl", 1999),
        (0.29, "brl", 29),
        ("0.1", "brl", 10),
        (50, "brl", 5000),
        (5000, "clp", 5000),
        (1.5, "kwd", 1500),
        (1234, "jpy", 1234),
    ],
)
def test_decimals_convert_to_exact_minor_units(value: object, currency: str, minor: int) -> None:
    assert to_minor(value, currency) == minor


@pytest.mark.parametrize(
    ("value", "currency"),
    [(10.005, "brl"), (10.5, "clp"), (1.2345, "kwd"), ("abc", "brl"), (-1, "brl")],
)
def test_an_amount_money_cannot_hold_is_malformed_never_rounded(
    value: object, currency: str
) -> None:
    with pytest.raises(MalformedEventError):
        to_minor(value, currency)


@pytest.mark.parametrize(
    ("minor", "currency", "text"),
    [
        (1234, "jpy", "JPY 1234"),
        (5000, "brl", "BRL 50.00"),
        (7, "brl", "BRL 0.07"),
        (1500, "kwd", "KWD 1.500"),
        (-2000, "brl", "BRL -20.00"),
    ],
)
def test_amounts_render_with_their_currency_exponent(minor: int, currency: str, text: str) -> None:
    assert render(minor, currency) == text


@pytest.mark.parametrize(
    ("totals", "status"),
    [
        ({}, FinancialStatus.UNPAID),
        ({"paid_total": 5000}, FinancialStatus.PAID),
        ({"paid_total": 5000, "refunded_total": 500}, FinancialStatus.PARTIALLY_REFUNDED),
        ({"paid_total": 5000, "refunded_total": 5000}, FinancialStatus.REFUNDED),
        ({"paid_total": 5000, "refunded_total": 0}, FinancialStatus.PAID),  # refund reversed
        ({"paid_total": 5000, "disputed_total": 5000}, FinancialStatus.DISPUTED),
        (
            {"paid_total": 5000, "disputed_total": 0, "dispute_won_total": 5000},
            FinancialStatus.DISPUTE_WON,
        ),
        (
            {"paid_total": 5000, "disputed_total": 0, "dispute_lost_total": 5000},
            FinancialStatus.DISPUTE_LOST,
        ),
        ({"paid_total": 5000, "inquiry_total": 5000}, FinancialStatus.INQUIRY),
        ({"paid_total": 10000, "refunded_total": 5000}, FinancialStatus.PARTIALLY_REFUNDED),
    ],
)
def test_financial_status_is_what_the_totals_say(
    totals: dict[str, int], status: FinancialStatus
) -> None:
    assert Order.of({"order_id": "o1", **totals}).financial_status is status


def test_a_ten_percent_refund_is_not_a_refunded_order() -> None:
    assert Order("o1", paid_total=10000, refunded_total=1000).financial_status != "refunded"


def test_an_inquiry_is_not_disputed_money() -> None:
    assert Order("o1", paid_total=5000, inquiry_total=5000).financial_status != "disputed"
