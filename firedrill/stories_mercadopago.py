"""The fire drill's Mercado Pago stories: payments read from the Payments API when notified (or
never notified, healed by the statement), and orders of the Orders API."""

from __future__ import annotations

import json
from typing import Any

from firedrill.story import Expected, Post, Story
from firedrill.story_values import brazil_iso, next_number, utc_iso
from fixtures.mercadopago import order_notification
from fixtures.shapes import shape


def mercadopago_refunded(order: str, at: int) -> Story:
    """Notified when created and when updated; the API shows it paid and refunded twice."""
    payment_id = str(9_000_000_000 + next_number())
    payment = shape("mercadopago/payment.refunded.json")
    payment.update({"id": int(payment_id), "external_reference": order})
    payment["metadata"] = {"order_id": order}
    payment["refunds"] = [
        {**refund, "id": 8_000_000_000 + next_number(), "payment_id": int(payment_id)}
        for refund in payment["refunds"]
    ]
    query = {"data.id": payment_id, "type": "payment"}

    def notification(action: str) -> str:
        note = shape("mercadopago/payment.updated.json")
        note.update({"id": 100_000_000_000 + next_number(), "action": action})
        note["data"] = {"id": payment_id}
        return json.dumps(note)

    refunds = {("order.refunded", f"refund:{r['id']}") for r in payment["refunds"]}
    return Story(
        "mercadopago paid then refunded twice",
        order,
        [
            [Post("mercadopago", notification("payment.created"), query, copies=2)],
            [Post("mercadopago", notification("payment.updated"), query)],
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={("order.paid", payment_id), *refunds},
            stale=(0, 1),
        ),
        mercadopago_payment=payment,
    )


def mercadopago_chargeback_lost(order: str, at: int) -> Story:
    """Read when approved, then after a chargeback settled against the seller."""
    payment_id = str(9_000_000_000 + next_number())
    payment = shape("mercadopago/payment.charged_back_settled.json")
    payment.update({"id": int(payment_id), "external_reference": order, "metadata": {}})
    # Settled the next day (the captured shape's date is in the future of any drill)
    payment["date_last_updated"] = "2026-11-30T10:02:13.000-04:00"
    query = {"data.id": payment_id, "type": "payment"}
    note = shape("mercadopago/payment.updated.json")
    note.update({"id": 100_000_000_000 + next_number(), "data": {"id": payment_id}})
    return Story(
        "mercadopago chargeback lost",
        order,
        [[Post("mercadopago", json.dumps(note), query, copies=2)]],
        Expected(
            "dispute_lost",
            paid=5000,
            dispute_lost=5000,
            effects={
                ("order.paid", payment_id),
                ("order.disputed", f"{payment_id}:dispute"),
                ("order.dispute_lost", f"{payment_id}:dispute"),
            },
        ),
        mercadopago_payment=payment,
    )


def mercadopago_never_notified(order: str, at: int) -> Story:
    """A Pix payment approved while the endpoint was down past Mercado Pago's retries: no
    notification of it ever arrives. Mercado Pago's payments search lists it; the statement
    books it, once, with the fee Mercado Pago kept."""
    payment_id = str(9_000_000_000 + next_number())
    stamp = brazil_iso(at)
    payment = shape("mercadopago/payment.json")
    payment.update(
        {
            "id": int(payment_id),
            "external_reference": order,
            "metadata": {"order_id": order},
            "date_created": stamp,
            "date_approved": stamp,
            "date_last_updated": stamp,
            "fee_details": [{"amount": 0.5, "fee_payer": "collector", "type": "mercadopago_fee"}],
        }
    )
    return Story(
        "mercadopago never notified, healed by the statement",
        order,
        [[]],
        Expected("paid", paid=5000, effects={("order.paid", payment_id)}),
        mercadopago_payment=payment,
        statement_only=True,
    )


