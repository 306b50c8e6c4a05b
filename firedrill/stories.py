"""What the fire drill delivers: per order, a story of real-shaped provider events and what the
order must look like once everything has arrived, whatever the order and number of arrivals.

The payloads are the real shapes in fixtures/events, built by the same factories the tests use
(`fixtures`).

Long on purpose: one story per kind of delivery the drill makes, each with the truth it must
end in, side by side so that kinds are compared at a glance.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from firedrill.simulated import simulated_story
from firedrill.statement import card_fee
from firedrill.story import Expected, Post, Story
from fixtures import stripe
from fixtures.shapes import shape, unique

_numbers = itertools.count(1)
BRAZIL = timezone(timedelta(hours=-3))


def stripe_retries(order: str, at: int) -> Story:
    """Provider retries: the same event four times at once, once more after a timeout, and the
    same payment announced by charge.succeeded and invoice_payment.paid."""
    intent, charge = unique("pi"), unique("ch")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    return Story(
        "retries & three announcements",
        order,
        [
            [Post("stripe", paid, copies=4)],
            [
                Post("stripe", paid, slow=True),
                Post("stripe", stripe.charge_succeeded(order, intent, charge, 5000, at)),
                Post("stripe", stripe.invoice_payment_paid(intent, 5000, at + 1)),
            ],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_refunds_first(order: str, at: int) -> Story:
    """Two partial refunds of one charge arrive before their payment (no order metadata)."""
    intent, charge, first, second = unique("pi"), unique("ch"), unique("re"), unique("re")
    return Story(
        "partial refunds before payment",
        order,
        [
            [
                Post("stripe", stripe.refund_created(intent, first, 2000, at + 60, charge)),
                Post("stripe", stripe.refund_created(intent, second, 3000, at + 60, charge)),
            ],
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
        ],
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={("order.paid", intent), ("order.refunded", first), ("order.refunded", second)},
        ),
    )


def _refund_and_payment(kind: str, order: str, at: int, refund_after: int) -> Story:
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    payment = Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))
    refunded = Post(
        "stripe", stripe.refund_created(intent, refund, 5000, at + refund_after, charge, order)
    )
    # Same second: delivered at once. Otherwise the refund first, its older payment after.
    phases = [[payment, refunded]] if refund_after == 0 else [[refunded], [payment]]
    return Story(
        kind,
        order,
        phases,
        Expected(
            "refunded",
            paid=5000,
            refunded=5000,
            effects={("order.paid", intent), ("order.refunded", refund)},
            stale=(0, 1),
        ),
    )


def stripe_stale_payment(order: str, at: int) -> Story:
    """A refund (with the order in its metadata) before its older payment: status stays."""
    return _refund_and_payment("refund then older payment", order, at, refund_after=60)


def stripe_same_second(order: str, at: int) -> Story:
    """Payment and refund stamped with the same second, delivered at the same instant."""
    return _refund_and_payment("same-second payment and refund", order, at, refund_after=0)


def stripe_second_payment(order: str, at: int) -> Story:
    """Paid, refunded, paid again with a new PaymentIntent; two forgeries on the side."""
    first, second, charge, refund = unique("pi"), unique("pi"), unique("ch"), unique("re")
    forged = stripe.payment_intent_succeeded(order, unique("pi"), 9999, at, charge)
    return Story(
        "second payment after refund",
        order,
        [
            [
                Post("stripe", stripe.payment_intent_succeeded(order, first, 5000, at, charge)),
                Post("stripe", forged, forgery="bad-signature"),
            ],
            [Post("stripe", stripe.refund_created(first, refund, 5000, at + 60, charge))],
            [
                Post("stripe", stripe.payment_intent_succeeded(order, second, 5000, at + 120)),
                Post("stripe", forged, forgery="stale-timestamp"),
            ],
        ],
        Expected(
            "partially_refunded",
            paid=10000,
            refunded=5000,
            effects={("order.paid", first), ("order.paid", second), ("order.refunded", refund)},
            stale=(0, 2),
        ),
    )


def stripe_deposit_and_balance(order: str, at: int) -> Story:
    """One order paid by two PaymentIntents, a deposit and its balance, the balance delivered
    first: the deposit, late if processed second, is e-mailed all the same (it contradicts
    nothing); both count."""
    deposit, balance = unique("pi"), unique("pi")
    return Story(
        "deposit after its balance",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, balance, 7000, at + 3600))],
            [Post("stripe", stripe.payment_intent_succeeded(order, deposit, 3000, at))],
        ],
        Expected(
            "paid",
            paid=10000,
            effects={("order.paid", deposit), ("order.paid", balance)},
            # Stale when processed after the balance; the drill's queue may take it first.
            stale=(0, 1),
        ),
    )


def stripe_dispute(order: str, at: int) -> Story:
    intent, dispute = unique("pi"), unique("du")
    return Story(
        "dispute",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at))],
            [Post("stripe", stripe.dispute_created(intent, dispute, 5000, at + 3600), copies=2)],
        ],
        Expected(
            "disputed",
            paid=5000,
            disputed=5000,
            effects={("order.paid", intent), ("order.disputed", dispute)},
        ),
    )


def asaas_payment_refunded(order: str, at: int) -> Story:
    payment = unique("pay")

    refund_at = _brazil(at + 58)

    def event(name: str, seconds: int) -> str:
        event = shape(
            f"asaas/{'PAYMENT_REFUNDED' if name == 'PAYMENT_REFUNDED' else 'PAYMENT_RECEIVED'}.json"
        )
        event["id"] = f"evt_{uuid.uuid4().hex}&{next(_numbers)}"
        event["event"] = name
        event["dateCreated"] = _brazil(at + seconds)
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


def mercadopago_refunded(order: str, at: int) -> Story:
    """Notified when created and when updated; the API shows it paid and refunded twice."""
    payment_id = str(9_000_000_000 + next(_numbers))
    payment = shape("mercadopago/payment.refunded.json")
    payment.update({"id": int(payment_id), "external_reference": order})
    payment["metadata"] = {"order_id": order}
    payment["refunds"] = [
        {**refund, "id": 8_000_000_000 + next(_numbers), "payment_id": int(payment_id)}
        for refund in payment["refunds"]
    ]
    query = {"data.id": payment_id, "type": "payment"}

    def notification(action: str) -> str:
        note = shape("mercadopago/payment.updated.json")
        note.update({"id": 100_000_000_000 + next(_numbers), "action": action})
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
    payment_id = str(9_000_000_000 + next(_numbers))
    payment = shape("mercadopago/payment.charged_back_settled.json")
    payment.update({"id": int(payment_id), "external_reference": order, "metadata": {}})
    # Settled the next day (the captured shape's date is in the future of any drill)
    payment["date_last_updated"] = "2026-11-30T10:02:13.000-04:00"
    query = {"data.id": payment_id, "type": "payment"}
    note = shape("mercadopago/payment.updated.json")
    note.update({"id": 100_000_000_000 + next(_numbers), "data": {"id": payment_id}})
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


def asaas_chargeback_won(order: str, at: int) -> Story:
    """Received, chargeback requested, contested, won (awaiting the acquirer's reversal)."""
    payment = unique("pay")

    def event(name: str, seconds: int) -> str:
        event = shape(f"asaas/{name}.json")
        event["id"] = f"evt_{uuid.uuid4().hex}&{next(_numbers)}"
        event["dateCreated"] = _brazil(at + seconds)
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


def stripe_legacy_charge_refunded(order: str, at: int) -> Story:
    """An endpoint pinned to 2023-10-16: a card refund arrives only as charge.refunded, which
    names no refund; its refunds are read from Stripe's API (and a refund.created of the same
    refund from another endpoint is the same entry)."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    event = json.loads(stripe.fixture_text("charge.refunded.2023-10-16"))
    event["id"] = unique("evt")
    event["created"] = at + 120
    event["data"]["object"].update(
        {"id": charge, "payment_intent": intent, "metadata": {"order_id": order}}
    )
    listed = json.loads(stripe.fixture_text("api.refunds.list"))["data"][0]
    return Story(
        "legacy charge.refunded, refunds read from the API",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [
                Post("stripe", json.dumps(event)),
                Post("stripe", stripe.refund_created(intent, refund, 1500, at + 60, charge)),
            ],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=1500,
            effects={("order.paid", intent), ("order.refunded", refund)},
            stale=(0, 1),
        ),
        stripe_refunds={
            charge: [
                {
                    **listed,
                    "id": refund,
                    "amount": 1500,
                    "created": at + 60,
                    "charge": charge,
                    "payment_intent": intent,
                }
            ]
        },
    )


def stripe_refund_reversed(order: str, at: int) -> Story:
    """A partial refund succeeds, then fails: its money is back, the order is paid again."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    return Story(
        "refund reversed",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [Post("stripe", stripe.refund_created(intent, refund, 2000, at + 60, charge))],
            [
                Post(
                    "stripe",
                    stripe.refund_failed(intent, refund, 2000, at + 3600, charge),
                    copies=2,
                )
            ],
        ],
        Expected(
            "paid",
            paid=5000,
            effects={("order.paid", intent)},
            either_way={("order.refunded", refund), ("order.refund_reversed", refund)},
        ),
    )


