"""Fire drill stories drawn from the provider simulators: a seeded random lifecycle (Stripe on
each API version, Mercado Pago, Asaas), its webhooks delivered in a shuffled order, some
twice, and the order it must end as taken from the simulator's true books, not written by hand.

The drill delivers after the lifecycle is over, so what the providers' APIs answer is their
final state; a Mercado Pago mediation released before any notification is read leaves no trace
in that state, so the drill does not draw one (the history property, which reads the API as the
lifecycle goes, does).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from firedrill.story import Expected, Post, Story
from fixtures.simulators.asaas import AsaasSimulator
from fixtures.simulators.books import TrueBooks
from fixtures.simulators.mercadopago import MercadoPagoSimulator
from fixtures.simulators.stripe import StripeSimulator
from fixtures.simulators.stripe_checkout import StripeCheckout
from fixtures.simulators.stripe_objects import ApiVersion, Capture
from fixtures.simulators.stripe_thin import THIN_READ_VERSIONS, Destination, delivered, objects
from fixtures.simulators.webhooks import Webhook
from functions.shared.domain import TRANSITION_RULES

Simulator = StripeSimulator | StripeCheckout | MercadoPagoSimulator | AsaasSimulator
# Moves whose trace the final state does not keep (see the module's doc).
UNOBSERVABLE_AFTERWARDS = frozenset({"mediation won"})
MAX_MOVES = 6


def simulated_story(order: str, at: int, seed: int) -> Story:
    """One lifecycle, `seed` choosing the provider, the moves and the delivery order."""
    rng = random.Random(seed)  # noqa: S311 - a seeded drill, not a secret
    simulator = _simulator(rng, order, at)
    moves: list[str] = []
    webhooks: list[Webhook] = []
    for _ in range(rng.randint(1, MAX_MOVES)):
        possible = [
            (name, make)
            for name, make in simulator.moves(rng)
            if name not in UNOBSERVABLE_AFTERWARDS
        ]
        if not possible:
            break
        name, make = rng.choice(possible)
        moves.append(name.split(" ")[0])
        webhooks += make()
    # A Stripe destination on a current version delivers thin events too, or instead
    destination = Destination.SNAPSHOT
    if getattr(simulator, "api_version", None) in THIN_READ_VERSIONS:
        destination = rng.choice(list(Destination))
    posts = [
        _post(simulator, posted, rng)
        for webhook in webhooks
        for posted in delivered(destination, webhook)
    ]
    rng.shuffle(posts)
    cut = rng.randint(1, len(posts))
    phases = [phase for phase in (posts[:cut], posts[cut:]) if phase]
    through = " orders" if getattr(simulator, "orders_api", False) else ""
    kind = f"simulated {simulator.provider}{through}: {', '.join(moves)}"
    if destination is not Destination.SNAPSHOT:
        kind += f" ({destination} events)"
    story = Story(kind, order, phases, _expected(simulator.books, sum(p.copies for p in posts)))
    if destination is not Destination.SNAPSHOT:
        story.stripe_objects = objects(webhooks)
    if isinstance(simulator, MercadoPagoSimulator):
        [story.mercadopago_payment] = simulator.payments_listed().values()
        story.mercadopago_order = next(iter(simulator.orders_listed().values()), None)
    if isinstance(simulator, AsaasSimulator):
        story.asaas_payments = simulator.payments_listed()
    if (
        isinstance(simulator, StripeSimulator)
        and not simulator.api_version.sends_card_refund_events
    ):
        # What a legacy endpoint's charge.refunded makes umavez read from Stripe's API.
        story.stripe_refunds = simulator.refunds_listed()
        if simulator.pending_refunds():
            story.watched_charge = simulator.charge
    return story


def _simulator(rng: random.Random, order: str, at: int) -> Simulator:
    amount = rng.choice([5000, 1234, 99_90])
    makers: list[Callable[[], Simulator]] = [
        *(
            (
                lambda version=version: StripeSimulator(
                    # Half the endpoints subscribe charge.refund.updated (see StripeSimulator).
                    order,
                    amount,
                    version,
                    at,
                    refund_updates=rng.random() < 0.5,
                    # Captured at once, or authorized and captured later (in part, over, or
                    # in several captures).
                    capture=rng.choice([Capture.AUTOMATIC, Capture.MANUAL, Capture.MULTICAPTURE]),
                )
            )
            for version in ApiVersion
        ),
        # Checkout (card, boleto or Pix later, expired) on a version whose refunds name
        # themselves (acacia on: the drill tells no refunds API story for Checkout).
        lambda: StripeCheckout(
            order, amount, rng.choice([v for v in ApiVersion if v.sends_card_refund_events]), at
        ),
        lambda: MercadoPagoSimulator(order, amount, at),
        # A merchant on the Orders API, its first card refused and retried in the same order
        lambda: MercadoPagoSimulator(order, amount, at, orders_api=True, retried=True),
        lambda: AsaasSimulator(order, amount, at),
    ]
    return rng.choice(makers)()


def _post(simulator: Simulator, webhook: Webhook, rng: random.Random) -> Post:
    query = {}
    if isinstance(simulator, MercadoPagoSimulator) and simulator.orders_api:
        query = {"data.id": simulator.order_ref, "type": "order"}
    elif isinstance(simulator, MercadoPagoSimulator):
        query = {"data.id": str(simulator.payment_id), "type": "payment"}
    copies = rng.choice([1, 1, 2])
    return Post(webhook.provider, webhook.body, query, copies=copies, announces=webhook.announces)


def _expected(books: TrueBooks, deliveries: int) -> Expected:
    """The truth; a movement and its reversal may both not count (the failure processed
    before the success voids the pair), so those are either way."""
    movements = {_split(m) for m in books.movements}
    reversed_pairs: set[tuple[str, str]] = set()
    for transition, rule in TRANSITION_RULES.items():
        if rule.reverses is None:
            continue
        for name, ref in movements:
            if name == transition.value and (rule.reverses.value, ref) in movements:
                reversed_pairs |= {(name, ref), (rule.reverses.value, ref)}
    return Expected(
        books.status,
        paid=books.paid,
        refunded=books.refunded,
        disputed=books.disputed,
        dispute_won=books.dispute_won,
        dispute_lost=books.dispute_lost,
        inquiry=books.inquiry,
        effects=movements - reversed_pairs,
        either_way=reversed_pairs,
        stale=(0, deliveries),
        currency=books.currency,
    )


def _split(movement: str) -> tuple[str, str]:
    transition, ref = movement.split(":", 1)
    return transition, ref
