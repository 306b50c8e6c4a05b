"""Provider payloads mangled the way integrations and provider bugs mangle them, from the
captured shapes in fixtures/events, seeded: the same seed gives the same cases.

Each case is one delivery with ids of its own (its order, its payment, its event). A pristine
case is the shape as captured and must apply; a mutated one has one to three fields set to a
value of the wrong type, an absurd magnitude, zero, a currency that is none (or in another
case), an order id no order can have, an unusable timestamp, deep nesting, or the field
removed. A mutated Stripe case is sometimes followed by a pristine companion: a second payment
of the same order, in the currency the mangled one names (canonically), or in reais when that
names none. Whatever the mangled one did to the order must not make its companion fail.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from fixtures.shapes import shape

Path = tuple[str | int, ...]
# A value for a field, given the case's own order id (so a valid one stays the case's own).
Value = Callable[[str], object]

_REMOVED: Final = object()


def _deep(levels: int) -> object:
    nested: object = 5000
    for _ in range(levels):
        nested = [nested]
    return nested


def _constant(value: object) -> Value:
    return lambda _order: value


AMOUNTS: Final[Sequence[Value]] = [
    _constant(v)
    for v in (
        *("20.00", "20", "5000", "", "NaN", "abc", "1e3", "19.99", " 20"),
        *(True, False, None, [], {}, _REMOVED, _deep(300)),
        *(20.0, 20.5, 19.999, 5000.0, 1e-7, 1e300),
        *(2**63, 2**53, 10**15, 10**39, 10**12, 0, -1, -2000, 1),
    )
]
CURRENCIES: Final[Sequence[Value]] = [
    _constant(v)
    for v in (
        *("xxx", "XXX", "xts", "XAU", "USD", "Usd", "usd", "BRL", "brl", "jpy", "KWD", "clf"),
        *("", "us", "usdd", "eur ", "\x00sd", "hrk", None, 1, True, _REMOVED),
    )
]
ORDER_IDS: Final[Sequence[Value]] = [
    *(_constant(v) for v in ("", "   ", "ord\x00x", "ord\x1fx", "x" * 2000, "ORDER#x", None)),
    *(_constant(v) for v in (123, True, [], _REMOVED, "\u0085", "\ud800")),
    lambda order: f" {order}",
    lambda order: f"{order}\n",
    lambda order: f"ORDER#{order}",
    lambda order: f"PO#{order}",
    lambda order: order.upper(),
    lambda order: order + "x" * 480,
]
STRIPE_TIMES: Final[Sequence[Value]] = [
    _constant(v)
    for v in (0, -1, "1764460800", True, 2**63, 10**10, 1.5e9, None, _REMOVED, 1_764_460_801)
]
ISO_DATES: Final[Sequence[Value]] = [
    _constant(v)
    for v in (
        *(None, "", "yesterday", "2026-11-29", "2026-11-29T18:00:01", "29/11/2026", 12345, True),
        *("2026-11-29T18:00:01.000-04:00", "0001-01-01T00:00:00+14:00", _REMOVED),
    )
]
# The currencies among CURRENCIES that are ISO 4217 codes with a minor unit (in any case)
ISO_4217_SAMPLE: Final = frozenset({"usd", "brl", "jpy", "kwd", "clf"})
ASAAS_DATES: Final[Sequence[Value]] = [
    _constant(v)
    for v in ("", "29/11/2026", None, "2026-11-29 18:00:05", "2026-11-29T18:00:05", _REMOVED, 7)
]


@dataclass(frozen=True)
class Template:
    """A captured shape and where its money, currency, order id and timestamps are."""

    provider: str
    name: str
    amounts: tuple[Path, ...]
    currencies: tuple[Path, ...]
    order_ids: tuple[Path, ...]
    times: tuple[Path, ...]
    prepare: Callable[[dict[str, Any], str, Callable[[str], str]], None]


@dataclass(frozen=True)
class Case:
    provider: str
    template: str
    order: str
    body: str
    # Mercado Pago and Asaas: the payment its API answers for the webhook (keyed by its id)
    payment: tuple[str, dict[str, Any]] | None = None
    mutations: tuple[str, ...] = field(default_factory=tuple)

    @property
    def pristine(self) -> bool:
        return not self.mutations


def _stripe(name: str, **ids: Path) -> Callable[[dict[str, Any], str, Callable[[str], str]], None]:
    """Fresh ids for the event and its objects, and the case's order where the shape keeps it."""

    def prepare(event: dict[str, Any], order: str, fresh: Callable[[str], str]) -> None:
        event["id"] = fresh("evt")
        obj = event["data"]["object"]
        for prefix, path in ids.items():
            _set(obj, path, fresh(prefix))
        obj["metadata"] = {"order_id": order}
        if name.startswith("checkout"):
            obj.update({"client_reference_id": order, "invoice": None, "subscription": None})
        if name.startswith("invoice"):
            obj.update({"subscription": None, "subscription_details": None})

    return prepare