def stripe_refund_failed_first(order: str, at: int) -> Story:
    """A refund's failure arrives before its success: it never counts, both ways voided."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    return Story(
        "refund failure before its success",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [Post("stripe", stripe.refund_failed(intent, refund, 2000, at + 3600, charge))],
            [Post("stripe", stripe.refund_created(intent, refund, 2000, at + 60, charge))],
        ],
        Expected(
            "paid",
            paid=5000,
            effects={("order.paid", intent)},
            either_way={("order.refunded", refund), ("order.refund_reversed", refund)},
        ),
    )


def stripe_partial_refunds_out_of_order(order: str, at: int) -> Story:
    """Two partial refunds, the later one first: the earlier is late, counted and announced."""
    intent, charge, first, second = unique("pi"), unique("ch"), unique("re"), unique("re")
    return Story(
        "partial refunds out of order",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 10000, at, charge))],
            [Post("stripe", stripe.refund_created(intent, second, 2000, at + 120, charge))],
            [Post("stripe", stripe.refund_created(intent, first, 1000, at + 60, charge))],
        ],
        Expected(
            "partially_refunded",
            paid=10000,
            refunded=3000,
            effects={("order.paid", intent), ("order.refunded", first), ("order.refunded", second)},
            stale=(0, 1),  # delivered in that order; processed in almost surely the same
        ),
    )


def _dispute_story(
    kind: str, order: str, at: int, verdicts: list[str], expected: Expected
) -> Story:
    intent, dispute = unique("pi"), unique("du")
    opened = at + 3600
    opening = "charge.dispute.created.inquiry" if kind == "inquiry" else "charge.dispute.created"
    expected.effects |= {("order.paid", intent)}
    expected.effects |= {(transition, dispute) for transition in _dispute_transitions(kind)}
    return Story(
        kind,
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at))],
            [Post("stripe", stripe.dispute_event(opening, intent, dispute, 5000, opened, opened))],
            [
                Post(
                    "stripe",
                    stripe.dispute_event(v, intent, dispute, 5000, opened + 86_400, opened),
                )
                for v in verdicts
            ],
        ],
        expected,
    )


def _dispute_transitions(kind: str) -> tuple[str, ...]:
    return {
        "dispute won": ("order.disputed", "order.dispute_won"),
        "dispute lost": ("order.disputed", "order.dispute_lost"),
        "inquiry": ("order.inquiry_opened", "order.inquiry_closed"),
    }[kind]


def stripe_dispute_won(order: str, at: int) -> Story:
    """Funds withdrawn, then the dispute won: closed and funds_reinstated are one verdict."""
    verdicts = ["charge.dispute.closed.won", "charge.dispute.funds_reinstated"]
    return _dispute_story(
        "dispute won", order, at, verdicts, Expected("dispute_won", paid=5000, dispute_won=5000)
    )


def stripe_dispute_lost(order: str, at: int) -> Story:
    verdicts = ["charge.dispute.closed.lost"]
    return _dispute_story(
        "dispute lost", order, at, verdicts, Expected("dispute_lost", paid=5000, dispute_lost=5000)
    )


def stripe_inquiry(order: str, at: int) -> Story:
    """An inquiry moves no money; closed, the order is simply paid."""
    verdicts = ["charge.dispute.closed.warning_closed"]
    return _dispute_story("inquiry", order, at, verdicts, Expected("paid", paid=5000))


def stripe_zero_decimal(order: str, at: int) -> Story:
    """JPY has no minor unit: 1234 is ¥1,234, refunded in part."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    paid = stripe.payment_intent_succeeded(order, intent, 1234, at, charge, currency="jpy")
    refunded = json.loads(stripe.refund_created(intent, refund, 234, at + 60, charge))
    refunded["data"]["object"]["currency"] = "jpy"
    return Story(
        "zero-decimal currency (JPY)",
        order,
        [[Post("stripe", paid)], [Post("stripe", json.dumps(refunded))]],
        Expected(
            "partially_refunded",
            paid=1234,
            refunded=234,
            effects={("order.paid", intent), ("order.refunded", refund)},
            currency="jpy",
        ),
    )


