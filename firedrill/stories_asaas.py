"""The fire drill's Asaas stories: a payment's events as Asaas sends them (refunds in parts, a
chargeback won), or none, healed by the statement."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

from firedrill.story import Expected, Post, Story
from firedrill.story_values import brazil_local, next_number
from fixtures.shapes import shape, unique


def asaas_payment_refunded(order: str, at: int) -> Story:
    payment = unique("pay")

    refund_at = brazil_local(at + 58)

    def event(name: str, seconds: int) -> str:
        event = shape(
            f"asaas/{'PAYMENT_REFUNDED' if name == 'PAYMENT_REFUNDED' else 'PAYMENT_RECEIVED'}.json"
        )
        event["id"] = f"evt_{uuid.uuid4().hex}&{next_number()}"
        event["event"] = name
        event["dateCreated"] = brazil_local(at + seconds)
        event["payment"].update({"id": payment, "externalReference": order})
        if name == "PAYMENT_REFUNDED":
            event["payment"]["refunds"][0].update({"dateCreated": refund_at, "value": 50})
        return json.dumps(event)

    return Story(
        "asaas confirmed, received, refunded",
        order,
        [
            [
                Post("asaas", event("PAYMENT_CONFIRMED", 0)),
                Post("asaas", event("PAYMENT_RECEIVED", 5)),
            ],
            [Post("asaas", event("PAYMENT_REFUNDED", 60))],
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={
                ("order.paid", payment),
                ("order.refunded", f"{payment}:refund:{refund_at}:5000#1"),
            },
            stale=(0, 1),
        ),
    )


def asaas_chargeback_won(order: str, at: int) -> Story:
    """Received, chargeback requested, contested, won (awaiting the acquirer's reversal)."""
    payment = unique("pay")

    def event(name: str, seconds: int) -> str:
        event = shape(f"asaas/{name}.json")
        event["id"] = f"evt_{uuid.uuid4().hex}&{next_number()}"
        event["dateCreated"] = brazil_local(at + seconds)
        event["payment"].update({"id": payment, "externalReference": order, "value": 50})
        return json.dumps(event)

    return Story(
        "asaas chargeback won",
        order,
        [
            [Post("asaas", event("PAYMENT_RECEIVED", 0))],
            [Post("asaas", event("PAYMENT_CHARGEBACK_REQUESTED", 3600))],
            [Post("asaas", event("PAYMENT_CHARGEBACK_DISPUTE", 7200))],
            [Post("asaas", event("PAYMENT_AWAITING_CHARGEBACK_REVERSAL", 86_400))],
        ],
        Expected(
            "dispute_won",
            paid=5000,
            dispute_won=5000,
            effects={
                ("order.paid", payment),
                ("order.disputed", f"{payment}:chargeback"),
                ("order.dispute_won", f"{payment}:chargeback"),
            },
            stale=(0, 3),
        ),
    )


def asaas_partial_refunds(order: str, at: int) -> Story:
    """Asaas lists every refund so far: the same list twice, then grown by one."""
    payment = unique("pay")

    def event(name: str, seconds: int, refunds: Sequence[tuple[int, float]]) -> str:
        event = shape("asaas/PAYMENT_PARTIALLY_REFUNDED.json")
        event["id"] = f"evt_{uuid.uuid4().hex}&{next_number()}"
        event["event"] = name
        event["dateCreated"] = brazil_local(at + seconds)
        event["payment"].update({"id": payment, "externalReference": order, "value": 100})
        template = event["payment"]["refunds"][0]
        event["payment"]["refunds"] = [
            {**template, "dateCreated": brazil_local(at + offset), "value": value, "status": "DONE"}
            for offset, value in refunds
        ]
        return json.dumps(event)

    first = [(60, 20)]
    both = [(60, 20), (120, 30.5)]
    return Story(
        "asaas partial refunds resent and grown",
        order,
        [
            [Post("asaas", event("PAYMENT_RECEIVED", 0, []))],
            [Post("asaas", event("PAYMENT_PARTIALLY_REFUNDED", 61, first), copies=2)],
            [Post("asaas", event("PAYMENT_PARTIALLY_REFUNDED", 121, both))],
        ],
        Expected(
            "partially_refunded",
            paid=10000,
            refunded=5050,
            effects={
                ("order.paid", payment),
                ("order.refunded", f"{payment}:refund:{brazil_local(at + 60)}:2000#1"),
                ("order.refunded", f"{payment}:refund:{brazil_local(at + 120)}:3050#1"),
            },
            stale=(0, 1),
        ),
    )


def asaas_never_notified(order: str, at: int) -> Story:
    """A Pix payment received while Asaas's queue was paused (its events deleted after 14
    days): no webhook of it ever arrives. Asaas's statement names it; the statement books it."""
    payment = shape("asaas/PAYMENT_RECEIVED.json")["payment"]
    payment.update({"id": unique("pay"), "externalReference": order})
    return Story(
        "asaas never notified, healed by the statement",
        order,
        [[]],
        Expected("paid", paid=5000, effects={("order.paid", payment["id"])}),
        asaas_payments={payment["id"]: payment},
        statement_only=True,
    )