def _mercadopago(event: dict[str, Any], order: str, fresh: Callable[[str], str]) -> None:
    event.update({"id": int(fresh("")), "external_reference": order, "metadata": {}})
    for refund in event.get("refunds", []):
        refund["id"] = int(fresh(""))


def _asaas(event: dict[str, Any], order: str, fresh: Callable[[str], str]) -> None:
    event["id"] = fresh("evt")
    event["payment"].update({"id": fresh("pay"), "externalReference": order})


TEMPLATES: Final[Sequence[Template]] = [
    Template(
        "stripe",
        "payment_intent.succeeded",
        (("data", "object", "amount_received"),),
        (("data", "object", "currency"),),
        (("data", "object", "metadata", "order_id"),),
        (("created",),),
        _stripe("payment_intent.succeeded", pi=("id",), ch=("latest_charge",)),
    ),
    Template(
        "stripe",
        "charge.succeeded",
        (("data", "object", "amount"), ("data", "object", "amount_captured")),
        (("data", "object", "currency"),),
        (("data", "object", "metadata", "order_id"),),
        (("created",),),
        _stripe("charge.succeeded", ch=("id",), pi=("payment_intent",)),
    ),
    Template(
        "stripe",
        "refund.created",
        (("data", "object", "amount"),),
        (("data", "object", "currency"),),
        (("data", "object", "metadata", "order_id"),),
        (("created",), ("data", "object", "created")),
        _stripe("refund.created", re=("id",), pi=("payment_intent",), ch=("charge",)),
    ),
    Template(
        "stripe",
        "charge.dispute.created",
        (("data", "object", "amount"),),
        (("data", "object", "currency"),),
        (("data", "object", "metadata", "order_id"),),
        (("created",), ("data", "object", "created")),
        _stripe("charge.dispute.created", du=("id",), pi=("payment_intent",), ch=("charge",)),
    ),
    Template(
        "stripe",
        "invoice.payment_succeeded.2024-06-20",
        (("data", "object", "amount_paid"),),
        (("data", "object", "currency"),),
        (("data", "object", "metadata", "order_id"),),
        (("created",),),
        _stripe("invoice", **{"in": ("id",)}, pi=("payment_intent",), ch=("charge",)),
    ),
    Template(
        "stripe",
        "checkout.session.completed.card",
        (("data", "object", "amount_total"),),
        (("data", "object", "currency"),),
        (("data", "object", "metadata", "order_id"), ("data", "object", "client_reference_id")),
        (("created",),),
        _stripe("checkout", cs=("id",), pi=("payment_intent",)),
    ),
    Template(
        "mercadopago",
        "payment",
        (("transaction_amount",),),
        (("currency_id",),),
        (("external_reference",), ("metadata", "order_id")),
        (("date_approved",), ("date_created",), ("date_last_updated",)),
        _mercadopago,
    ),
    Template(
        "mercadopago",
        "payment.refunded",
        (("transaction_amount",), ("refunds", 0, "amount"), ("refunds", 1, "amount")),
        (("currency_id",),),
        (("external_reference",),),
        (("date_approved",), ("refunds", 0, "date_created")),
        _mercadopago,
    ),
    Template(
        "mercadopago",
        "payment.charged_back_settled",
        (("transaction_amount",),),
        (("currency_id",),),
        (("external_reference",),),
        (("date_approved",), ("date_last_updated",)),
        _mercadopago,
    ),
    Template(
        "mercadopago",
        "payment.clp",
        (("transaction_amount",),),
        (("currency_id",),),
        (("external_reference",),),
        (("date_approved",),),
        _mercadopago,
    ),
    Template(
        "asaas",
        "PAYMENT_RECEIVED",
        (("payment", "value"),),
        (),
        (("payment", "externalReference"),),
        (("dateCreated",),),
        _asaas,
    ),
    Template(
        "asaas",
        "PAYMENT_REFUNDED",
        (("payment", "value"), ("payment", "refunds", 0, "value")),
        (),
        (("payment", "externalReference"),),
        (("dateCreated",), ("payment", "refunds", 0, "dateCreated")),
        _asaas,
    ),
    Template(
        "asaas",
        "PAYMENT_CHARGEBACK_REQUESTED",
        (("payment", "value"),),
        (),
        (("payment", "externalReference"),),
        (("dateCreated",),),
        _asaas,
    ),
]