def asaas_partial_refunds(order: str, at: int) -> Story:
    """Asaas lists every refund so far: the same list twice, then grown by one."""
    payment = unique("pay")

    def event(name: str, seconds: int, refunds: Sequence[tuple[int, float]]) -> str:
        event = shape("asaas/PAYMENT_PARTIALLY_REFUNDED.json")
        event["id"] = f"evt_{uuid.uuid4().hex}&{next(_numbers)}"
        event["event"] = name
        event["dateCreated"] = _brazil(at + seconds)
        event["payment"].update({"id": payment, "externalReference": order, "value": 100})
        template = event["payment"]["refunds"][0]
        event["payment"]["refunds"] = [
            {**template, "dateCreated": _brazil(at + offset), "value": value, "status": "DONE"}
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
                ("order.refunded", f"{payment}:refund:{_brazil(at + 60)}:2000#1"),
                ("order.refunded", f"{payment}:refund:{_brazil(at + 120)}:3050#1"),
            },
            stale=(0, 1),
        ),
    )


def stripe_checkout_card(order: str, at: int) -> Story:
    """Checkout: the order is on the session; the PaymentIntent, without it, may come first."""
    intent, session = unique("pi"), unique("cs")
    return Story(
        "checkout (card)",
        order,
        [
            [
                Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at)),
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.completed.card", order, intent, session, at
                    ),
                ),
            ]
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_checkout_boleto(order: str, at: int) -> Story:
    """Checkout with boleto: completed unpaid (bound), paid later; another session fails."""
    intent, session = unique("pi"), unique("cs")
    return Story(
        "checkout (boleto, paid later)",
        order,
        [
            [
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.completed.boleto", order, intent, session, at
                    ),
                ),
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.async_payment_failed",
                        order,
                        unique("pi"),
                        unique("cs"),
                        at,
                    ),
                ),
            ],
            [
                Post(
                    "stripe",
                    stripe.checkout_session(
                        "checkout.session.async_payment_succeeded", order, intent, session, at + 600
                    ),
                ),
                Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at + 600)),
            ],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_subscription_invoice(order: str, at: int) -> Story:
    """A basil subscription invoice carries the order; its payment events do not."""
    intent, invoice, subscription = unique("pi"), unique("in"), unique("sub")
    return Story(
        "subscription invoice",
        order,
        [
            [
                Post("stripe", stripe.subscription_invoice_paid(order, invoice, subscription, at)),
                Post("stripe", stripe.subscription_invoice_payment_paid(invoice, intent, 5000, at)),
                Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at)),
            ]
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


