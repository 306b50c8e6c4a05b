"""The fire drill's Stripe stories of one payment's money: retries and announcements, refunds
and disputes arriving in any order, before or after their payment, and each version's shape."""

from __future__ import annotations

import json

from firedrill.story import Expected, Post, Story
from fixtures import stripe
from fixtures.shapes import unique


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


def stripe_deposit_naming_nobody(order: str, at: int) -> Story:
    """A deposit whose payment_intent.succeeded names nobody (its charge events never sent),
    then its balance naming the customer: the deposit's notification, sent before any address
    was known, is e-mailed once the balance teaches the order whom to write to."""
    deposit, balance = unique("pi"), unique("pi")
    silent = json.loads(stripe.payment_intent_succeeded(order, deposit, 3000, at))
    silent["data"]["object"]["receipt_email"] = None
    return Story(
        "deposit naming nobody, then its balance",
        order,
        [
            [Post("stripe", json.dumps(silent))],
            [Post("stripe", stripe.payment_intent_succeeded(order, balance, 7000, at + 3600))],
        ],
        Expected(
            "paid",
            paid=10000,
            effects={("order.paid", deposit), ("order.paid", balance)},
            # The drill's queue may take the balance first: the deposit is then stale.
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
