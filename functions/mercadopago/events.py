"""Mercado Pago: the notification is thin and carries no status, so the payment is fetched (an
order of the Orders API, topic `order`, is read as `orders.py` says).

One payment can hold several entries, each named by its own object:
- the payment itself (`order.paid`, external ref = payment id) once `date_approved` is set
  and its status says the money came in;
- each *approved* entry of `refunds` (`order.refunded`, external ref = the refund id): two
  partial refunds are two entries; a rejected or in-process refund moved no money;
- its dispute (`{id}:dispute`): a mediation (`in_mediation`, the funds held) and the chargeback
  it may escalate to (`charged_back`) are one claim on one payment, withdrawn once
  (`order.disputed`) and settled once: lost when the chargeback is `settled` (the money is
  gone), won when `reimbursed` (Mercado Pago covered it) or when the payment is back to
  `approved` after a mediation (the hold released; `order.dispute_won`), lost when buyer
  protection refunded the buyer (`refunded`, `bpp_refunded`: a refund whose `source.type` is
  `bpp` is the claim's loss, paid from the seller's money, not a refund the seller gave), closed
  by the seller's own refund when it is `refunded` after a mediation otherwise (the refund is
  its own `order.refunded`; the hold closes as `order.dispute_refunded`, neither won nor lost);
  a release is counted only if the dispute is open: the payment read is its current state, and
  most approved payments were never disputed.
A notification re-read later yields the same entries with the same keys, so reprocessing any
notification of a payment is safe. Amounts are decimals in major units of `currency_id`
(CLP 5000 is 5,000 pesos); the order is `external_reference` (or `metadata.order_id`).

What a dispute holds is what the payment still had: `transaction_amount` less
`transaction_amount_refunded` (the approved refunds when that is absent). The payment carries
it, for a mediation as for a chargeback; `GET /v1/chargebacks/{id}` is not read: a mediation
has no chargeback, and a dispute keeps the amount its opening withdrew until its verdict (a
second source could only disagree with an amount already booked). So a verdict or a release is
booked for what the ledger says its opening withdrew (`DisputeBooks`), not recomputed: a
mediation the buyer wins by a refund leaves nothing on the payment, yet releases its hold.

Before one dispute per payment, a mediation was booked as `{id}:mediation` and a chargeback as
`{id}:chargeback`, two withdrawals, and an escalated mediation never closed. Ledgers keep those
entries, and keys are never rewritten, so the dispute of a payment is the one its ledger already
holds: `{id}:chargeback` if that opening counted (a payment is charged back once; a mediation
booked beside it is the old double withdrawal, left for a person to repair: no verdict can
close it without booking money that did not move), else `{id}:mediation` if that opening
counted and was not released (an open mediation escalating or released after the deploy),
else `{id}:dispute`. Those old keys are frozen (no new code writes their openings; only while a
deploy replaces the old code can both run), so reading them before the transaction decides for
good. Without `DisputeBooks` (tools that only read which keys a delivery would touch) the
ledger is taken as holding nothing of the payment.

A chargeback filed after a mediation the seller won is a second claim: the mediation's release
is booked with a note (`RELEASED`), and a payment `charged_back` whose `{id}:dispute` was
settled by such a release opens its chargeback under `{id}:chargeback` (a payment is charged
back once), withdrawn for what the payment still had, with its own verdict. A release nobody
read (the payment was already `charged_back` when umavez read it) looks, on the payment, like
the mediation escalating: one dispute, as the merchant reading the payment sees it.

Not seen, so not booked: a mediation opened and released between two reads of the payment (the
payment says nothing of it once `approved` again; Mercado Pago's claims API would).

The payment is stamped at `date_approved`, the moment it was approved, which may come after
`date_created` (a payment created pending, approved later). An approved payment that arrives
without a usable one (null, empty, not a moment) is stamped at `date_created`, which its
approval cannot precede, so it still orders before its own refunds and disputes; the entry says
so (`note`). Without either date it is refused, naming both.
"""

