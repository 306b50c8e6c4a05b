"""The words of every notification, in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from functions.shared.outbox import OutboxItem


@dataclass(frozen=True)
class Template:
    subject: str
    body: str


TEMPLATES: Final[dict[str, Template]] = {
    "order.paid": Template(
        subject="Payment received for order {order_id}",
        body="We received your payment of {money} for order {order_id}. Thank you!",
    ),
    "order.refunded": Template(
        subject="Refund issued for order {order_id}",
        body="A refund of {money} was issued for order {order_id}.",
    ),
    "order.disputed": Template(
        subject="Payment disputed for order {order_id}",
        body="A dispute of {money} was opened on order {order_id}. We will be in touch.",
    ),
}
FOOTER: Final = "\n\nReference: {key}"


def money(amount: int, currency: str) -> str:
    return f"{currency.upper()} {amount // 100}.{amount % 100:02d}"


def render(item: OutboxItem) -> Template:
    """Subject and body of `item`; the body ends with the key that lets a reader spot a resend."""
    template = TEMPLATES[item.transition]
    values = {"order_id": item.order_id, "money": money(item.amount, item.currency)}
    return Template(
        subject=template.subject.format(**values),
        body=template.body.format(**values) + FOOTER.format(key=item.idempotency_key),
    )
