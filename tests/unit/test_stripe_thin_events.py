"""Stripe's thin events: the object named is read from the API and booked exactly as the
snapshot event of the same change is, under the same keys; nothing else is ever read."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from fixtures import stripe
from fixtures.stripe import fixture_text, object_of, thin_of
from functions.shared.domain import Effect, Interpretation, NoEffect, Transition
from functions.shared.errors import MalformedEventError
from functions.stripe.events import Interpreter
from functions.stripe.models import NEWEST_KNOWN_API_VERSION, StripeApiNotConfiguredError
from functions.stripe.thin import ThinEventError

T0 = 1_780_000_000


@dataclass
class StripeObjects:
    """Stripe's API as the fake answers it: objects by path; every read recorded."""

    by_path: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    reads: list[tuple[str, str | None, str]] = field(default_factory=list)

    def hold(self, snapshot_body: str) -> None:
        collection, carried = object_of(snapshot_body)
        self.by_path[f"/v1/{collection}/{carried['id']}"] = carried

    def __call__(self, path: str, context: str | None, version: str) -> Mapping[str, Any]:
        self.reads.append((path, context, version))
        return self.by_path[path]


def booked(readings: tuple[Interpretation, ...] | list[Interpretation]) -> list[tuple[Any, ...]]:
    """What the readings book, whoever announced it: the key's parts and the amount."""
    return [
        (r.transition, r.external_ref, r.order_id, r.amount.minor if r.amount else None)
        for r in readings
        if isinstance(r, Effect)
    ]


# The snapshot payloads of every kind of movement the map books, on the current version.
SNAPSHOTS = (
    "payment_intent.succeeded.dahlia",
    "charge.succeeded.dahlia",
    "refund.created.dahlia",
    "refund.updated.canceled.dahlia",
    "refund.failed",
    "charge.dispute.created.dahlia",
    "charge.dispute.closed.lost.dahlia",
    "charge.dispute.closed.won",
    "checkout.session.completed.card.dahlia",
    "invoice.paid.dahlia",
    "invoice_payment.paid.dahlia",
)


@pytest.mark.parametrize("fixture", SNAPSHOTS)
def test_a_thin_event_books_what_the_snapshot_event_of_the_same_change_books(
    fixture: str,
) -> None:
    # Given a snapshot event, and the thin event of the same change whose object the API holds
    snapshot = fixture_text(fixture)
    api = StripeObjects()
    api.hold(snapshot)
    thin = thin_of(snapshot)

    # When both are read
    from_snapshot = Interpreter()(snapshot)
    from_thin = Interpreter(related=api)(thin)

    # Then they book the same effects under the same keys, the thin one's object read once,
    # on the newest version the map knows
    assert booked(from_thin) == booked(from_snapshot)
    assert [type(r) for r in from_thin] == [type(r) for r in from_snapshot]
    assert len(api.reads) == 1
    assert api.reads[0][2] == NEWEST_KNOWN_API_VERSION
    assert all(r.delivery.event_id == json.loads(thin)["id"] for r in from_thin)
    assert all(r.delivery.event_type == f"v1.{json.loads(snapshot)['type']}" for r in from_thin)


def test_the_captured_thin_shape_is_read_from_its_named_object() -> None:
    # Given Stripe's thin event shape naming the PaymentIntent the dahlia fixture carries
    api = StripeObjects()
    api.hold(fixture_text("payment_intent.succeeded.dahlia"))

    # When it is read
    [paid] = Interpreter(related=api)(fixture_text("v1.payment_intent.succeeded.thin"))

    # Then the payment is booked from the object, at the event's second
    assert isinstance(paid, Effect)
    assert paid.transition is Transition.PAID
    assert paid.external_ref == "pi_3QpLqRJz8fEoYh0N1kWc2DxT"
    assert paid.delivery.created == 1_795_529_111  # 2026-11-24T14:05:11.482Z
    assert api.reads == [
        ("/v1/payment_intents/pi_3QpLqRJz8fEoYh0N1kWc2DxT", None, NEWEST_KNOWN_API_VERSION)
    ]


def test_a_thin_event_reads_the_object_as_it_is_now() -> None:
    # Given a refund announced created, which has failed since
    charge, intent, refund = stripe.unique("ch"), stripe.unique("pi"), stripe.unique("re")
    created = stripe.refund_created(intent, refund, 2000, T0, charge)
    failed = stripe.refund_failed(intent, refund, 2000, T0 + 60, charge)
    api = StripeObjects()
    api.hold(failed)

    # When the thin event of its creation is read
    readings = Interpreter(related=api)(thin_of(created))

    # Then it books what the refund is now, as its refund.failed does: the reversal
    assert [r.transition for r in readings if isinstance(r, Effect)] == [Transition.REFUND_REVERSED]
    assert booked(readings) == booked(Interpreter()(failed))