class Mutator:
    """Seeded cases: about a quarter pristine, the rest with one to three mangled fields."""

    def __init__(self, seed: int, pristine_share: float = 0.25) -> None:
        self._random = random.Random(seed)
        self._pristine_share = pristine_share
        self._serial = 0

    def _fresh(self, prefix: str) -> str:
        self._serial += 1
        # Mercado Pago ids are numbers; the others are prefixed words
        return f"{prefix}_fz{self._serial:09d}" if prefix else str(7_200_000_000 + self._serial)

    def cases(self, count: int) -> list[Case]:
        made: list[Case] = []
        while len(made) < count:
            made += self._case_and_companion()
        return made[:count]

    def _case_and_companion(self) -> list[Case]:
        template = self._random.choice(TEMPLATES)
        event = shape(f"{template.provider}/{template.name}.json")
        order = self._fresh("ord")
        template.prepare(event, order, self._fresh)
        mutations: list[str] = []
        if self._random.random() >= self._pristine_share:
            for _ in range(self._random.randint(1, 3)):
                mutations.append(self._mutate(template, event, order))
        if template.provider == "asaas":
            # Asaas's API answers the payment as the (mangled) webhook carries it.
            payment = event.get("payment")
            known = (str(payment["id"]), payment) if isinstance(payment, dict) else None
            return [Case("asaas", template.name, order, _dumps(event), known, (*mutations,))]
        if template.provider != "mercadopago":
            case = Case(template.provider, template.name, order, _dumps(event), None, (*mutations,))
            if template.provider == "stripe" and mutations and self._random.random() < 0.3:
                currency = event.get("data", {}).get("object", {}).get("currency")
                return [case, self._companion(order, currency)]
            return [case]
        payment_id = str(event.get("id", self._fresh("")))
        notification = shape("mercadopago/payment.updated.json")
        notification.update({"id": int(self._fresh("")), "data": {"id": payment_id}})
        return [
            Case(
                "mercadopago",
                template.name,
                order,
                json.dumps(notification),
                (payment_id, event),
                (*mutations,),
            )
        ]

    def _companion(self, order: str, currency: object) -> Case:
        """A pristine second payment of `order` in the canonical form of `currency` when it is
        a currency ("USD" -> "usd"), else in reais."""
        event = shape("stripe/payment_intent.succeeded.json")
        TEMPLATES[0].prepare(event, order, self._fresh)
        code = currency.lower() if isinstance(currency, str) else ""
        event["data"]["object"]["currency"] = code if code in ISO_4217_SAMPLE else "brl"
        return Case("stripe", "payment_intent.succeeded (companion)", order, _dumps(event))

    def _mutate(self, template: Template, event: dict[str, Any], order: str) -> str:
        kinds: list[tuple[tuple[Path, ...], Sequence[Value]]] = [
            (template.amounts, AMOUNTS),
            (template.currencies, CURRENCIES),
            (template.order_ids, ORDER_IDS),
            (template.times, STRIPE_TIMES if template.provider == "stripe" else ISO_DATES),
        ]
        if template.provider == "asaas":
            kinds[3] = (template.times, ASAAS_DATES)
        paths, values = self._random.choice([kind for kind in kinds if kind[0]])
        path = self._random.choice(paths)
        value = self._random.choice(values)(order)
        _set(event, path, value)
        shown = "removed" if value is _REMOVED else repr(value)[:40]
        return f"{'.'.join(map(str, path))} = {shown}"


def _set(document: Any, path: Path, value: object) -> None:
    *parents, last = path
    for part in parents:
        document = document[part]
    if value is _REMOVED:
        if isinstance(document, dict):
            document.pop(last, None)
        return
    document[last] = value


def _dumps(document: dict[str, Any]) -> str:
    # Deep nesting is sent as it would arrive; the encoder's own recursion is not the test's
    return json.dumps(document, check_circular=False)
