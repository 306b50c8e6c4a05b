"""What the fire drill delivers: per order, a story of real-shaped provider events and what the
order must look like once everything has arrived, whatever the order and number of arrivals.

The payloads are the real shapes in fixtures/events, built by the same factories the tests use
(`fixtures`). The written kinds are each provider's (stories_stripe.py: a payment's money;
stories_stripe_ingress.py: how its events come in; stories_mercadopago.py; stories_asaas.py);
this module deals them out, in turn with the simulated lifecycles.
"""

from __future__ import annotations

from collections.abc import Callable

from firedrill.simulated import simulated_story
from firedrill.stories_asaas import (
    asaas_chargeback_won,
    asaas_never_notified,
    asaas_partial_refunds,
    asaas_payment_refunded,
)
from firedrill.stories_mercadopago import (
    mercadopago_chargeback_lost,
    mercadopago_never_notified,
    mercadopago_order_and_its_payment,
    mercadopago_order_retried_and_refunded,
    mercadopago_refunded,
)
from firedrill.stories_stripe import (
    stripe_deposit_and_balance,
    stripe_deposit_naming_nobody,
    stripe_dispute,
    stripe_dispute_lost,
    stripe_dispute_won,
    stripe_inquiry,
    stripe_legacy_charge_refunded,
    stripe_partial_refunds_out_of_order,
    stripe_refund_failed_first,
    stripe_refund_reversed,
    stripe_refunds_first,
    stripe_retries,
    stripe_same_second,
    stripe_second_payment,
    stripe_stale_payment,
    stripe_zero_decimal,
)
from firedrill.stories_stripe_ingress import (
    stripe_checkout_boleto,
    stripe_checkout_card,
    stripe_conflicting_metadata,
    stripe_live_event_on_a_test_stack,
    stripe_payment_after_the_retry_budget,
    stripe_subscription_invoice,
    stripe_thin_events,
    stripe_through_eventbridge,
    stripe_unmatched_payment,
    stripe_webhooks_lost,
)
from firedrill.story import Story
from fixtures.shapes import unique

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
    stripe_deposit_naming_nobody,
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
