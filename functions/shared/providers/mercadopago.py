"""Mercado Pago: the notification is thin and carries no status, so the payment is fetched (an
order of the Orders API, topic `order`, is read as `mercadopago_orders` says).

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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.domain import (
    Delivery,
    Effect,
    Interpretation,
    NoEffect,
    Transition,
    checked_order_id,
    movement,
)
from functions.shared.money import InvalidFieldError, to_minor
from functions.shared.provider_fields import MAX_EPOCH_SECONDS, Currency, DecimalAmount, refused
from functions.shared.providers.mercadopago_orders import TOPIC as ORDERS_TOPIC
from functions.shared.providers.mercadopago_orders import OrderSource, order_effects

PROVIDER: Final = "mercadopago"
MONEY_RECEIVED: Final = frozenset({"approved", "refunded", "charged_back", "in_mediation"})
DISPUTED: Final = frozenset({"charged_back", "in_mediation"})
HOLD_RELEASED: Final = frozenset({"approved", "refunded"})
REFUND_MOVED_MONEY: Final = "approved"
BUYER_PROTECTION: Final = "bpp"  # refunds[].source.type of a claim resolved for the buyer
# The note on a mediation's release (`order.dispute_won` from a payment approved again): what
# tells it, in the ledger, from a chargeback Mercado Pago reimbursed.
RELEASED: Final = "the mediation's hold released: the payment is approved again"
CLOSED_BY_REFUND: Final = "the mediation closed by the seller's refund"
CHARGEBACK_VERDICTS: Final[Mapping[str, Transition]] = {
    "settled": Transition.DISPUTE_LOST,
    "reimbursed": Transition.DISPUTE_WON,
}

PaymentSource = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True)
class BookedDispute:
    """A dispute opening of the payment that the ledger counted: what it withdrew, in minor
    units, and whether its verdict counted too."""

    minor: int
    settled: bool
    # Settled by a mediation's release (the payment approved again), not by a chargeback's
    # verdict: a chargeback filed afterwards is another claim.
    released: bool = False


# What the ledger holds of a payment's disputes: given the order the payment names (None: the
# ledger finds it through the payment's binding), the payment id and the dispute refs to look
# at, the refs whose opening counted. A dependency, so the map stays a function of what it reads.
DisputeBooks = Callable[[str | None, str, tuple[str, ...]], Mapping[str, BookedDispute]]


def nothing_booked(
    order_id: str | None, payment_id: str, refs: tuple[str, ...]
) -> Mapping[str, BookedDispute]:
    return {}


def dispute_refs(payment_id: str) -> tuple[str, str, str]:
    """The payment's dispute, then the keys a mediation and a chargeback had before (see the
    module's doc)."""
    return f"{payment_id}:dispute", f"{payment_id}:mediation", f"{payment_id}:chargeback"


