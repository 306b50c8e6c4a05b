"""The words of every notification, and which ones e-mail the customer, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from functions.shared.domain import Transition
from functions.shared.money import render as render_money
from functions.shared.outbox import OutboxItem


@dataclass(frozen=True)
class Template:
    subject: str
    body: str


TEMPLATES: Final[dict[str, Template]] = {
    Transition.PAID: Template(
        subject="Payment received for order {order_id}",
        body="We received your payment of {money} for order {order_id}. Thank you!",
    ),
    Transition.PAYMENT_REVERSED: Template(
        subject="Payment reversed for order {order_id}",
        body="A payment of {money} recorded for order {order_id} was reversed.",
    ),
    Transition.REFUNDED: Template(
        subject="Refund issued for order {order_id}",
        body="A refund of {money} was issued for order {order_id}.",
    ),
    Transition.REFUND_REVERSED: Template(
        subject="Refund failed for order {order_id}",
        body="The refund of {money} for order {order_id} could not be completed and was "
        "returned to the merchant. We will be in touch.",
    ),
    Transition.INQUIRY_OPENED: Template(
        subject="Inquiry opened on order {order_id}",
        body="Your bank asked about a payment of {money} for order {order_id}.",
    ),
    Transition.INQUIRY_CLOSED: Template(
        subject="Inquiry closed on order {order_id}",
        body="The inquiry about {money} for order {order_id} was closed.",
    ),
    Transition.DISPUTED: Template(
        subject="Payment disputed for order {order_id}",
        body="A dispute of {money} was opened on order {order_id}. We will be in touch.",
    ),
    Transition.DISPUTE_WON: Template(
        subject="Dispute closed for order {order_id}",
        body="The dispute of {money} on order {order_id} was decided in the merchant's favour.",
    ),
    Transition.DISPUTE_LOST: Template(
        subject="Dispute closed for order {order_id}",
        body="The dispute of {money} on order {order_id} was decided in your favour.",
    ),
    Transition.DISPUTE_REFUNDED: Template(
        subject="Dispute closed for order {order_id}",
        body="The dispute of {money} on order {order_id} was closed by a refund to you.",
    ),
    Transition.FUNDS_REINSTATED: Template(
        subject="Dispute settled for order {order_id}",
        body="{money} of the dispute on order {order_id}, already refunded to you before it"
        " was opened, went back to the merchant.",
    ),
}
STATUS_LINE: Final = "\n\nOrder status: {status}"
FOOTER: Final = "\n\nReference: {key}"

# E-mail policy. Inquiries are a question between the bank and the merchant, not money moved:
# EventBridge only. A movement superseded within its payment (older than a movement of the same
# payment already counted) is e-mailed only when it is news about the customer's own money
# that no newer e-mail already told: a refund or a refund's failure. A superseded payment or
# dispute step would contradict what the customer was already told (e.g. "payment received"
# after "refund issued"); one late only against another payment of the order (a deposit
# processed after its balance) contradicts nothing and is e-mailed. EventBridge gets them all.
NEVER_EMAILED: Final = frozenset(
    {
        Transition.INQUIRY_OPENED,
        Transition.INQUIRY_CLOSED,
        # Between the provider and the merchant: the customer was told the dispute's verdict.
        Transition.FUNDS_REINSTATED,
    }
)
EMAILED_WHEN_LATE: Final = frozenset({Transition.REFUNDED, Transition.REFUND_REVERSED})


def emails_customer(item: OutboxItem) -> bool:
    transition = Transition(item.transition)
    if transition in NEVER_EMAILED:
        return False
    superseded = item.late if item.superseded is None else item.superseded
    return not superseded or transition in EMAILED_WHEN_LATE


def render(item: OutboxItem) -> Template:
    """Subject and body of `item`; the body ends with the key that lets a reader spot a resend."""
    template = TEMPLATES[item.transition]
    values = {"order_id": item.order_id, "money": render_money(item.amount, item.currency)}
    status = item.financial_status
    return Template(
        subject=template.subject.format(**values),
        body=template.body.format(**values)
        + (STATUS_LINE.format(status=status.replace("_", " ")) if status else "")
        + FOOTER.format(key=item.idempotency_key),
    )
