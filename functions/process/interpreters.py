"""The providers by name: each one's adapter, turning its raw payload into what it means for our
orders."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from functions.asaas.events import Interpreter as AsaasInterpreter
from functions.asaas.models import PROVIDER as ASAAS
from functions.asaas.models import CashBooks, nothing_in_cash
from functions.asaas.models import PaymentSource as AsaasPayments
from functions.mercadopago.events import Interpreter as MercadoPagoInterpreter
from functions.mercadopago.models import PROVIDER as MERCADOPAGO
from functions.mercadopago.models import DisputeBooks, nothing_booked
from functions.mercadopago.models import PaymentSource as MercadoPagoPayments
from functions.mercadopago.orders import OrderSource
from functions.shared.domain import Interpretation
from functions.shared.errors import UnknownProviderError
from functions.stripe.events import Interpreter as StripeInterpreter
from functions.stripe.models import PROVIDER as STRIPE
from functions.stripe.models import RefundSource
from functions.stripe.thin import RelatedObjectSource

# One delivery can announce several effects (a Mercado Pago payment that was paid, then
# refunded twice); each is applied in its own transaction, in order.
Interpreter = Callable[[str], Sequence[Interpretation]]


class Interpreters:
    """Provider name -> interpreter, built once per cold start with what each one needs."""

    def __init__(self, by_provider: Mapping[str, Interpreter]) -> None:
        self._by_provider = by_provider

    def __call__(self, provider: str, raw_body: str) -> Sequence[Interpretation]:
        try:
            interpreter = self._by_provider[provider]
        except KeyError as exc:
            raise UnknownProviderError(f"no adapter for provider {provider!r}") from exc
        return interpreter(raw_body)

    @classmethod
    def build(
        cls,
        mercadopago_payments: MercadoPagoPayments | None = None,
        stripe_refunds: RefundSource | None = None,
        mercadopago_disputes: DisputeBooks = nothing_booked,
        asaas_payments: AsaasPayments | None = None,
        asaas_cash: CashBooks = nothing_in_cash,
        mercadopago_orders: OrderSource | None = None,
        stripe_related: RelatedObjectSource | None = None,
    ) -> Interpreters:
        """Mercado Pago needs its payments API, and what the ledger holds of a payment's
        dispute (the key it was booked under, what it withdrew); Asaas its payments API (its
        webhooks are trusted on a static token only), and what the ledger holds of a payment's
        cash receipts; Stripe reads a charge's refunds from its API when a legacy
        charge.refunded names none, and the object a thin event names. A provider whose API is
        not given has no adapter; Mercado Pago's orders are read only where its Orders API is
        given (an `order` notification is no effect elsewhere)."""
        by_provider: dict[str, Interpreter] = {
            STRIPE: StripeInterpreter(stripe_refunds, stripe_related)
        }
        if asaas_payments is not None:
            by_provider[ASAAS] = AsaasInterpreter(asaas_payments, asaas_cash)
        if mercadopago_payments is not None:
            by_provider[MERCADOPAGO] = MercadoPagoInterpreter(
                mercadopago_payments, mercadopago_disputes, mercadopago_orders
            )
        return cls(by_provider)