class _MercadoPagoModel(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class NotificationData(_MercadoPagoModel):
    id: str | int
    version: int | str | None = None


class Notification(_MercadoPagoModel):
    # Docs and captured payloads disagree on the types of id/user_id: accept both. An order's
    # notification may carry no id of its own (see `event_id`).
    id: str | int | None = None
    type: str | None = None
    action: str | None = None
    date_created: str | None = None
    data: NotificationData

    @property
    def event_id(self) -> str:
        """Its own id, else the resource and the update it announces: an order's
        notification names its order's `data.version`, which each change increments."""
        if self.id is not None and self.id != "":
            return str(self.id)
        return f"{self.data.id}:{self.data.version or self.action or self.type}"


class RefundSource(_MercadoPagoModel):
    type: str | None = None


class Refund(_MercadoPagoModel):
    id: str | int
    amount: DecimalAmount
    date_created: str
    status: str | None = None
    source: RefundSource | None = None

    @property
    def by_buyer_protection(self) -> bool:
        """Given back by Mercado Pago's buyer protection resolving a claim for the buyer, from
        the seller's money: the claim's loss, not a refund the seller gave."""
        return self.source is not None and self.source.type == BUYER_PROTECTION


class Payer(_MercadoPagoModel):
    email: str | None = None


class Payment(_MercadoPagoModel):
    id: str | int
    status: str
    status_detail: str | None = None
    currency_id: Currency
    transaction_amount: DecimalAmount
    transaction_amount_refunded: DecimalAmount | None = None
    # Read as sent: an unusable one is not a malformed payment (see the module's doc)
    date_approved: Any = None
    date_created: str | None = None
    date_last_updated: str
    external_reference: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    refunds: list[Refund] = Field(default_factory=list)
    payer: Payer | None = None


def _moment(stamp: object) -> int | None:
    """Epoch seconds of an ISO 8601 moment with its offset, or None. A stamp without an offset
    is no moment: it would be read in whatever zone the machine runs in."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    seconds = int(moment.timestamp())
    return seconds if 0 < seconds < MAX_EPOCH_SECONDS else None


def _epoch(stamp: object, field: str) -> int:
    seconds = _moment(stamp)
    if seconds is None:
        shown = repr(stamp) if len(repr(stamp)) <= 40 else f"{repr(stamp)[:37]}..."
        raise InvalidFieldError(field, f"{shown} is not an ISO 8601 moment with its offset")
    return seconds


def _approved_at(payment: Payment) -> tuple[int, str | None]:
    """The payment's stamp in epoch seconds, and a note when it is not the approval's own (see
    the module's doc)."""
    approved = _moment(payment.date_approved)
    if approved is not None:
        return approved, None
    if payment.date_approved is None:
        why = "null"
    elif payment.date_approved == "":
        why = "empty"
    else:
        why = "not an ISO 8601 moment with its offset"
    created = _moment(payment.date_created)
    if created is None:
        raise InvalidFieldError(
            "payment.date_created",
            f"the payment is {payment.status} but date_approved is {why}, and date_created "
            "is no moment either",
        )
    return created, f"stamped at date_created: date_approved is {why}"


def _order_of(payment: Payment) -> str | None:
    """`external_reference`, else `metadata.order_id`. Metadata keeps the JSON type it was
    created with, so a numeric order id is read as its digits; any other type is refused."""
    order_id = checked_order_id(payment.external_reference, "payment.external_reference")
    if order_id is not None:
        return order_id
    in_metadata = payment.metadata.get("order_id")
    if isinstance(in_metadata, int) and not isinstance(in_metadata, bool):
        in_metadata = str(in_metadata)
    return checked_order_id(in_metadata, "payment.metadata.order_id")


def _held(payment: Payment, amount: int) -> int:
    """What a dispute opened now would hold: what the payment still has after its refunds."""
    currency = payment.currency_id
    if payment.transaction_amount_refunded is not None:
        refunded = to_minor(
            payment.transaction_amount_refunded, currency, "payment.transaction_amount_refunded"
        )
    else:
        refunded = sum(
            to_minor(refund.amount, currency, f"payment.refunds.{n}.amount")
            for n, refund in enumerate(payment.refunds)
            if refund.status == REFUND_MOVED_MONEY
        )
    # Refunds past the amount (a buyer's financing interest returned with it) leave nothing:
    # no dispute holds it, and the payment and its refunds still count as they are.
    return max(amount - refunded, 0)


def _dispute_ref(payment_id: str, booked: Mapping[str, BookedDispute], status: str) -> str:
    """The ref the payment's dispute is booked under (see the module's doc)."""
    dispute, mediation, chargeback = dispute_refs(payment_id)
    if chargeback in booked:
        return chargeback
    if mediation in booked and not booked[mediation].settled:
        return mediation
    if status == "charged_back" and dispute in booked and booked[dispute].released:
        return chargeback  # filed after the mediation the seller won: a second claim
    return dispute


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
            _epoch(notification.date_created, "date_created") if notification.date_created else 0,
        )
        topic = notification.type or event_type.split(".")[0]
        if topic == ORDERS_TOPIC and self._orders is not None:
            order = self._orders(str(notification.data.id))
            found = order_effects(order, received, _epoch)
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
        entries = _Entries(payment, received, _order_of(payment))
        # Read strictly even when no entry needs it: a payment is money or it is refused
        amount = to_minor(payment.transaction_amount, payment.currency_id, _AMOUNT_FIELD)
        effects: list[Interpretation] = []
        if payment.status in MONEY_RECEIVED:
            approved_at, note = _approved_at(payment)
            effects.append(
                entries.effect(Transition.PAID, str(payment.id), amount, approved_at, note=note)
            )
        refunds, lost_to_claim = _refunds(entries)
        effects.extend(refunds)
        if payment.status in DISPUTED | HOLD_RELEASED:
            effects.extend(self._dispute(entries, amount, lost_to_claim))
        return effects

    def _dispute(self, entries: _Entries, amount: int, lost_to_claim: int) -> list[Interpretation]:
        """One dispute per payment, whatever its stages: booked under the ref its ledger holds,
        for what its opening withdrew once it counted (see the module's doc)."""
        payment = entries.payment
        booked = self._disputes(entries.order_id, str(payment.id), dispute_refs(str(payment.id)))
        ref = _dispute_ref(str(payment.id), booked, payment.status)
        withdrew = booked[ref].minor if ref in booked else None
        dispute = _Dispute(
            ref,
            held=_held(payment, amount) if withdrew is None else withdrew,
            withdrew=withdrew,
            updated=_epoch(payment.date_last_updated, "payment.date_last_updated"),
        )
        if payment.status in DISPUTED:
            return _dispute_opened(entries, dispute)
        return _dispute_closed(entries, dispute, lost_to_claim)


_AMOUNT_FIELD: Final = "payment.transaction_amount"


@dataclass(frozen=True)
class _Entries:
    """Makes the entries of one payment as one delivery read it: each names the payment, its
    order and its payer, in the payment's currency."""

    payment: Payment
    received: Delivery
    order_id: str | None

    def effect(
        self,
        transition: Transition,
        ref: str,
        minor: int,
        at: int,
        field: str = _AMOUNT_FIELD,
        *,
        only_if_open: bool = False,
        note: str | None = None,
    ) -> Effect:
        payment = self.payment
        return Effect(
            delivery=Delivery(PROVIDER, self.received.event_id, self.received.event_type, at),
            transition=transition,
            external_ref=ref,
            amount=movement(minor, payment.currency_id, field, _WHAT[transition]),
            order_id=self.order_id,
            order_lookup=(str(payment.id),),
            recipient=payment.payer.email if payment.payer else None,
            payment=str(payment.id),
            only_if_open=only_if_open,
            note=note,
        )


@dataclass(frozen=True)
class _Dispute:
    """The payment's dispute as its entries book it, each stamped at the payment's last update."""

    ref: str
    # What its opening withdrew once that counted, else what the payment still has
    held: int
    withdrew: int | None  # None: no opening of it counted yet
    updated: int


def _refunds(entries: _Entries) -> tuple[list[Interpretation], int]:
    """An entry per refund that moved money, and what buyer protection gave back: the claim's
    loss, not a refund (see the module's doc)."""
    currency = entries.payment.currency_id
    refunds: list[Interpretation] = []
    lost_to_claim = 0
    for n, refund in enumerate(entries.payment.refunds):
        at = f"payment.refunds.{n}"
        minor = to_minor(refund.amount, currency, f"{at}.amount")
        if refund.status != REFUND_MOVED_MONEY:
            continue
        if refund.by_buyer_protection:
            lost_to_claim += minor
            continue
        refunded_at = _epoch(refund.date_created, f"{at}.date_created")
        ref = f"refund:{refund.id}"
        refunds.append(entries.effect(Transition.REFUNDED, ref, minor, refunded_at, f"{at}.amount"))
    return refunds, lost_to_claim


def _dispute_opened(entries: _Entries, dispute: _Dispute) -> list[Interpretation]:
    """A mediation or a chargeback: what it holds withdrawn, and a chargeback's verdict."""
    payment = entries.payment
    if not dispute.held:
        # Refunded in full (or past its amount) before the cardholder disputed it: nothing
        # is held. Said, not refused: refusing would fail every later notification of the
        # payment too, and its refunds and verdict with them.
        return [NoEffect(entries.received, f"payment {payment.id} disputed with nothing left")]
    ref, held, updated = dispute.ref, dispute.held, dispute.updated
    opened: list[Interpretation] = [entries.effect(Transition.DISPUTED, ref, held, updated)]
    verdict = CHARGEBACK_VERDICTS.get(payment.status_detail or "")
    if payment.status == "charged_back" and verdict is not None:
        opened.append(entries.effect(verdict, ref, held, updated))
    return opened


def _dispute_closed(
    entries: _Entries, dispute: _Dispute, lost_to_claim: int
) -> list[Interpretation]:
    """A payment approved or refunded again: its claim lost to buyer protection, its hold
    closed by the seller's refund, or released."""
    ref, held, updated = dispute.ref, dispute.held, dispute.updated
    if lost_to_claim:
        # The buyer won the claim: buyer protection refunded what it held, from the
        # seller's money. The dispute is lost (opened too, if no read saw it held), for what
        # its opening withdrew or, never read, what buyer protection gave back.
        lost = dispute.withdrew if dispute.withdrew is not None else lost_to_claim
        return [
            entries.effect(Transition.DISPUTED, ref, lost, updated),
            entries.effect(Transition.DISPUTE_LOST, ref, lost, updated),
        ]
    if held and entries.payment.status == "refunded":
        # Refunded by the seller while a mediation held it: the refund is its own entry; the
        # hold closes, neither won nor lost.
        return [
            entries.effect(
                Transition.DISPUTE_REFUNDED,
                ref,
                held,
                updated,
                only_if_open=True,
                note=CLOSED_BY_REFUND,
            )
        ]
    if held:
        # Approved again: a hold, if one is open, is released for the merchant. Nothing
        # left on a payment never disputed is nothing to release.
        return [
            entries.effect(
                Transition.DISPUTE_WON, ref, held, updated, only_if_open=True, note=RELEASED
            )
        ]
    return []


# What each entry's money is, for a reason that says what cannot be zero
_WHAT: Final[Mapping[Transition, str]] = {
    Transition.PAID: "payment",
    Transition.REFUNDED: "refund",
    Transition.DISPUTED: "dispute",
    Transition.DISPUTE_WON: "dispute",
    Transition.DISPUTE_LOST: "dispute",
    Transition.DISPUTE_REFUNDED: "dispute",
}