def test_a_charge_update_is_read_as_what_was_captured_so_far() -> None:
    # Given a charge captured in part, announced by a thin charge.updated
    order, intent, charge = stripe.unique("ord"), stripe.unique("pi"), stripe.unique("ch")
    snapshot = json.loads(stripe.charge_succeeded(order, intent, charge, 5000, T0))
    snapshot["type"] = "charge.updated"
    snapshot["data"]["object"] |= {"captured": True, "amount_captured": 3000}
    body = json.dumps(snapshot)
    api = StripeObjects()
    api.hold(body)

    # When it is read
    [paid] = Interpreter(related=api)(thin_of(body))

    # Then the payment is what the charge holds captured now, topped up to it
    assert isinstance(paid, Effect)
    assert (paid.transition, paid.amount.minor, paid.captured_so_far) == (
        Transition.PAID,
        3000,
        True,
    )


def test_an_escalated_inquiry_updated_is_read_as_the_dispute_it_became() -> None:
    # Given an inquiry escalated into a dispute, announced by a thin charge.dispute.updated
    intent, dispute = stripe.unique("pi"), stripe.unique("du")
    body = json.loads(stripe.dispute_created(intent, dispute, 5000, T0))
    body["type"] = "charge.dispute.updated"
    api = StripeObjects()
    api.hold(json.dumps(body))

    # When it is read
    readings = Interpreter(related=api)(thin_of(json.dumps(body)))

    # Then the funds it withdrew are booked (and any inquiry it was, closed)
    assert Transition.DISPUTED in [r.transition for r in readings if isinstance(r, Effect)]


@pytest.mark.parametrize(
    "event_type", ["v1.customer.created", "v1.payment_intent.created", "v2.core.account.updated"]
)
def test_a_thin_event_that_books_nothing_reads_nothing(event_type: str) -> None:
    # Given a thin event of a type no rule books
    note = json.loads(fixture_text("v1.payment_intent.succeeded.thin"))
    note["type"] = event_type
    api = StripeObjects()

    # When it is read
    [reading] = Interpreter(related=api)(json.dumps(note))

    # Then it is no effect, and Stripe's API was never asked
    assert isinstance(reading, NoEffect)
    assert api.reads == []


def _naming(**related: str) -> str:
    note = json.loads(fixture_text("v1.payment_intent.succeeded.thin"))
    note["related_object"] |= related
    return json.dumps(note)


@pytest.mark.parametrize(
    "body",
    [
        _naming(type="charge", url="/v1/charges/ch_3QpLqRJz8fEoYh0N1x"),
        _naming(url="https://attacker.example/v1/payment_intents/pi_3QpLqRJz8fEoYh0N1kWc2DxT"),
        _naming(url="/v1/payment_intents/pi_3QpLqRJz8fEoYh0N1kWc2DxT/../../customers"),
        _naming(id="cus_123", url="/v1/payment_intents/cus_123"),
        json.dumps(
            {**json.loads(fixture_text("v1.payment_intent.succeeded.thin")), "related_object": None}
        ),
    ],
    ids=["another-type", "another-host", "another-path", "not-an-intent-id", "no-object"],
)
def test_a_thin_event_naming_anything_but_its_own_object_is_refused_unread(body: str) -> None:
    # Given a thin event whose related object is not what its type is about, or is read
    # elsewhere than the object's own path
    api = StripeObjects()

    # When it is read, Then it is refused as malformed (the DLQ), and nothing was read
    with pytest.raises(ThinEventError):
        Interpreter(related=api)(body)
    assert api.reads == []


def test_an_answer_for_another_object_is_refused() -> None:
    # Given an API that answers the path with another object
    api = StripeObjects()
    intent = json.loads(fixture_text("payment_intent.succeeded.dahlia"))["data"]["object"]
    api.by_path["/v1/payment_intents/pi_3QpLqRJz8fEoYh0N1kWc2DxT"] = {**intent, "id": "pi_other"}

    # When the thin event is read, Then it is refused, nothing booked
    with pytest.raises(ThinEventError):
        Interpreter(related=api)(fixture_text("v1.payment_intent.succeeded.thin"))


def test_a_connected_accounts_thin_event_is_read_in_its_context() -> None:
    # Given a thin event of a connected account
    api = StripeObjects()
    api.hold(fixture_text("payment_intent.succeeded.dahlia"))
    note = json.loads(fixture_text("v1.payment_intent.succeeded.thin"))
    note["context"] = "acct_1Nv0FGQ9RKHgCVdK"

    # When it is read, Then the object is read in the account's context
    Interpreter(related=api)(json.dumps(note))
    assert api.reads[0][1] == "acct_1Nv0FGQ9RKHgCVdK"


def test_a_thin_event_without_an_api_key_is_refused_as_a_configuration_problem() -> None:
    # Given no Stripe API key configured, When a thin event that books is read,
    # Then it is refused naming the missing secret (never booked from the body)
    with pytest.raises(StripeApiNotConfiguredError, match="stripe/api-key"):
        Interpreter()(fixture_text("v1.payment_intent.succeeded.thin"))


@pytest.mark.parametrize(
    "change",
    [{"created": "2026-11-24T14:05:11"}, {"created": "yesterday"}, {"id": "ev_1"}, {"livemode": 1}],
    ids=["no-zone", "not-a-time", "not-an-event-id", "livemode-not-a-flag"],
)
def test_a_malformed_thin_event_is_refused(change: dict[str, object]) -> None:
    note = json.loads(fixture_text("v1.payment_intent.succeeded.thin")) | change
    with pytest.raises(MalformedEventError):
        Interpreter(related=StripeObjects())(json.dumps(note))
