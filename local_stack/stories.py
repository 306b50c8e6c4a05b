"""What the fire drill delivers: per order, a story of real-shaped provider events and what the
order must look like once everything has arrived, whatever the order and number of arrivals."""

from __future__ import annotations

import copy
import itertools
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The same real-shaped payloads the tests use; the drill varies ids, amounts and times.
EVENTS = Path(__file__).resolve().parent.parent / "tests" / "events"
_ids = itertools.count(1)


def _template(path: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((EVENTS / path).read_text())
    return loaded


def uid(prefix: str) -> str:
    return f"{prefix}_drill{uuid.uuid4().hex[:10]}{next(_ids)}"


@dataclass
class Post:
    """One delivery as a provider makes it. Signed at send time, as providers do."""

    provider: str
    body: str
    query: dict[str, str] = field(default_factory=dict)
    copies: int = 1  # sent this many times at the same instant
    slow: bool = False  # ingest answers after the provider's timeout: the provider retries
    forgery: str | None = None  # "bad-signature" or "stale-timestamp": must be refused


@dataclass
class Expected:
    status: str
    paid: int = 0
    refunded: int = 0
    disputed: int = 0
    effects: set[tuple[str, str]] = field(default_factory=set)
    stale: tuple[int, int] = (0, 0)  # at least, at most


@dataclass
class Story:
    kind: str
    order_id: str
    phases: list[list[Post]]
    expected: Expected
    mercadopago_payment: dict[str, Any] | None = None

    @property
    def posts(self) -> list[Post]:
        return [post for phase in self.phases for post in phase]


def _stripe(template: str, created: int, fields: dict[str, Any]) -> str:
    event = copy.deepcopy(_template(f"stripe/{template}.json"))
    event["id"] = uid("evt")
    event["created"] = created
    event["data"]["object"].update(fields)
    return json.dumps(event)


def _payment(order: str, intent: str, charge: str, amount: int, at: int) -> str:
    return _stripe(
        "payment_intent.succeeded",
        at,
        {
            "id": intent,
            "amount": amount,
            "amount_received": amount,
            "metadata": {"order_id": order},
            "latest_charge": charge,
        },
    )


def _refund(
    intent: str, charge: str, refund: str, amount: int, at: int, order: str | None = None
) -> str:
    return _stripe(
        "refund.created",
        at,
        {
            "id": refund,
            "amount": amount,
            "payment_intent": intent,
            "charge": charge,
            "metadata": {"order_id": order} if order else {},
        },
    )


def stripe_retries(order: str, at: int) -> Story:
    """Provider retries: the same event four times at once, once more after a timeout, and the
    same payment announced by charge.succeeded and invoice_payment.paid."""
    intent, charge = uid("pi"), uid("ch")
    paid = _payment(order, intent, charge, 5000, at)
    by_charge = _stripe(
        "charge.succeeded",
        at,
        {
            "id": charge,
            "amount": 5000,
            "amount_captured": 5000,
            "metadata": {"order_id": order},
            "payment_intent": intent,
        },
    )
    by_invoice = _stripe(
        "invoice_payment.paid",
        at + 1,
        {
            "id": uid("inpay"),
            "amount_paid": 5000,
            "payment": {"type": "payment_intent", "payment_intent": intent},
        },
    )
    return Story(
        "retries & three announcements",
        order,
        [
            [Post("stripe", paid, copies=4)],
            [
                Post("stripe", paid, slow=True),
                Post("stripe", by_charge),
                Post("stripe", by_invoice),
            ],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_refunds_first(order: str, at: int) -> Story:
    """Two partial refunds of one charge arrive before their payment (no order metadata)."""
    intent, charge, first, second = uid("pi"), uid("ch"), uid("re"), uid("re")
    return Story(
        "partial refunds before payment",
        order,
        [
            [
                Post("stripe", _refund(intent, charge, first, 2000, at + 60)),
                Post("stripe", _refund(intent, charge, second, 3000, at + 60)),
            ],
            [Post("stripe", _payment(order, intent, charge, 5000, at))],
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={("order.paid", intent), ("order.refunded", first), ("order.refunded", second)},
        ),
    )


def stripe_stale_payment(order: str, at: int) -> Story:
    """A refund (with the order in its metadata) before its older payment: status stays."""
    intent, charge, refund = uid("pi"), uid("ch"), uid("re")
    return Story(
        "refund then older payment",
        order,
        [
            [Post("stripe", _refund(intent, charge, refund, 5000, at + 60, order))],
            [Post("stripe", _payment(order, intent, charge, 5000, at))],
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={("order.paid", intent), ("order.refunded", refund)},
            stale=(0, 1),
        ),
    )


def stripe_same_second(order: str, at: int) -> Story:
    """Payment and refund stamped with the same second, delivered at the same instant."""
    intent, charge, refund = uid("pi"), uid("ch"), uid("re")
    return Story(
        "same-second payment and refund",
        order,
        [
            [
                Post("stripe", _payment(order, intent, charge, 5000, at)),
                Post("stripe", _refund(intent, charge, refund, 5000, at, order)),
            ]
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={("order.paid", intent), ("order.refunded", refund)},
            stale=(0, 1),
        ),
    )


def stripe_second_payment(order: str, at: int) -> Story:
    """Paid, refunded, paid again with a new PaymentIntent; the first payment forged twice."""
    first, second, charge, refund = uid("pi"), uid("pi"), uid("ch"), uid("re")
    payment = _payment(order, first, charge, 5000, at)
    return Story(
        "second payment after refund",
        order,
        [
            [
                Post("stripe", payment),
                Post(
                    "stripe", _payment(order, uid("pi"), charge, 9999, at), forgery="bad-signature"
                ),
            ],
            [Post("stripe", _refund(first, charge, refund, 5000, at + 60))],
            [
                Post("stripe", _payment(order, second, uid("ch"), 5000, at + 120)),
                Post(
                    "stripe",
                    _payment(order, uid("pi"), charge, 7777, at),
                    forgery="stale-timestamp",
                ),
            ],
        ],
        # Which deliveries end up stale depends on the processing order; the outcome does not.
        Expected(
            "paid",
            paid=10000,
            refunded=5000,
            effects={("order.paid", first), ("order.paid", second), ("order.refunded", refund)},
            stale=(0, 2),
        ),
    )


def stripe_dispute(order: str, at: int) -> Story:
    intent, charge, dispute = uid("pi"), uid("ch"), uid("du")
    return Story(
        "dispute",
        order,
        [
            [Post("stripe", _payment(order, intent, charge, 5000, at))],
            [
                Post(
                    "stripe",
                    _stripe(
                        "charge.dispute.created",
                        at + 3600,
                        {"id": dispute, "amount": 5000, "payment_intent": intent, "charge": charge},
                    ),
                    copies=2,
                )
            ],
        ],
        Expected(
            "disputed",
            paid=5000,
            disputed=5000,
            effects={("order.paid", intent), ("order.disputed", dispute)},
        ),
    )


def asaas_payment_refunded(order: str, at: int) -> Story:
    payment = uid("pay")
    base = _template("asaas/PAYMENT_RECEIVED.json")

    def event(name: str, seconds: int) -> str:
        event = copy.deepcopy(base)
        event["id"] = f"evt_{uuid.uuid4().hex}&{next(_ids)}"
        event["event"] = name
        event["dateCreated"] = _brazil_time(at + seconds)
        event["payment"].update({"id": payment, "externalReference": order})
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
            effects={("order.paid", payment), ("order.refunded", f"{payment}:refund")},
            stale=(0, 1),
        ),
    )


def mercadopago_refunded(order: str, at: int) -> Story:
    payment_id = str(next(_ids) + 9_000_000_000)
    payment = _template("mercadopago/payment.refunded.json")
    payment.update(
        {"id": int(payment_id), "external_reference": order, "metadata": {"order_id": order}}
    )
    refunds = []
    for refund in payment["refunds"]:
        refund = {**refund, "id": next(_ids) + 8_000_000_000, "payment_id": int(payment_id)}
        refunds.append(refund)
    payment["refunds"] = refunds

    def notification(action: str) -> str:
        note = copy.deepcopy(_template("mercadopago/payment.updated.json"))
        note.update(
            {"id": next(_ids) + 100_000_000_000, "action": action, "data": {"id": payment_id}}
        )
        return json.dumps(note)

    return Story(
        "mercadopago paid then refunded twice",
        order,
        [
            [
                Post(
                    "mercadopago",
                    notification("payment.created"),
                    {"data.id": payment_id, "type": "payment"},
                    copies=2,
                )
            ],
            [
                Post(
                    "mercadopago",
                    notification("payment.updated"),
                    {"data.id": payment_id, "type": "payment"},
                )
            ],
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={
                ("order.paid", payment_id),
                *{("order.refunded", f"refund:{r['id']}") for r in refunds},
            },
        ),
        mercadopago_payment=payment,
    )


def _brazil_time(epoch: int) -> str:
    from datetime import datetime, timedelta, timezone

    return datetime.fromtimestamp(epoch, tz=timezone(timedelta(hours=-3))).strftime(
        "%Y-%m-%d %H:%M:%S"
    )


KINDS = (
    stripe_retries,
    stripe_refunds_first,
    stripe_stale_payment,
    stripe_same_second,
    stripe_second_payment,
    stripe_dispute,
    asaas_payment_refunded,
    mercadopago_refunded,
)


def stories(orders: int, now: int, providers: set[str] | None = None) -> list[Story]:
    kinds = [k for k in KINDS if providers is None or _provider_of(k) in providers]
    day_ago = now - 86_400
    return [kinds[n % len(kinds)](uid("ord"), day_ago + n) for n in range(orders)]


def _provider_of(kind: Any) -> str:
    name: str = kind.__name__
    return name.split("_", 1)[0]
