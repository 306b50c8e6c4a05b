"""`umavez`: run the stack locally, drill it, look inside it, send it an event.

umavez serve [--port 8750] [--api-type http|rest]   the embedded stack until Ctrl-C
umavez firedrill [--deliveries N | --orders N | --soak MINUTES [--rate R]] [--no-faults]
       [--api-type http|rest]
umavez show order ORDER_ID [--json] [--endpoint-url URL] [--ledger-table T --outbox-table T]
umavez show waiting|unmatched [--json] [--endpoint-url URL] [--ledger-table T]
umavez attach PROVIDER OBJECT ORDER_ID [--endpoint-url URL --ledger-table T --queue-url URL]
umavez send EVENT_FILE [--provider stripe] [--url URL] [--secret S] [--wait 30]
       [--api-url URL] [--endpoint-url URL --ledger-table T --outbox-table T]
umavez replay stripe|mercadopago --since ISO [--until ISO] [--types T1,T2] [--starting-after ID]
       [--wait S] [--endpoint-url URL --ledger-table T --queue-url URL --stage S --api-url URL]
umavez dlq list [--json] | dlq redrive (--message-id ID ... | --all)
       [--endpoint-url URL --queue-url URL --dlq-url URL]
umavez outbox revive OUTBOX_ID | --all-dead [--json] [--endpoint-url URL --outbox-table T]
umavez show metrics [--json]           what the local functions counted (.local/metrics/)
umavez preflight --stack-name NAME [--region R] [--profile P] [--test-alarm] [--json]
       the account before and after `cdk deploy` (docs/deploy.md)
umavez cost [--orders 52] [--per-kind 20] [--readme docs/cost.md] [--json FILE | --from-json FILE]
       [--xray-sampling RATE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE, TableNames
from infra.config import DEFAULT_API_TYPE, ApiType
from ops import preflight
from ops.console import warnings_to_log

if TYPE_CHECKING:
    from ops.outcomes import Tracked
    from ops.send import PaymentToSend

DEFAULT_PORT = 8750


def _add_show_metrics_parser(show_what: Any) -> None:
    """`show metrics`: its options without loading the embedded stack to build the parser."""
    parser = show_what.add_parser(
        "metrics", help="the local stack's metrics: sum per function and metric (.local/metrics)"
    )
    parser.add_argument(
        "--dir", type=Path, default=Path(".local/metrics"), help="default: .local/metrics"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _add_api_type(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-type",
        type=ApiType,
        choices=list(ApiType),
        default=DEFAULT_API_TYPE,
        help="the API Gateway the webhook front plays, as the stack's apiType: an HTTP API"
        " (payload 2.0 events) or a REST API (payload 1.0); default: %(default)s",
    )


def _add_endpoint_url(
    parser: argparse.ArgumentParser, deployed: str = "the deployed stack"
) -> None:
    parser.add_argument(
        "--endpoint-url",
        default=f"http://127.0.0.1:{DEFAULT_PORT + 1}",
        help=f"local stack (default) or 'aws' for {deployed}",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="umavez", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the embedded stack until Ctrl-C")
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="webhook front port; AWS (moto) on port+1, the fake provider APIs on port+2",
    )
    _add_api_type(serve)

    drill = commands.add_parser(
        "firedrill", help="deliver like providers do and check every guarantee"
    )
    size = drill.add_mutually_exclusive_group()
    size.add_argument(
        "--deliveries", type=int, help="deliveries to make, about 3 an order (default 1000)"
    )
    size.add_argument("--orders", type=int, help="orders to simulate instead")
    size.add_argument(
        "--soak", type=float, metavar="MINUTES", help="deliver at --rate for MINUTES, then check"
    )
    drill.add_argument("--rate", type=float, default=5.0, help="a soak's deliveries per second")
    drill.add_argument(
        "--no-faults", action="store_true", help="no injected crashes, conflicts or sink failures"
    )
    drill.add_argument("--seed", type=int, default=42)
    drill.add_argument("--url", help="a deployed stack's API URL (…/live): drill it instead")
    drill.add_argument(
        "--secret", action="append", default=[], help="PROVIDER=SECRET, per provider"
    )
    drill.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    drill.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    drill.add_argument("--region", default=None)
    _add_api_type(drill)  # the embedded stack's front; a deployed stack (--url) has its own

    show = commands.add_parser("show", help="inspect the tables")
    show_what = show.add_subparsers(dest="what", required=True)
    order = show_what.add_parser("order", help="an order, its effects and its outbox items")
    order.add_argument("order_id")
    order.add_argument(
        "--json", action="store_true", help="machine-readable output (fields in docs/operations.md)"
    )
    _add_endpoint_url(order, "the deployed tables")
    order.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    order.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)

    for what, description in (
        ("waiting", "deliveries waiting for the order their payment belongs to"),
        ("unmatched", "money nobody could route: waited past the providers' retries"),
    ):
        parked = show_what.add_parser(what, help=description)
        parked.add_argument("--json", action="store_true", help="machine-readable output")
        _add_endpoint_url(parked, "the deployed tables")
        parked.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    _add_show_metrics_parser(show_what)

    outbox = commands.add_parser("outbox", help="operate on outbox items (notifications)")
    outbox_what = outbox.add_subparsers(dest="outbox_command", required=True)
    revive = outbox_what.add_parser(
        "revive", help="dead notifications back to pending, same key: the sweeper sends them"
    )
    revive_which = revive.add_mutually_exclusive_group(required=True)
    revive_which.add_argument("outbox_id", nargs="?", help="one item (obx_...)")
    revive_which.add_argument("--all-dead", action="store_true", help="every dead item")
    revive.add_argument("--json", action="store_true", help="machine-readable output")
    _add_endpoint_url(revive, "the deployed table")
    revive.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)

    attach = commands.add_parser(
        "attach", help="bind a waiting or unmatched payment to its order; it is then applied"
    )
    attach.add_argument("provider", choices=["stripe", "mercadopago", "asaas"])
    attach.add_argument("object", help="the provider object: pi_..., a payment id, pay_...")
    attach.add_argument("order_id")
    _add_endpoint_url(attach)
    attach.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    attach.add_argument(
        "--queue-url", default=None, help="the webhook queue (default: the local stack's)"
    )
    attach.add_argument(
        "--force", action="store_true", help="bind even if no delivery waits for the object"
    )

    send = commands.add_parser(
        "send",
        help="sign and post one event file, as the provider would; then show its order",
        description="Signs and posts EVENT_FILE as the provider would, prints the HTTP status, "
        "waits until process has handled it and prints its order as `show order` does. "
        "Mercado Pago: EVENT_FILE is a payment as GET /v1/payments/{id} answers it; it is "
        "registered with the fake Mercado Pago API and its notification is sent "
        "(payment.created, or payment.updated if the fake knew the payment). "
        "Exit status: 0 processed, 1 refused or not processed in time, 2 a bad file.",
    )
    send.add_argument("event_file", type=Path)
    send.add_argument("--provider", default="stripe", choices=["stripe", "mercadopago", "asaas"])
    send.add_argument(
        "--url", default=None, help=f"default: http://127.0.0.1:{DEFAULT_PORT}/webhooks/PROVIDER"
    )
    send.add_argument("--secret", default=None, help="default: the local development secret")
    send.add_argument(
        "--api-url",
        default=LOCAL_PROVIDER_APIS,
        help="the fake provider APIs `serve` runs (default: %(default)s)",
    )
    send.add_argument(
        "--wait",
        type=float,
        default=30,
        help="seconds to wait for processing (default: %(default)s; 0: post only)",
    )
    _add_endpoint_url(send, "the deployed tables (with --ledger-table, --outbox-table)")
    send.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    send.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)

    _add_replay_parser(commands)
    _add_dlq_parser(commands)
    preflight.add_parser(commands)

    cost = commands.add_parser(
        "cost", help="measure the cost per million events on the embedded stack (minutes)"
    )
    cost.add_argument("--orders", type=int, default=52, help="the drill's mix: orders (0: none)")
    cost.add_argument("--per-kind", type=int, default=20, help="deliveries per event kind")
    cost.add_argument("--seed", type=int, default=42)
    cost.add_argument("--readme", type=Path, help="rewrite this file's cost section")
    cost.add_argument("--json", type=Path, help="write the raw measurement here")
    cost.add_argument(
        "--from-json", type=Path, help="price a measurement --json wrote (no stack, seconds)"
    )
    cost.add_argument(
        "--xray-sampling",
        type=float,
        help="share of invocations traced (default: costmodel/prices.toml, 0.05)",
    )

    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args.port, args.api_type)
    if args.command == "firedrill":
        return _firedrill(args)
    if args.command == "show" and args.what == "metrics":
        from ops.local import show_metrics

        return show_metrics(args)
    if args.command == "show":
        return _show_order(args) if args.what == "order" else _show_parked(args)
    if args.command == "outbox":
        return _outbox_revive(args)
    if args.command == "attach":
        return _attach(args)
    if args.command == "replay":
        return _replay(args)
    if args.command == "dlq":
        return _dlq(args)
    if args.command == "preflight":
        return preflight.command(args)
    if args.command == "cost":
        from ops.local import CostOptions, run_cost

        options = CostOptions(args.orders, args.per_kind, args.seed)
        return run_cost(
            options,
            readme=args.readme,
            json_path=args.json,
            measured=args.from_json,
            xray_sampling=args.xray_sampling,
        )
    return _send(args)


def _waiting_room(endpoint_url: str, ledger_table: str, queue_url: str | None) -> Any:
    import boto3

    from functions.process.waiting import Waiting
    from ops.local import WEBHOOK_QUEUE_NAME, client

    local = endpoint_url != "aws"
    dynamodb: Any = client("dynamodb", endpoint_url) if local else boto3.client("dynamodb")
    sqs: Any = client("sqs", endpoint_url) if local else boto3.client("sqs")
    if queue_url is None and local:
        queue_url = sqs.get_queue_url(QueueName=WEBHOOK_QUEUE_NAME)["QueueUrl"]
    return Waiting(
        dynamodb, sqs, TableNames(ledger_table, DEFAULT_OUTBOX_TABLE), queue_url or "", time.time
    )


def _show_parked(args: argparse.Namespace) -> int:
    from functions.process.waiting import describe

    if args.endpoint_url == "aws" and args.ledger_table == DEFAULT_LEDGER_TABLE:
        print("--endpoint-url aws needs --ledger-table (the stack's output LedgerTable)")
        return 2
    room = _waiting_room(args.endpoint_url, args.ledger_table, "")
    items = list(room.waiting() if args.what == "waiting" else room.unmatched())
    now = time.time()
    described = [describe(item, now) for item in items]
    if args.json:
        print(json.dumps(described, indent=2, default=str))
        return 0
    print(f"{len(described)} {args.what}")
    for d in described:
        print(
            f"  {d['provider']:<11} {d['event_type']:<28} {d['object'] or '-':<30} "
            f"{d['amount']} {d['currency']}  waits for {', '.join(d['waits_for'])}  "
            f"({d['waiting_seconds']} s)"
        )
    return 0


def _outbox_revive(args: argparse.Namespace) -> int:
    import boto3

    from functions.outbox.revive import OutboxReviver, ReviveResult
    from functions.shared.outbox import iso_time
    from ops.local import client

    if args.endpoint_url == "aws" and args.outbox_table == DEFAULT_OUTBOX_TABLE:
        print("--endpoint-url aws needs --outbox-table (the stack's output OutboxTable)")
        return 2
    local = args.endpoint_url != "aws"
    dynamodb: Any = client("dynamodb", args.endpoint_url) if local else boto3.client("dynamodb")
    reviver = OutboxReviver(dynamodb, args.outbox_table, time.time)
    report = reviver.revive_all_dead() if args.all_dead else [reviver.revive(args.outbox_id)]
    if args.json:
        print(json.dumps([{**vars(r), "result": r.result.value} for r in report], indent=2))
    else:
        print(f"{sum(r.result is ReviveResult.REVIVED for r in report)} revived")
        for r in report:
            detail = (
                f"died {iso_time(r.died_at or 0)} after {r.attempts} attempts: {r.last_error}"
                if r.result is ReviveResult.REVIVED
                else f"status {r.status}"
                if r.result is ReviveResult.NOT_DEAD
                else "no such item"
            )
            print(f"  {r.result.value:<9} {r.outbox_id}  {detail}")
    if args.all_dead:
        return 0
    return 0 if report[0].result is ReviveResult.REVIVED else 1


def _attach(args: argparse.Namespace) -> int:
    from functions.process.waiting import NothingWaitsError
    from functions.shared.errors import BindingConflictError

    if args.endpoint_url == "aws" and (
        not args.queue_url or args.ledger_table == DEFAULT_LEDGER_TABLE
    ):
        print(
            "--endpoint-url aws needs --queue-url and --ledger-table "
            "(the stack's outputs WebhookQueueUrl and LedgerTable)",
            file=sys.stderr,
        )
        return 2
    room = _waiting_room(args.endpoint_url, args.ledger_table, args.queue_url)
    try:
        redriven = room.attach(args.provider, args.object, args.order_id, force=args.force)
    except (BindingConflictError, NothingWaitsError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    print(
        f"{args.provider} {args.object} bound to {args.order_id}; {redriven} deliveries re-driven "
        "(each applies once; see `umavez show order`)"
    )
    return 0


def _firedrill(args: argparse.Namespace) -> int:
    from ops.local import DeployedTarget, DrillOptions, run_deployed, run_embedded

    if not args.url:
        options = DrillOptions(
            faults=not args.no_faults, seed=args.seed, api_type=args.api_type, **_drill_size(args)
        )
        with warnings_to_log():  # the console shows progress and the report only
            return run_embedded(options)
    secrets = dict(pair.split("=", 1) for pair in args.secret)
    if not secrets:
        print("--url needs --secret PROVIDER=SECRET for stripe and/or asaas", file=sys.stderr)
        return 2
    target = DeployedTarget(
        url=args.url,
        secrets=secrets,
        tables=TableNames(args.ledger_table, args.outbox_table),
        region=args.region,
    )
    return run_deployed(DrillOptions(orders=args.orders or 300, faults=False), target)


def _drill_size(args: argparse.Namespace) -> dict[str, Any]:
    """--orders, --soak (at --rate) or --deliveries: 1,000 deliveries when none is given."""
    from ops.local import DEFAULT_DELIVERIES

    if args.orders is not None:
        return {"orders": args.orders}
    if args.soak is not None:
        return {"soak_minutes": args.soak, "rate": args.rate}
    return {"deliveries": args.deliveries or DEFAULT_DELIVERIES}


def _serve(port: int, api_type: ApiType) -> int:
    from ops.local import DEVELOPMENT_SECRETS, MERCADOPAGO_DEVELOPMENT_TOKEN, EmbeddedStack

    with (
        warnings_to_log(),  # the console shows the URLs only
        EmbeddedStack(
            front_port=port, aws_port=port + 1, provider_apis_port=port + 2, api_type=api_type
        ) as stack,
    ):
        print(f"umavez local stack is up as a {api_type.value} API (Ctrl-C to stop)")
        for provider, url in stack.webhook_urls.items():
            print(f"  POST {url}    secret: {DEVELOPMENT_SECRETS[provider]}")
        print(f"  AWS (moto) endpoint: {stack.aws.endpoint_url}")
        print(f"  provider APIs (fakes): {stack.provider_apis.url}")
        print(
            f"  Mercado Pago API (fake): {stack.provider_apis.url}/v1/payments/ID"
            f"    token: {MERCADOPAGO_DEVELOPMENT_TOKEN}"
        )
        print(f"  tables: {stack.resources.tables.ledger}, {stack.resources.tables.outbox}")
        print("  try: umavez send fixtures/events/stripe/payment_intent.succeeded.json")
        print("       umavez send --provider mercadopago fixtures/events/mercadopago/payment.json")
        print("       umavez show order ord_1042")
        sys.stdout.flush()  # for a pipe too (a log, a test): the banner is what it waits for
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping")
    return 0


def _show_order(args: argparse.Namespace) -> int:
    import boto3

    from functions.shared.domain import financial_status, totals_of
    from functions.shared.money import render as render_money
    from ops.local import SINK_TABLE, client, sink_counts
    from ops.state import order_view

    local = args.endpoint_url != "aws"
    dynamodb: Any = client("dynamodb", args.endpoint_url) if local else boto3.client("dynamodb")
    view = order_view(dynamodb, TableNames(args.ledger_table, args.outbox_table), args.order_id)
    sinks = sink_counts(args.endpoint_url) if local and _has_table(dynamodb, SINK_TABLE) else {}
    currency = str(view.order.get("currency", ""))
    report = {
        "order_id": args.order_id,
        "status": financial_status(view.order).value,
        "lifecycle_status": view.order.get("lifecycle_status"),
        "currency": currency,
        "recipient": view.order.get("recipient"),
        "totals": {t.value.removesuffix("_total"): n for t, n in totals_of(view.order).items()},
        "last_event_at": view.order.get("last_event_at"),
        "last_event_id": view.order.get("last_event_id"),
        "effects": [
            {
                k: e.get(k)
                for k in (
                    "effect_key",
                    "transition",
                    "outcome",
                    "external_ref",
                    "payment",
                    "amount",
                    "event_id",
                    "event_type",
                )
            }
            for e in sorted(
                view.effects, key=lambda e: (e.get("ordering_token", 0), e["effect_key"])
            )
        ],
        "outbox": [
            {
                "outbox_id": i["outbox_id"],
                "transition": i["transition"],
                "status": i["status"],
                "late": bool(i.get("late")),
                "attempts": i.get("attempts", 0),
                "sink_deliveries": sinks.get(i["outbox_id"]) if local else None,
            }
            for i in view.outbox
        ],
    }
    if not view.order and not view.effects:
        print(f"no order {args.order_id!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    totals = ", ".join(
        f"{name} {render_money(amount, currency)}"
        for name, amount in report["totals"].items()
        if amount
    )
    print(f"order {args.order_id}: {report['status']}  ({totals or 'nothing counted'})")
    print(f"  lifecycle {report['lifecycle_status']}, customer {report['recipient']}")
    print(f"  last event {report['last_event_id']} (token {report['last_event_at']})")
    print("  effects:")
    for e in report["effects"]:
        print(
            f"    {e['outcome']:<9} {e['transition']:<22} {e['external_ref']:<32} "
            f"{render_money(int(e['amount']), currency):>14}  {e['event_type']} {e['event_id']}"
        )
    print("  outbox:")
    for i in report["outbox"]:
        print(
            f"    {i['status']:<8} {i['transition']:<22} {i['outbox_id'][:24]}...  "
            f"{'late  ' if i['late'] else ''}attempts {i['attempts']}  sinks {i['sink_deliveries']}"
        )
    return 0


def _has_table(dynamodb: Any, name: str) -> bool:
    return name in dynamodb.list_tables().get("TableNames", [])


def _send(args: argparse.Namespace) -> int:
    from ops.local import DEVELOPMENT_SECRETS, DeliveryLog, Post, Providers
    from ops.send import EventFileError

    try:
        body, payment = _event_to_send(args)
    except EventFileError as exc:
        print(f"{args.event_file}: {exc}; nothing sent", file=sys.stderr)
        return 2
    secret = args.secret or DEVELOPMENT_SECRETS[args.provider]
    base = args.url.rsplit("/webhooks/", 1)[0] if args.url else f"http://127.0.0.1:{DEFAULT_PORT}"
    query = {}
    if args.provider == "mercadopago":
        query = {"data.id": str(json.loads(body)["data"]["id"]), "type": "payment"}
    try:
        outcomes = _Outcomes(args, payment.resource if payment else None) if args.wait else None
        tracked = outcomes.track(body) if outcomes else None
        if payment is not None:
            body = _register_mercadopago_payment(args, payment)
    except _NotSentError as exc:
        print(f"{exc}; nothing sent", file=sys.stderr)
        return 1
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
    """Registers the payment with the fake; the notification Mercado Pago then sends."""
    from ops import send
    from ops.local import MERCADOPAGO_DEVELOPMENT_TOKEN, FakeApiError, register_mercadopago_payment

    resource = payment.resource
    try:
        new = register_mercadopago_payment(args.api_url, MERCADOPAGO_DEVELOPMENT_TOKEN, resource)
    except FakeApiError as exc:
        raise _NotSentError(str(exc)) from exc
    action = send.PAYMENT_CREATED if new else send.PAYMENT_UPDATED
    print(
        f"payment {resource['id']} ({resource['status']}) {'registered' if new else 'updated'} "
        f"with the fake Mercado Pago API at {args.api_url}; its notification: {action}"
    )
    return payment.notification(action)


class _Outcomes:
    """What a sent event became, read from the ledger as `replay` reads it; then its order."""

    def __init__(self, args: argparse.Namespace, payment: dict[str, Any] | None) -> None:
        from functions.process.mercadopago_api import MercadoPagoApi
        from functions.process.stripe_api import StripeApi
        from functions.shared.providers import Interpreters
        from ops.local import MERCADOPAGO_DEVELOPMENT_TOKEN, STRIPE_DEVELOPMENT_API_KEY
        from ops.outcomes import LedgerOutcomes

        self._args = args
        payments = MercadoPagoApi(lambda: MERCADOPAGO_DEVELOPMENT_TOKEN, args.api_url).payment
        interpreters = Interpreters.build(
            # The payment about to be registered, else the one the fake knows.
            mercadopago_payments=(lambda _: payment) if payment is not None else payments,
            stripe_refunds=StripeApi(
                lambda: STRIPE_DEVELOPMENT_API_KEY, args.api_url
            ).refunds_of_charge,
        )
        self._dynamodb = _operations_client("dynamodb", args.endpoint_url)
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
        return _show_order(
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


# -- replay: a window of provider events through the webhook queue again -----------------------

LOCAL_PROVIDER_APIS = f"http://127.0.0.1:{DEFAULT_PORT + 2}"  # `serve`'s fake provider APIs


def _add_replay_parser(commands: Any) -> None:
    replay = commands.add_parser(
        "replay", help="enqueue a window of provider events again; each applies once"
    )
    sources = replay.add_subparsers(dest="source", required=True)
    for source, description in (
        ("stripe", "the events of Stripe's Events API (the last 30 days)"),
        ("mercadopago", "a notification per payment updated in the window (payments search)"),
    ):
        parser = sources.add_parser(source, help=description)
        parser.add_argument("--since", required=True, help="ISO 8601, inclusive (UTC if no zone)")
        parser.add_argument("--until", default=None, help="ISO 8601, inclusive; default: now")
        if source == "stripe":
            parser.add_argument(
                "--types",
                action="append",
                default=[],
                help="event types, comma-separated or repeated (at most 20); "
                "default: every type the Stripe map reads",
            )
            parser.add_argument("--starting-after", default=None, help="resume after this event")
        parser.add_argument("--page-size", type=int, default=100, help="events per API page")
        parser.add_argument(
            "--wait", type=float, default=30, help="seconds to wait for outcomes (0: report now)"
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        _add_endpoint_url(parser)
        parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
        parser.add_argument(
            "--queue-url", default=None, help="the webhook queue (default: the local stack's)"
        )
        parser.add_argument(
            "--stage", default=None, help="secrets umavez/STAGE/...: default local, or prod on aws"
        )
        parser.add_argument(
            "--api-url",
            default=None,
            help=f"the provider's API (default: the real one; locally {LOCAL_PROVIDER_APIS})",
        )


def _replay(args: argparse.Namespace) -> int:
    from functions.ingest.adapters import SqsQueue
    from functions.process.mercadopago_api import BASE_URL as MERCADOPAGO_BASE_URL
    from functions.process.stripe_api import BASE_URL as STRIPE_BASE_URL
    from functions.process.stripe_api import StripeApi
    from functions.shared.providers import Interpreters
    from ops import replay
    from ops.local import WEBHOOK_QUEUE_NAME
    from ops.outcomes import LedgerOutcomes

    local = args.endpoint_url != "aws"
    if not local and (not args.queue_url or args.ledger_table == DEFAULT_LEDGER_TABLE):
        print(
            "--endpoint-url aws needs --queue-url and --ledger-table "
            "(the stack's outputs WebhookQueueUrl and LedgerTable)",
            file=sys.stderr,
        )
        return 2
    secret = _secret_reader(args.endpoint_url, args.stage or ("local" if local else "prod"))
    api_url = args.api_url or (LOCAL_PROVIDER_APIS if local else None)
    try:
        window = replay.Window.parse(args.since, args.until, time.time())
        if args.source == "stripe":
            types = [t for given in args.types for t in given.split(",") if t]
            key, base_url = secret("stripe/api-key"), api_url or STRIPE_BASE_URL
            events = replay.StripeEvents(key, time.time, base_url, page_size=args.page_size)
            pages = events.pages(window, types or replay.STRIPE_TYPES, args.starting_after)
            refunds = StripeApi(key, base_url).refunds_of_charge
            interpreters = Interpreters.build(stripe_refunds=refunds)
            source = replay.STRIPE_EVENTS_API
        else:
            payments = replay.MercadoPagoPayments(
                secret("mercadopago/access-token"),
                api_url or MERCADOPAGO_BASE_URL,
                page_size=args.page_size,
            )
            pages = payments.pages(window)
            interpreters = Interpreters.build(mercadopago_payments=payments.payment)
            source = replay.MERCADOPAGO_PAYMENTS_SEARCH
    except replay.ReplayRefusedError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    sqs = _operations_client("sqs", args.endpoint_url)
    queue_url = args.queue_url or sqs.get_queue_url(QueueName=WEBHOOK_QUEUE_NAME)["QueueUrl"]
    dynamodb = _operations_client("dynamodb", args.endpoint_url)
    ledger = LedgerOutcomes(dynamodb, args.ledger_table, interpreters)
    interrupted: replay.ReplayInterruptedError | None = None
    try:
        enqueued = replay.Replayer(SqsQueue(sqs, queue_url), ledger, source).replay(pages)
    except replay.ReplayInterruptedError as exc:
        interrupted, enqueued = exc, exc.enqueued
    results = ledger.settle(enqueued, args.wait)
    described = [
        {
            "provider": r.tracked.message.provider,
            "event_id": r.tracked.message.event_id,
            "event_type": r.tracked.message.event_type,
            "outcome": r.outcome,
            "order_id": r.order_id,
            "detail": r.detail,
        }
        for r in results
    ]
    if args.json:
        print(json.dumps(described, indent=2))
    else:
        counts = Counter(d["outcome"] for d in described)
        tally = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
        print(f"{len(described)} replayed" + (f": {tally}" if tally else ""))
        for d in described:
            print(
                f"  {d['outcome']:<10} {d['event_type']:<34} {d['event_id']:<36} "
                f"{d['order_id'] or '-':<16} {d['detail']}"
            )
    if interrupted is None:
        return 0
    resume = interrupted.resume
    print(
        f"stopped: {interrupted}\n{len(enqueued)} events were enqueued before it; each applies "
        "once. Run the same command again"
        + (f" with {resume.option} {resume.value}" if resume else "")
        + " to go on (re-running from the start only adds duplicates).",
        file=sys.stderr,
    )
    return 1


def _operations_client(service: str, endpoint_url: str) -> Any:
    """A client of the local stack's AWS, or of the deployed stack's (`aws`)."""
    import boto3

    from ops.local import client

    if endpoint_url != "aws":
        return client(service, endpoint_url)
    return boto3.client(service)  # type: ignore[call-overload]  # the service is a variable


def _secret_reader(endpoint_url: str, stage: str) -> Callable[[str], Callable[[], str]]:
    """`reader(name)`: a function that reads the secret umavez/STAGE/NAME once, when called."""
    import functools

    from botocore.exceptions import BotoCoreError, ClientError

    from ops.replay import ReplayRefusedError

    secrets = _operations_client("secretsmanager", endpoint_url)

    def reader(name: str) -> Callable[[], str]:
        def read() -> str:
            secret_id = f"umavez/{stage}/{name}"
            try:
                return str(secrets.get_secret_value(SecretId=secret_id)["SecretString"])
            except (ClientError, BotoCoreError) as exc:
                raise ReplayRefusedError(f"cannot read the secret {secret_id}: {exc}") from exc

        return functools.cache(read)

    return reader


# -- dlq: the dead-letter queue, listed and redriven ------------------------------------------


def _add_dlq_parser(commands: Any) -> None:
    dlq = commands.add_parser("dlq", help="list the dead-letter queue, or move messages back")
    actions = dlq.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="per message: provider, event, receives, reason")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    redrive = actions.add_parser("redrive", help="move messages back to the webhook queue")
    chosen = redrive.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--message-id", nargs="+", default=None, help="the messages to move")
    chosen.add_argument("--all", action="store_true", help="every message in the DLQ")
    for parser in (listing, redrive):
        _add_endpoint_url(parser)
        parser.add_argument("--queue-url", default=None, help="the webhook queue (WebhookQueueUrl)")
        parser.add_argument("--dlq-url", default=None, help="the DLQ (DeadLetterQueueUrl)")


def _dlq(args: argparse.Namespace) -> int:
    from ops.dlq import DeadLetters
    from ops.local import DEAD_LETTER_QUEUE_NAME, WEBHOOK_QUEUE_NAME

    local = args.endpoint_url != "aws"
    if not local and not (args.dlq_url and (args.queue_url or args.action == "list")):
        print(
            "--endpoint-url aws needs --dlq-url, and --queue-url to redrive "
            "(the stack's outputs DeadLetterQueueUrl and WebhookQueueUrl)",
            file=sys.stderr,
        )
        return 2
    sqs = _operations_client("sqs", args.endpoint_url)
    dlq_url = args.dlq_url or sqs.get_queue_url(QueueName=DEAD_LETTER_QUEUE_NAME)["QueueUrl"]
    queue_url = args.queue_url or (
        sqs.get_queue_url(QueueName=WEBHOOK_QUEUE_NAME)["QueueUrl"] if local else ""
    )
    dead_letters = DeadLetters(sqs, dlq_url, queue_url)
    if args.action == "list":
        letters = [letter.describe() for letter in dead_letters.letters()]
        if args.json:
            print(json.dumps(letters, indent=2))
            return 0
        print(f"{len(letters)} in the DLQ (reasons: process logs, by message_id)")
        for d in letters:
            print(
                f"  {d['message_id']:<38} {d['provider'] or '-':<11} {d['event_type'] or '-':<28} "
                f"{d['event_id'] or '-':<36} receives {d['receives']}  "
                f"first {d['first_received_at'] or '-'}  {d['note']}"
            )
        return 0
    moved = dead_letters.redrive(None if args.all else args.message_id)
    for r in moved:
        print(
            f"  {r.result:<10} {r.message_id:<38} {r.event_id or '-':<36} "
            f"-> {r.new_message_id or '-'}"
        )
    done = sum(r.result == "moved" for r in moved)
    print(f"{done} of {len(moved)} moved back to the webhook queue (each applies once)")
    return 0 if done == len(moved) else 1


if __name__ == "__main__":
    sys.exit(main())
