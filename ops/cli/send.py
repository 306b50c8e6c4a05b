"""`umavez send`: sign and post one event file as its provider would, then follow it through
the ledger to its order."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE, TableNames
from ops.cli.common import DEFAULT_PORT, LOCAL_PROVIDER_APIS, add_endpoint_url, operations_client
from ops.cli.ledger import show_order

if TYPE_CHECKING:
    from ops.outcomes import Tracked
    from ops.send import PaymentToSend


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "send",
        help="sign and post one event file, as the provider would; then show its order",
        description="Signs and posts EVENT_FILE as the provider would, prints the HTTP status, "
        "waits until process has handled it and prints its order as `show order` does. "
        "Mercado Pago: EVENT_FILE is a payment as GET /v1/payments/{id} answers it; it is "
        "registered with the fake Mercado Pago API and its notification is sent "
        "(payment.created, or payment.updated if the fake knew the payment); an order of the "
        "Orders API likewise, notified on topic order. Stripe with --via eventbridge: put on "
        "the local stack's Stripe partner bus, as Stripe's EventBridge destination does; "
        "with --thin: EVENT_FILE is a snapshot event, its object is registered with the fake "
        "Stripe API and the thin event of the same change is sent instead. "
        "Exit status: 0 processed, 1 refused or not processed in time, 2 a bad file.",
    )
    parser.add_argument("event_file", type=Path)
    parser.add_argument("--provider", default="stripe", choices=["stripe", "mercadopago", "asaas"])
    parser.add_argument(
        "--url", default=None, help=f"default: http://127.0.0.1:{DEFAULT_PORT}/webhooks/PROVIDER"
    )
    parser.add_argument("--secret", default=None, help="default: the local development secret")
    parser.add_argument(
        "--via",
        default="webhook",
        choices=["webhook", "eventbridge"],
        help="Stripe: its webhook (default), or its EventBridge destination (the local bus "
        "at --endpoint-url)",
    )
    parser.add_argument(
        "--thin",
        action="store_true",
        help="Stripe: send the thin event of EVENT_FILE (a snapshot event), its object "
        "registered with the fake Stripe API",
    )
    parser.add_argument(
        "--api-url",
        default=LOCAL_PROVIDER_APIS,
        help="the fake provider APIs `serve` runs (default: %(default)s)",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=30,
        help="seconds to wait for processing (default: %(default)s; 0: post only)",
    )
    # By physical names only: `send` posts to the local front (or --url), whatever it reads.
    add_endpoint_url(
        parser, "the deployed tables (with --ledger-table, --outbox-table)", by_name=False
    )
    parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    parser.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    parser.set_defaults(run=send)


def send(args: argparse.Namespace) -> int:
    from ops import send as send_module
    from ops.local import DEVELOPMENT_SECRETS, DeliveryLog, Post, Providers
    from ops.send import EventFileError

    if args.via == "eventbridge" and args.provider != "stripe":
        print("--via eventbridge is Stripe's: nothing sent", file=sys.stderr)
        return 2
    if args.thin and args.provider != "stripe":
        print("--thin is Stripe's: nothing sent", file=sys.stderr)
        return 2
    try:
        body, payment = _event_to_send(args)
        thin_object = None
        if args.thin:
            body, thin_object = send_module.read_stripe_thin(body)
        asaas_payment = send_module.read_asaas(body) if args.provider == "asaas" else None
    except EventFileError as exc:
        print(f"{args.event_file}: {exc}; nothing sent", file=sys.stderr)
        return 2
    secret = args.secret or DEVELOPMENT_SECRETS[args.provider]
    base = args.url.rsplit("/webhooks/", 1)[0] if args.url else f"http://127.0.0.1:{DEFAULT_PORT}"
    query = {}
    if args.provider == "mercadopago":
        notified = json.loads(body)
        query = {"data.id": str(notified["data"]["id"]), "type": str(notified.get("type"))}
    try:
        if thin_object is not None:
            # Before its outcome is tracked: reading the thin event reads its object.
            _register_stripe_object(args, *thin_object)
        resource = payment.resource if payment else asaas_payment
        outcomes = _Outcomes(args, resource) if args.wait else None
        tracked = outcomes.track(body) if outcomes else None
        if payment is not None:
            body = _register_mercadopago_payment(args, payment)
        if asaas_payment is not None:
            _register_asaas_payment(args, asaas_payment)
    except _NotSentError as exc:
        print(f"{exc}; nothing sent", file=sys.stderr)
        return 1
    if args.via == "eventbridge":
        return _put_on_the_bus(args, body, outcomes, tracked)
    log = DeliveryLog()
    providers = Providers(base, {args.provider: secret}, log)
    statuses = providers.deliver(Post(args.provider, body, query))
    answers = " -> ".join(str(status or "timeout") for status in statuses)
    print(f"{args.provider} {args.event_file.name}: HTTP {answers}")
    if statuses[-1] != 200:
        return 1
    if log.ignored_event_ids:
        print("acknowledged and not enqueued: the event's mode is not the stack's (ignored)")
        return 0
    if outcomes is None or tracked is None:
        return 0
    return outcomes.report(tracked)


def _put_on_the_bus(
    args: argparse.Namespace, body: str, outcomes: _Outcomes | None, tracked: list[Tracked] | None
) -> int:
    """The event put on the local Stripe partner bus, whose rule takes it to the webhook
    queue as Stripe's EventBridge destination would; then its order, as for a webhook."""
    from botocore.exceptions import BotoCoreError, ClientError

    from ops.local import put_stripe_event

    try:
        entry = put_stripe_event(args.endpoint_url, body)
    except (BotoCoreError, ClientError, RuntimeError) as exc:
        print(f"{exc}; nothing sent", file=sys.stderr)
        return 1
    print(f"stripe {args.event_file.name}: put on the local Stripe partner bus (entry {entry})")
    if outcomes is None or tracked is None:
        return 0
    return outcomes.report(tracked)


