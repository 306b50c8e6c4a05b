"""Money read strictly: ISO 4217 currencies in one case, amounts in exact minor units within a
bound, refused (naming the field) before any rounding could happen."""

from __future__ import annotations

import pytest

from functions.shared.domain import InvalidOrderIdError, checked_order_id
from functions.shared.money import (
    InvalidMoneyError,
    canonical_currency,
    exponent,
    max_minor,
    to_minor,
)


@pytest.mark.parametrize(
    ("code", "canonical"),
    [
        ("usd", "usd"),
        ("USD", "usd"),
        ("Brl", "brl"),
        ("XCG", "xcg"),
        ("zwg", "zwg"),
        ("SLE", "sle"),
    ],
)
def test_an_iso_4217_code_in_any_case_is_the_ledgers_lower_case_code(
    code: str, canonical: str
) -> None:
    assert canonical_currency(code, "currency") == canonical


@pytest.mark.parametrize(
    "code",
    [
        *("xxx", "XTS", "XAU", "xdr", "zzz", "", "us", "usdd", "usd ", "u$d", "hrk"),
        *(None, 840, True),
        # the Kelvin sign, which lower-cases to "k": "kwd" in another script is no code
        "\u212aWD",
    ],
)
def test_a_code_that_is_no_currency_is_refused_naming_the_field(code: object) -> None:
    with pytest.raises(InvalidMoneyError) as refused:
        canonical_currency(code, "data.object.currency")

    assert refused.value.field == "data.object.currency"
    assert str(refused.value).startswith("data.object.currency: ")


@pytest.mark.parametrize(
    ("code", "places"),
    [("iqd", 3), ("lyd", 3), ("clf", 4), ("uyi", 0), ("isk", 2), ("mga", 0), ("huf", 2)],
)
def test_exponents_are_iso_4217s_except_where_stripes_minor_units_differ(
    code: str, places: int
) -> None:
    # ISK and MGA: the ledger keeps Stripe's minor units verbatim (ISK two decimals, MGA none)
    assert exponent(code) == places


def test_the_bound_is_a_trillion_major_units_and_never_past_2_to_the_53() -> None:
    assert (max_minor("jpy"), max_minor("brl"), max_minor("kwd")) == (
        10**12 - 1,
        10**14 - 1,
        10**15 - 1,
    )
    assert max_minor("clf") == 2**53 - 1


@pytest.mark.parametrize(
    "value",
    [
        *(True, False, "NaN", "nan", "Infinity", float("nan"), float("inf"), "1e3", "20,00"),
        *(" 20", "+20", "-1", -0.5, "", None, [], {}, "0x10", "\u0663"),  # the last: Arabic 3
    ],
)
def test_a_decimal_amount_is_read_strictly(value: object) -> None:
    with pytest.raises(InvalidMoneyError) as refused:
        to_minor(value, "brl", "payment.transaction_amount")

    assert refused.value.field == "payment.transaction_amount"


@pytest.mark.parametrize(
    "value", [10**39, 10**38 + 1, "1" + "0" * 39, 1e300, 10**12, "1000000000000.00"]
)
def test_an_amount_past_the_bound_is_refused_before_any_rounding(value: object) -> None:
    with pytest.raises(InvalidMoneyError, match="bound"):
        to_minor(value, "brl", "payment.transaction_amount")


def test_digits_past_the_decimal_contexts_precision_are_never_rounded_away() -> None:
    # 28 significant digits is the default context: rounding there would book 19.99
    with pytest.raises(InvalidMoneyError, match="decimals"):
        to_minor("19.990000000000000000000000000001", "brl", "payment.refunds.0.amount")


@pytest.mark.parametrize(
    ("value", "minor"), [("19.990", 1999), (19.99, 1999), (999_999_999_999.99, 99_999_999_999_999)]
)
def test_trailing_zeros_and_the_largest_amount_convert_exactly(value: object, minor: int) -> None:
    assert to_minor(value, "brl", "payment.value") == minor


@pytest.mark.parametrize(
    "order_id",
    ["   ", "ord\x00x", "ord\x7f", "ord\u0085x", "x" * 501, "ORDER#x", "REF#stripe#pi", "a\tb"],
)
def test_an_order_id_no_order_can_have_is_refused_naming_the_field(order_id: str) -> None:
    with pytest.raises(InvalidOrderIdError) as refused:
        checked_order_id(order_id, "payment.external_reference")

    assert refused.value.field == "payment.external_reference"


@pytest.mark.parametrize(
    ("order_id", "read"),
    [
        (None, None),
        ("", None),
        ("ord_1042", "ord_1042"),
        ("PO#1042", "PO#1042"),
        ("x" * 500, "x" * 500),
    ],
)
def test_an_order_id_is_kept_as_sent_and_an_empty_one_is_none(
    order_id: str | None, read: str | None
) -> None:
    assert checked_order_id(order_id, "metadata.order_id") == read