from __future__ import annotations

from pydantic import ValidationError

from functions.mercadopago.entries import (
    AMOUNT_FIELD,
    Dispute,
    Entries,
    approval_stamp,
    dispute_closed,
    dispute_opened,
    dispute_ref,
    held_by_dispute,
    order_of,
    refund_effects,
)
from functions.mercadopago.models import (
    DISPUTED,
    HOLD_RELEASED,
    MONEY_RECEIVED,
    PROVIDER,
    DisputeBooks,
    Notification,
    Payment,
    PaymentSource,
    dispute_refs,
    epoch,
    nothing_booked,
)
from functions.mercadopago.orders import TOPIC as ORDERS_TOPIC
from functions.mercadopago.orders import OrderSource, order_effects
from functions.shared.domain import Delivery, Interpretation, NoEffect, Transition
from functions.shared.money import to_minor
from functions.shared.provider_fields import refused


class Interpreter:
    def __init__(
        self,
        payments: PaymentSource,
        disputes: DisputeBooks = nothing_booked,
        orders: OrderSource | None = None,
    ) -> None:
        self._payments = payments
        self._disputes = disputes
        self._orders = orders

    def __call__(self, raw_body: str) -> tuple[Interpretation, ...]:
        try:
            notification = Notification.model_validate_json(raw_body)
        except ValidationError as exc:
            raise refused(exc, what="not a Mercado Pago notification") from exc
        event_type = notification.action or notification.type or "unknown"
        received = Delivery(
            PROVIDER,
            notification.event_id,
            event_type,
            epoch(notification.date_created, "date_created") if notification.date_created else 0,
        )
        topic = notification.type or event_type.split(".")[0]
        if topic == ORDERS_TOPIC and self._orders is not None:
            order = self._orders(str(notification.data.id))
            found = order_effects(order, received, epoch)
            return tuple(found) or (NoEffect(received, f"order is {order.get('status')!r}"),)
        if topic != "payment":
            return (NoEffect(received, f"topic {topic!r} moves no money"),)
        try:
            payment = Payment.model_validate(self._payments(str(notification.data.id)))
        except ValidationError as exc:
            raise refused(exc, "payment") from exc
        effects = self._effects(payment, received)
        return tuple(effects) or (NoEffect(received, f"payment is {payment.status!r}"),)

    def _effects(self, payment: Payment, received: Delivery) -> list[Interpretation]:
        entries = Entries(payment, received, order_of(payment))
        # Read strictly even when no entry needs it: a payment is money or it is refused
        amount = to_minor(payment.transaction_amount, payment.currency_id, AMOUNT_FIELD)
        effects: list[Interpretation] = []
        if payment.status in MONEY_RECEIVED:
            approved_at, note = approval_stamp(payment)
            effects.append(
                entries.effect(Transition.PAID, str(payment.id), amount, approved_at, note=note)
            )
        refunds, lost_to_claim = refund_effects(entries)
        effects.extend(refunds)
        if payment.status in DISPUTED | HOLD_RELEASED:
            effects.extend(self._dispute(entries, amount, lost_to_claim))
        return effects

    def _dispute(self, entries: Entries, amount: int, lost_to_claim: int) -> list[Interpretation]:
        """One dispute per payment, whatever its stages: booked under the ref its ledger holds,
        for what its opening withdrew once it counted (see the module's doc)."""
        payment = entries.payment
        booked = self._disputes(entries.order_id, str(payment.id), dispute_refs(str(payment.id)))
        ref = dispute_ref(str(payment.id), booked, payment.status)
        withdrew = booked[ref].minor if ref in booked else None
        dispute = Dispute(
            ref,
            held=held_by_dispute(payment, amount) if withdrew is None else withdrew,
            withdrew=withdrew,
            updated=epoch(payment.date_last_updated, "payment.date_last_updated"),
        )
        if payment.status in DISPUTED:
            return dispute_opened(entries, dispute)
        return dispute_closed(entries, dispute, lost_to_claim)