def _order_of_orders_api(order: str, at: int, fixture: str) -> dict[str, Any]:
    """An order of Mercado Pago's Orders API for `order`, created at `at` and changed ten
    minutes later, its transactions with ids of their own."""
    made = shape(f"mercadopago/{fixture}")
    suffix = f"{next_number():021d}"
    made.update(
        {
            "id": f"ORD01{suffix}",
            "external_reference": order,
            "created_date": utc_iso(at),
            "last_updated_date": utc_iso(at + 600),
        }
    )
    for n, payment in enumerate(made["transactions"]["payments"]):
        payment["id"] = f"PAY0{n}{suffix}"
    return made


def _order_notification(made: dict[str, Any], version: int) -> str:
    """The order's notification at `version`, naming the order's reference as Mercado Pago's
    does."""
    note = order_notification(
        made["id"], made["status"], version, external_reference=made["external_reference"]
    )
    return json.dumps(note)


def mercadopago_order_retried_and_refunded(order: str, at: int) -> Story:
    """Checkout API through the Orders API: a card refused, retried in the same order and
    processed, then refunded in part. Notified on topic `order` (twice at once, then after the
    refund); process reads the order from the Orders API, so each notification books the order
    as it is then: the retry paid once, the refund once."""
    made = _order_of_orders_api(order, at, "order.retried.json")
    paid = made["transactions"]["payments"][1]
    made["status_detail"] = "partially_refunded"
    paid["refunded_amount"] = "50.00"
    refund = f"REF01{made['id'].removeprefix('ORD01')}"
    made["transactions"]["refunds"] = [
        {"id": refund, "transaction_id": paid["id"], "amount": "50.00", "status": "processed"}
    ]
    query = {"data.id": made["id"], "type": "order"}
    return Story(
        "mercadopago order: a payment retried, then refunded in part",
        order,
        [
            [Post("mercadopago", _order_notification(made, 2), query, copies=2)],
            [Post("mercadopago", _order_notification(made, 3), query)],
        ],
        Expected(
            "partially_refunded",
            paid=20000,
            refunded=5000,
            effects={("order.paid", paid["id"]), ("order.refunded", f"refund:{refund}")},
        ),
        mercadopago_order=made,
    )


def mercadopago_order_and_its_payment(order: str, at: int) -> Story:
    """An order whose payment and refund name their Payments API objects, announced on both
    topics (a merchant subscribed to `order` and `payment`): the same money is one effect
    whichever topic is read first, and Mercado Pago's payments search matches it."""
    made = _order_of_orders_api(order, at, "order.partially_refunded.json")
    payment_id = 9_000_000_000 + next_number()
    refund_id = 8_000_000_000 + next_number()
    [paid] = made["transactions"]["payments"]
    paid["reference"] = {"id": str(payment_id)}
    [refunded] = made["transactions"]["refunds"]
    refunded.update({"transaction_id": paid["id"], "reference": {"id": str(refund_id)}})
    payment = shape("mercadopago/payment.refunded.json")
    payment.update(
        {
            "id": payment_id,
            "status": "approved",
            "status_detail": "partially_refunded",
            "external_reference": order,
            "metadata": {},
            "transaction_amount": 200,
            "transaction_amount_refunded": 50,
            "date_created": brazil_iso(at),
            "date_approved": brazil_iso(at + 2),
            "date_last_updated": brazil_iso(at + 600),
        }
    )
    payment["refunds"] = [
        {**payment["refunds"][0], "id": refund_id, "payment_id": payment_id, "amount": 50}
    ]
    payment["refunds"][0]["date_created"] = brazil_iso(at + 590)
    by_payment = shape("mercadopago/payment.updated.json")
    by_payment.update({"id": 100_000_000_000 + next_number(), "data": {"id": str(payment_id)}})
    order_query = {"data.id": made["id"], "type": "order"}
    payment_query = {"data.id": str(payment_id), "type": "payment"}
    return Story(
        "mercadopago order announced on order and on payment",
        order,
        [
            [
                Post("mercadopago", _order_notification(made, 3), order_query),
                Post("mercadopago", json.dumps(by_payment), payment_query),
            ]
        ],
        Expected(
            "partially_refunded",
            paid=20000,
            refunded=5000,
            effects={("order.paid", str(payment_id)), ("order.refunded", f"refund:{refund_id}")},
            stale=(0, 2),
        ),
        mercadopago_payment=payment,
        mercadopago_order=made,
    )