class _NotSentError(Exception):
    """Something `send` needs before posting failed: the ledger, or the fake API."""


def _event_to_send(args: argparse.Namespace) -> tuple[str, PaymentToSend | None]:
    """The body to post, and the Mercado Pago payment the file holds if it holds one (its
    notification is made again once the fake says whether it knew the payment)."""
    from ops import send

    text = args.event_file.read_text()
    if args.provider != "mercadopago":
        send.read_event(args.provider, text)
        return text, None
    payment = send.read_mercadopago(text)
    if payment is None:
        return text, None
    return payment.notification(send.PAYMENT_CREATED), payment


def _register_mercadopago_payment(args: argparse.Namespace, payment: PaymentToSend) -> str:
    """Registers the payment (or order) with the fake; the notification Mercado Pago then
    sends."""
    from ops import send
    from ops.local import (
        MERCADOPAGO_DEVELOPMENT_TOKEN,
        FakeApiError,
        register_mercadopago_order,
        register_mercadopago_payment,
    )

    resource = payment.resource
    register = register_mercadopago_order if payment.is_order else register_mercadopago_payment
    try:
        new = register(args.api_url, MERCADOPAGO_DEVELOPMENT_TOKEN, resource)
    except FakeApiError as exc:
        raise _NotSentError(str(exc)) from exc
    body = payment.notification(send.PAYMENT_CREATED if new else send.PAYMENT_UPDATED)
    print(
        f"{'order' if payment.is_order else 'payment'} {resource['id']} ({resource['status']}) "
        f"{'registered' if new else 'updated'} with the fake Mercado Pago API at "
        f"{args.api_url}; its notification: {json.loads(body)['action']}"
    )
    return body


def _register_asaas_payment(args: argparse.Namespace, payment: dict[str, Any]) -> None:
    """Asaas's API answers the payment as the event carries it: process books what it reads."""
    from ops.local import ASAAS_DEVELOPMENT_API_KEY, FakeApiError, register_asaas_payment

    try:
        new = register_asaas_payment(args.api_url, ASAAS_DEVELOPMENT_API_KEY, payment)
    except FakeApiError as exc:
        raise _NotSentError(str(exc)) from exc
    print(
        f"payment {payment['id']} ({payment.get('status')}) "
        f"{'registered' if new else 'updated'} with the fake Asaas API at {args.api_url}"
    )