def stripe_conflicting_metadata(order: str, at: int) -> Story:
    """The PaymentIntent's order changed after its charge copied the old one: one credit."""
    intent, charge, other = unique("pi"), unique("ch"), unique("ord")
    return Story(
        "one payment named for two orders",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [Post("stripe", stripe.charge_succeeded(other, intent, charge, 5000, at))],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
        conflicting_order=other,
    )


def stripe_live_event_on_a_test_stack(order: str, at: int) -> Story:
    """A Connect platform's endpoint gets the other mode's events too: a live-mode refund of
    this test-mode payment must be acknowledged and never counted."""
    intent, charge = unique("pi"), unique("ch")
    live_refund = json.loads(stripe.refund_created(intent, unique("re"), 5000, at + 60, charge))
    live_refund["livemode"] = True
    return Story(
        "live-mode event on a test stack",
        order,
        [
            [Post("stripe", stripe.payment_intent_succeeded(order, intent, 5000, at, charge))],
            [Post("stripe", json.dumps(live_refund), other_mode=True)],
        ],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
    )


# Longer than the local SQS retry budget (5 receives x 3 s): only waiting saves the refund.
LATE_PAYMENT_SECONDS = 18.0


def stripe_payment_after_the_retry_budget(order: str, at: int) -> Story:
    """A refund (no order on it) whose payment arrives after SQS would have dead-lettered it."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    late = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    return Story(
        "payment long after its refund",
        order,
        [
            [Post("stripe", stripe.refund_created(intent, refund, 1000, at + 60, charge))],
            [Post("stripe", late, after_seconds=LATE_PAYMENT_SECONDS)],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=1000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
    )


def stripe_unmatched_payment(order: str, at: int) -> Story:
    """A payment no event ever binds: unmatched, listed, then attached to `order` by hand."""
    intent = unique("pi")
    return Story(
        "unmatched payment, attached",
        order,
        [[Post("stripe", stripe.payment_intent_succeeded(None, intent, 5000, at))]],
        Expected("paid", paid=5000, effects={("order.paid", intent)}),
        unmatched_object=intent,
    )


def stripe_webhooks_lost(order: str, at: int) -> Story:
    """A webhook outage past Stripe's retries (and its Events API's 30 days): after the order's
    first event, its payment and a partial refund were never delivered. Only Stripe's balance
    holds them: the statement books both, once, each announced as found by it."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    opened = json.loads(stripe.payment_intent_succeeded(order, intent, 5000, at))
    opened["type"] = "payment_intent.created"
    opened["data"]["object"].update({"status": "requires_payment_method", "amount_received": 0})
    paid = stripe.charge_succeeded(order, intent, charge, 5000, at + 60)
    refunded = stripe.refund_created(intent, refund, 2000, at + 120, charge)
    return Story(
        "webhooks lost, healed by the statement",
        order,
        [[Post("stripe", json.dumps(opened))]],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=2000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
        stripe_balance=[
            stripe.balance_transaction(paid, "charge", 5000, fee=card_fee(5000)),
            stripe.balance_transaction(refunded, "refund", 2000),
        ],
    )


