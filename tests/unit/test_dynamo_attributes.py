"""`to_attributes` takes a shortcut for plain str, bool and int: it must give exactly what
boto3's TypeSerializer gives (or refuse exactly what it refuses), whatever the value."""

from __future__ import annotations

from decimal import Decimal
from enum import StrEnum
from typing import Any

import pytest
from boto3.dynamodb.types import TypeSerializer
from hypothesis import given, settings
from hypothesis import strategies as st

from functions.shared.dynamo import to_attributes, typed

SERIALIZER = TypeSerializer()


class Colour(StrEnum):
    RED = "red"


def boto3_or_error(value: Any) -> Any:
    try:
        return SERIALIZER.serialize(value)
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return type(exc)


def ours_or_error(value: Any) -> Any:
    try:
        return typed(value)
    except Exception as exc:  # noqa: BLE001
        return type(exc)


scalars = st.one_of(
    st.text(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**37, max_value=10**40).flatmap(lambda n: st.sampled_from([n, -n])),
    st.decimals(allow_nan=False, allow_infinity=False, places=4),
    st.binary(max_size=8),
    st.floats(allow_nan=False),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(derandomize=True, database=None, max_examples=400)
@given(values)
def test_every_value_is_typed_as_boto3_types_it(value: Any) -> None:
    ours, theirs = ours_or_error(value), boto3_or_error(value)
    assert ours == theirs
    assert type(ours) is type(theirs)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "ção",
        True,
        False,
        0,
        -1,
        10**38 - 1,
        -(10**38) + 1,
        10**38,
        -(10**38),
        Decimal("1.50"),
        Colour.RED,
        {"a": [1, "b", None]},
        {"x", "y"},
        {1, 2},
        1.5,
    ],
)
def test_the_edges_are_typed_as_boto3_types_them(value: Any) -> None:
    assert ours_or_error(value) == boto3_or_error(value)


def test_none_is_left_out() -> None:
    assert to_attributes({"a": None, "b": 1}) == {"b": {"N": "1"}}