def _register_stripe_object(args: argparse.Namespace, collection: str, obj: dict[str, Any]) -> None:
    """Stripe's API answers the thin event's object as the snapshot event carries it."""
    from ops.local import STRIPE_DEVELOPMENT_API_KEY, FakeApiError, register_stripe_object

    try:
        new = register_stripe_object(args.api_url, STRIPE_DEVELOPMENT_API_KEY, collection, obj)
    except FakeApiError as exc:
        raise _NotSentError(str(exc)) from exc
    print(
        f"{obj.get('object')} {obj['id']} {'registered' if new else 'updated'} with the fake "
        f"Stripe API at {args.api_url}; its thin event sent"
    )


class _Outcomes:
    """What a sent event became, read from the ledger as `replay` reads it; then its order."""

    def __init__(self, args: argparse.Namespace, payment: dict[str, Any] | None) -> None:
        from functions.asaas.api import AsaasApi
        from functions.mercadopago.api import MercadoPagoApi
        from functions.process.asaas_cash import LedgerCash
        from functions.process.interpreters import Interpreters
        from functions.stripe.api import StripeApi
        from ops.local import (
            ASAAS_DEVELOPMENT_API_KEY,
            MERCADOPAGO_DEVELOPMENT_TOKEN,
            STRIPE_DEVELOPMENT_API_KEY,
        )
        from ops.outcomes import LedgerOutcomes

        self._args = args
        self._dynamodb = operations_client("dynamodb", args.endpoint_url)
        asaas_payments = AsaasApi(lambda: ASAAS_DEVELOPMENT_API_KEY, args.api_url).payment
        # The payment about to be registered, else the one the fake knows.
        about_to_register = (lambda _: payment) if payment is not None else None
        mercadopago = MercadoPagoApi(lambda: MERCADOPAGO_DEVELOPMENT_TOKEN, args.api_url)
        stripe = StripeApi(lambda: STRIPE_DEVELOPMENT_API_KEY, args.api_url)
        interpreters = Interpreters.build(
            mercadopago_payments=about_to_register or mercadopago.payment,
            mercadopago_orders=about_to_register or mercadopago.order,
            stripe_refunds=stripe.refunds_of_charge,
            stripe_related=stripe.related_object,
            asaas_payments=about_to_register or asaas_payments,
            asaas_cash=LedgerCash(self._dynamodb, args.ledger_table),
        )
        self._ledger = LedgerOutcomes(self._dynamodb, args.ledger_table, interpreters)

    def track(self, body: str) -> list[Tracked]:
        """Before posting: the keys the ledger holds already (a duplicate writes nothing)."""
        from botocore.exceptions import BotoCoreError, ClientError

        from ops import send

        try:
            return self._ledger.track([send.message(self._args.provider, body)])
        except (BotoCoreError, ClientError) as exc:
            raise _NotSentError(
                f"cannot read the ledger at {self._args.endpoint_url} ({exc}); "
                "is `umavez serve` running? (--wait 0 posts without reading it)"
            ) from exc

    def report(self, tracked: list[Tracked]) -> int:
        from ops.outcomes import PENDING

        args = self._args
        deadline = time.monotonic() + args.wait
        [result] = self._ledger.settle(tracked, args.wait, every_seconds=0.5)
        if result.outcome == PENDING:
            later = f"; `umavez show order {result.order_id}` later" if result.order_id else ""
            print(
                f"not processed within {args.wait:g} s: still queued, being retried, or failing "
                f"towards the dead-letter queue (`umavez dlq list`){later}",
                file=sys.stderr,
            )
            return 1
        detail = f" ({result.detail})" if result.detail else ""
        print(f"processed: {result.outcome}{detail}")
        if result.order_id is None:
            return 0
        self._until_notifications_leave_pending(result.order_id, deadline)
        return show_order(
            argparse.Namespace(
                order_id=result.order_id,
                json=False,
                endpoint_url=args.endpoint_url,
                ledger_table=args.ledger_table,
                outbox_table=args.outbox_table,
            )
        )

    def _until_notifications_leave_pending(self, order_id: str, deadline: float) -> None:
        """The outbox sends right after the commit: show the order once it has (or at the
        deadline, pending)."""
        from functions.shared.outbox import OutboxStatus
        from ops.state import order_view

        names = TableNames(self._args.ledger_table, self._args.outbox_table)
        while time.monotonic() < deadline:
            view = order_view(self._dynamodb, names, order_id)
            if all(i["status"] != OutboxStatus.PENDING for i in view.outbox):
                return
            time.sleep(0.5)