def mercadopago_never_notified(order: str, at: int) -> Story:
    """A Pix payment approved while the endpoint was down past Mercado Pago's retries: no
    notification of it ever arrives. Mercado Pago's payments search lists it; the statement
    books it, once, with the fee Mercado Pago kept."""
    payment_id = str(9_000_000_000 + next(_numbers))
    stamp = _brazil_iso(at)
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


def stripe_through_eventbridge(order: str, at: int) -> Story:
    """A merchant on Stripe's EventBridge destination and its webhook at once
    (`stripeIngress=both`): the payment and its refund put on the partner bus (twice, as
    EventBridge delivers at least once), the payment also posted to the webhook: each booked
    once."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    refunded = stripe.refund_created(intent, refund, 2000, at + 60, charge)
    return Story(
        "stripe through EventBridge and its webhook",
        order,
        [
            [Post("stripe", paid, via_eventbridge=True), Post("stripe", paid)],
            [
                Post("stripe", refunded, via_eventbridge=True),
                Post("stripe", refunded, via_eventbridge=True),
            ],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=2000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
    )


def stripe_thin_events(order: str, at: int) -> Story:
    """A merchant on thin destinations (a webhook and EventBridge) beside its snapshot
    webhook: the payment and its refund announced thin (the refund's event on both
    destinations) and the payment by snapshot too; umavez reads each object from Stripe's API,
    as it is now: each booked once."""
    intent, charge, refund = unique("pi"), unique("ch"), unique("re")
    paid = stripe.payment_intent_succeeded(order, intent, 5000, at, charge)
    refunded = stripe.refund_created(intent, refund, 2000, at + 60, charge)

    # One thin event per change, sent to every destination: the webhook and EventBridge.
    paid_thin, refunded_thin = stripe.thin_of(paid), stripe.thin_of(refunded)
    return Story(
        "stripe thin events beside snapshot ones",
        order,
        [
            [Post("stripe", paid_thin, copies=2, announces=paid), Post("stripe", paid)],
            [
                Post("stripe", refunded_thin, announces=refunded),
                Post("stripe", refunded_thin, announces=refunded, via_eventbridge=True),
            ],
        ],
        Expected(
            "partially_refunded",
            paid=5000,
            refunded=2000,
            effects={("order.paid", intent), ("order.refunded", refund)},
        ),
        stripe_objects={
            stripe.object_of(body)[1]["id"]: stripe.object_of(body)[1] for body in (paid, refunded)
        },
    )


def _order_of_orders_api(order: str, at: int, fixture: str) -> dict[str, Any]:
    """An order of Mercado Pago's Orders API for `order`, created at `at` and changed ten
    minutes later, its transactions with ids of their own."""
    made = shape(f"mercadopago/{fixture}")
    suffix = f"{next(_numbers):021d}"
    made.update(
        {
            "id": f"ORD01{suffix}",
            "external_reference": order,
            "created_date": _utc_iso(at),
            "last_updated_date": _utc_iso(at + 600),
        }
    )
    for n, payment in enumerate(made["transactions"]["payments"]):
        payment["id"] = f"PAY0{n}{suffix}"
    return made


def _order_notification(made: dict[str, Any], version: int) -> str:
    note = shape("mercadopago/order.notification.json")
    note["action"] = f"order.{made['status']}"
    note["data"] = {"id": made["id"], "external_reference": made["external_reference"]}
    note["data"] |= {"status": made["status"], "version": version}
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
    payment_id = 9_000_000_000 + next(_numbers)
    refund_id = 8_000_000_000 + next(_numbers)
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
            "date_created": _brazil_iso(at),
            "date_approved": _brazil_iso(at + 2),
            "date_last_updated": _brazil_iso(at + 600),
        }
    )
    payment["refunds"] = [
        {**payment["refunds"][0], "id": refund_id, "payment_id": payment_id, "amount": 50}
    ]
    payment["refunds"][0]["date_created"] = _brazil_iso(at + 590)
    by_payment = shape("mercadopago/payment.updated.json")
    by_payment.update({"id": 100_000_000_000 + next(_numbers), "data": {"id": str(payment_id)}})
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


def _utc_iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).isoformat(timespec="milliseconds")


def _brazil_iso(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=BRAZIL).isoformat(timespec="milliseconds")


def _brazil(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, tz=BRAZIL).strftime("%Y-%m-%d %H:%M:%S")


KINDS: tuple[Callable[[str, int], Story], ...] = (
    stripe_retries,
    stripe_refunds_first,
    stripe_stale_payment,
    stripe_same_second,
    stripe_second_payment,
    stripe_deposit_and_balance,
    stripe_dispute,
    asaas_payment_refunded,
    mercadopago_refunded,
    stripe_refund_reversed,
    stripe_refund_failed_first,
    stripe_partial_refunds_out_of_order,
    stripe_dispute_won,
    stripe_dispute_lost,
    stripe_inquiry,
    stripe_zero_decimal,
    asaas_partial_refunds,
    stripe_checkout_card,
    stripe_checkout_boleto,
    stripe_subscription_invoice,
    stripe_conflicting_metadata,
    stripe_payment_after_the_retry_budget,
    stripe_unmatched_payment,
    stripe_legacy_charge_refunded,
    mercadopago_chargeback_lost,
    asaas_chargeback_won,
    stripe_live_event_on_a_test_stack,
    stripe_webhooks_lost,
    mercadopago_never_notified,
    asaas_never_notified,
    mercadopago_order_retried_and_refunded,
    mercadopago_order_and_its_payment,
    stripe_through_eventbridge,
    stripe_thin_events,
)


# Every SIMULATED_EVERY-th story is a random lifecycle from the provider simulators
# (firedrill/simulated.py); the others are the written kinds, in turn.
SIMULATED_EVERY = 3


def story(n: int, at: int, seed: int) -> Story:
    """The drill's n-th story: a written kind, or a lifecycle the simulators draw from `seed`
    and `n` (the same seed draws the same lifecycles)."""
    if n % SIMULATED_EVERY == SIMULATED_EVERY - 1:
        return simulated_story(unique("ord"), at, seed * 1_000_003 + n)
    written = n - n // SIMULATED_EVERY
    return KINDS[written % len(KINDS)](unique("ord"), at)


def stories(orders: int, now: int, seed: int = 42) -> list[Story]:
    """`orders` stories, written kinds in turn and simulated lifecycles, their events a day
    old."""
    day_ago = now - 86_400
    return [story(n, day_ago + n, seed) for n in range(orders)]


def stories_for_deliveries(deliveries: int, now: int, seed: int = 42) -> list[Story]:
    """Stories as `stories` makes them, until they make at least `deliveries` deliveries
    (provider retries come on top)."""
    day_ago = now - 86_400
    made: list[Story] = []
    total = 0
    while total < deliveries:
        made.append(story(len(made), day_ago + len(made), seed))
        total += made[-1].deliveries
    return made
