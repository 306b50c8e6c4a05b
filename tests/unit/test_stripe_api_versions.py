"""Stripe API versions: each version the map knows reads as the others do, and a newer, unknown
version is read only where every field it needs is there with the type known."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fixtures.stripe import fixture_text
from functions.shared.domain import Effect
from functions.stripe.events import interpret
from functions.stripe.models import (
    KNOWN_API_VERSIONS,
    NEWEST_KNOWN_API_VERSION,
    ApiVersionFieldError,
)

NEWER = "2027-01-27.elm"  # made up: later than any version Stripe had published

# Payloads as the current versions shape them, one per kind of movement the map books.
CURRENT_SHAPES = (
    "payment_intent.succeeded",
    "charge.succeeded",
    "refund.created",
    "refund.failed",
    "charge.dispute.created",
    "charge.dispute.closed.lost",
    "checkout.session.completed.card",
    "invoice.paid",
    "invoice_payment.paid",
)


def on_version(fixture: str, version: str, change: Any = None) -> str:
    event = json.loads(fixture_text(fixture))
    event["api_version"] = version
    if change is not None:
        change(event["data"]["object"])
    return json.dumps(event)


def without(*path: str | int) -> Any:
    def drop(payload: Any) -> None:
        for key in path[:-1]:
            payload = payload[key]
        del payload[path[-1]]

    return drop


def replaced(field: str, value: object) -> Any:
    def replace(payload: dict[str, Any]) -> None:
        payload[field] = value

    return replace


@pytest.mark.parametrize("version", KNOWN_API_VERSIONS)
@pytest.mark.parametrize("fixture", CURRENT_SHAPES)
def test_an_event_on_each_known_version_books_as_on_any_other(fixture: str, version: str) -> None:
    # Given a current payload, delivered on one of the versions the map was checked against
    # When it is read
    readings = interpret(on_version(fixture, version))

    # Then it books what the same payload on the newest known version books
    assert readings == interpret(on_version(fixture, NEWEST_KNOWN_API_VERSION))


@pytest.mark.parametrize("fixture", CURRENT_SHAPES)
def test_an_event_on_a_newer_unknown_version_with_every_field_it_needs_books(
    fixture: str,
) -> None:
    # Given a payload on a version newer than any known, its fields as the known ones send them
    # When it is read
    readings = interpret(on_version(fixture, NEWER))

    # Then it books what the same payload books on the newest known version
    assert readings == interpret(on_version(fixture, NEWEST_KNOWN_API_VERSION))


@pytest.mark.parametrize(
    ("fixture", "change", "field"),
    [
        # Each one a field the map would otherwise default: read so, money would be misread.
        ("payment_intent.succeeded", without("latest_charge"), "data.object.latest_charge"),
        ("payment_intent.succeeded", without("metadata"), "data.object.metadata"),
        ("charge.succeeded", without("amount_captured"), "data.object.amount_captured"),
        ("refund.created", without("status"), "data.object.status"),
        ("refund.created", without("payment_intent"), "data.object.payment_intent"),
        (
            "charge.dispute.created",
            without("balance_transactions"),
            "data.object.balance_transactions",
        ),
        (
            "charge.dispute.closed.lost",
            without("balance_transactions", 0, "reporting_category"),
            "data.object.balance_transactions.0.reporting_category",
        ),
        (
            "checkout.session.completed.card",
            without("payment_status"),
            "data.object.payment_status",
        ),
        ("invoice.paid", without("parent"), "data.object.parent"),
        (
            "invoice_payment.paid",
            without("payment", "payment_intent"),
            "data.object.payment.payment_intent",
        ),
        (
            "invoice_payment.paid",
            replaced("payment", {"type": "payment_record", "payment_record": "prec_1"}),
            "data.object.payment.payment_intent",
        ),
    ],
)
def test_a_newer_version_lacking_a_field_the_map_needs_is_refused_naming_version_and_field(
    fixture: str, change: Any, field: str
) -> None:
    # Given a payload on a newer, unknown version without a field the map reads
    body = on_version(fixture, NEWER, change)

    # When it is read, then it is refused, naming the field and the version
    with pytest.raises(ApiVersionFieldError) as refused:
        interpret(body)
    assert refused.value.field == field
    assert NEWER in str(refused.value)
    assert refused.value.api_version == NEWER


def test_the_same_field_missing_on_a_known_version_is_read_as_before() -> None:
    # Given a refund without its status on a known version (the map reads what it knows)
    body = on_version("refund.created", NEWEST_KNOWN_API_VERSION, without("status"))

    # When it is read, then it is no money yet, as a refund not yet succeeded is
    [reading] = interpret(body)
    assert not isinstance(reading, Effect)


@pytest.mark.parametrize(
    ("fixture", "field", "value"),
    [
        ("payment_intent.succeeded", "amount_received", "5000"),
        ("refund.created", "amount", 50.0),
        ("charge.dispute.created", "currency", 986),
    ],
)
def test_a_newer_version_with_a_field_retyped_is_refused_naming_version_and_field(
    fixture: str, field: str, value: object
) -> None:
    # Given a payload on a newer version whose money field changed type
    body = on_version(fixture, NEWER, replaced(field, value))

    # When it is read, then it is refused, naming the field and the version
    with pytest.raises(ApiVersionFieldError) as refused:
        interpret(body)
    assert refused.value.field == f"data.object.{field}"
    assert NEWER in str(refused.value)


def test_an_update_on_a_newer_version_without_what_changed_is_refused() -> None:
    # Given a charge.updated on a newer version that says nothing of what changed
    event = json.loads(on_version("charge.succeeded", NEWER))
    event["type"] = "charge.updated"
    event["data"].pop("previous_attributes", None)

    # When it is read, then it is refused rather than read as no capture
    with pytest.raises(ApiVersionFieldError) as refused:
        interpret(json.dumps(event))
    assert refused.value.field == "data.previous_attributes"


def test_versions_later_on_the_newest_known_day_or_before_it_are_known() -> None:
    # Given the newest known version's date under another release name, and an older version
    # When read without a field the map defaults, then neither is refused
    for version in (NEWEST_KNOWN_API_VERSION[:10], "2025-07-30.basil", "2024-06-20"):
        interpret(on_version("refund.created", version, without("status")))


DAHLIA_SHAPES = (
    "payment_intent.succeeded",
    "charge.succeeded",
    "charge.refunded",
    "refund.created",
    "refund.updated.canceled",
    "charge.dispute.created",
    "charge.dispute.closed.lost",
    "checkout.session.completed.card",
    "invoice.paid",
    "invoice_payment.paid",
)


@pytest.mark.parametrize("fixture", DAHLIA_SHAPES)
def test_a_payload_as_dahlia_shapes_it_books_what_its_clover_shape_books(fixture: str) -> None:
    # Given the same movement as dahlia sends it (its Checkout `ui_mode` renamed, fields added)
    # and as clover does
    dahlia = json.loads(fixture_text(f"{fixture}.dahlia"))
    assert dahlia["api_version"] == "2026-03-25.dahlia"

    # When both are read, then they book the same (no field umavez reads changed)
    assert interpret(fixture_text(f"{fixture}.dahlia")) == interpret(fixture_text(fixture))
