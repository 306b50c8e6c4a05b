"""Delivering again: `replay` (a window of provider events through the webhook queue) and
`dlq` (the dead-letter queue, listed and redriven)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE
from ops.cli.common import (
    LOCAL_PROVIDER_APIS,
    add_endpoint_url,
    add_provider_api_options,
    operations_client,
)

if TYPE_CHECKING:
    from functions.process.interpreters import Interpreters
    from ops.outcomes import Result
    from ops.replay import Page, Window

    Sources = list[tuple[str, Iterator[Page]]]


def add_replay_parser(commands: Any) -> None:
    replay = commands.add_parser(
        "replay", help="enqueue a window of provider events again; each applies once"
    )
    sources = replay.add_subparsers(dest="source", required=True)
    for source, description in (
        ("stripe", "the events of Stripe's Events API (the last 30 days)"),
        (
            "mercadopago",
            "a notification per order changed since the window's start (Orders API search), "
            "then per payment updated in the window (payments search)",
        ),
        (
            "asaas",
            "the webhooks of each payment created or received on the window's days "
            "(payments list; Brazil's days)",
        ),
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
        if source == "mercadopago":
            parser.add_argument(
                "--orders-created-since",
                default=None,
                help="ISO 8601: look for the window's order changes among the orders created "
                "since then (default: 30 days before --since; resumes the orders search)",
            )
        parser.add_argument("--page-size", type=int, default=100, help="events per API page")
        parser.add_argument(
            "--wait", type=float, default=30, help="seconds to wait for outcomes (0: report now)"
        )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_endpoint_url(parser)
        parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
        parser.add_argument(
            "--queue-url", default=None, help="the webhook queue (default: the local stack's)"
        )
        add_provider_api_options(parser)
        parser.set_defaults(run=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    from functions.ingest.adapters import SqsQueue
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
    dynamodb = operations_client("dynamodb", args.endpoint_url)
    try:
        sources, interpreters = _replay_sources(args, dynamodb, local)
    except replay.ReplayRefusedError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    sqs = operations_client("sqs", args.endpoint_url)
    queue_url = args.queue_url or sqs.get_queue_url(QueueName=WEBHOOK_QUEUE_NAME)["QueueUrl"]
    ledger = LedgerOutcomes(dynamodb, args.ledger_table, interpreters)
    interrupted: replay.ReplayInterruptedError | None = None
    try:
        enqueued = replay.replay_in_turn(SqsQueue(sqs, queue_url), ledger, sources)
    except replay.ReplayInterruptedError as exc:
        interrupted, enqueued = exc, exc.enqueued
    _print_replayed(ledger.settle(enqueued, args.wait), args.json)
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


def _replay_sources(
    args: argparse.Namespace, dynamodb: Any, local: bool
) -> tuple[Sources, Interpreters]:
    """What the provider's replay reads, in turn, and the interpreters its outcomes are read
    with; ReplayRefusedError when it cannot be done as asked (nothing read)."""
    from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
    from functions.process.asaas_cash import LedgerCash
    from functions.process.interpreters import Interpreters
    from functions.stripe.api import BASE_URL as STRIPE_BASE_URL
    from functions.stripe.api import StripeApi
    from ops import replay, replay_asaas

    secret = secret_reader(args.endpoint_url, args.stage or ("local" if local else "prod"))
    api_url = args.api_url or (LOCAL_PROVIDER_APIS if local else None)
    window = replay.Window.parse(args.since, args.until, time.time())
    if args.source == "stripe":
        types = [t for given in args.types for t in given.split(",") if t]
        key, base_url = secret("stripe/api-key"), api_url or STRIPE_BASE_URL
        events = replay.StripeEvents(key, time.time, base_url, page_size=args.page_size)
        pages = events.pages(window, types or replay.STRIPE_TYPES, args.starting_after)
        refunds = StripeApi(key, base_url).refunds_of_charge
        return [(replay.STRIPE_EVENTS_API, pages)], Interpreters.build(stripe_refunds=refunds)
    if args.source == "asaas":
        listed = replay_asaas.AsaasPayments(
            secret("asaas/api-key"), api_url or ASAAS_BASE_URL, page_size=args.page_size
        )
        interpreters = Interpreters.build(
            asaas_payments=listed.payment, asaas_cash=LedgerCash(dynamodb, args.ledger_table)
        )
        return [(replay_asaas.ASAAS_PAYMENTS_LIST, listed.pages(window))], interpreters
    return _mercadopago_sources(args, secret("mercadopago/access-token"), api_url, window)


def _mercadopago_sources(
    args: argparse.Namespace, token: Callable[[], str], api_url: str | None, window: Window
) -> tuple[Sources, Interpreters]:
    from functions.mercadopago.api import BASE_URL as MERCADOPAGO_BASE_URL
    from functions.process.interpreters import Interpreters
    from ops import replay, replay_mercadopago

    base_url = api_url or MERCADOPAGO_BASE_URL
    payments = replay_mercadopago.MercadoPagoPayments(token, base_url, page_size=args.page_size)
    orders = replay_mercadopago.MercadoPagoOrders(token, base_url, page_size=args.page_size)
    created_since = (
        None
        if args.orders_created_since is None
        else replay.instant(args.orders_created_since, "--orders-created-since")
    )
    sources = replay_mercadopago.replay_sources(payments, orders, window, created_since)
    looked_from = created_since or window.since - replay_mercadopago.ORDERS_LOOKBACK
    print(
        "orders: their changes since --since are looked for among the orders created "
        f"since {looked_from.isoformat()} (--orders-created-since looks further back)",
        file=sys.stderr,
    )
    interpreters = Interpreters.build(
        mercadopago_payments=payments.payment, mercadopago_orders=orders.order
    )
    return sources, interpreters


def _print_replayed(results: Sequence[Result], as_json: bool) -> None:
    """What each replayed event became, as JSON or one line each under a tally."""
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
    if as_json:
        print(json.dumps(described, indent=2))
        return
    counts = Counter(d["outcome"] for d in described)
    tally = ", ".join(f"{n} {outcome}" for outcome, n in counts.items())
    print(f"{len(described)} replayed" + (f": {tally}" if tally else ""))
    for d in described:
        print(
            f"  {d['outcome']:<10} {d['event_type']:<34} {d['event_id']:<36} "
            f"{d['order_id'] or '-':<16} {d['detail']}"
        )


def secret_reader(endpoint_url: str, stage: str) -> Callable[[str], Callable[[], str]]:
    """`reader(name)`: a function that reads the secret umavez/STAGE/NAME once, when called."""
    import functools

    from botocore.exceptions import BotoCoreError, ClientError

    from ops.replay import ReplayRefusedError

    secrets = operations_client("secretsmanager", endpoint_url)

    def reader(name: str) -> Callable[[], str]:
        def read() -> str:
            secret_id = f"umavez/{stage}/{name}"
            try:
                return str(secrets.get_secret_value(SecretId=secret_id)["SecretString"])
            except (ClientError, BotoCoreError) as exc:
                raise ReplayRefusedError(f"cannot read the secret {secret_id}: {exc}") from exc

        return functools.cache(read)

    return reader


def add_dlq_parser(commands: Any) -> None:
    dlq = commands.add_parser("dlq", help="list the dead-letter queue, or move messages back")
    actions = dlq.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="per message: provider, event, receives, reason")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    redrive = actions.add_parser("redrive", help="move messages back to the webhook queue")
    chosen = redrive.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--message-id", nargs="+", default=None, help="the messages to move")
    chosen.add_argument("--all", action="store_true", help="every message in the DLQ")
    for parser in (listing, redrive):
        add_endpoint_url(parser)
        parser.add_argument("--queue-url", default=None, help="the webhook queue (WebhookQueueUrl)")
        parser.add_argument("--dlq-url", default=None, help="the DLQ (DeadLetterQueueUrl)")
        parser.add_argument(
            "--ledger-table",
            default=DEFAULT_LEDGER_TABLE,
            help="where process records why each message failed (the stack's LedgerTable)",
        )
        parser.set_defaults(run=run_dlq)


def run_dlq(args: argparse.Namespace) -> int:
    from functions.shared.failures import FailureRecords
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
    sqs = operations_client("sqs", args.endpoint_url)
    dlq_url = args.dlq_url or sqs.get_queue_url(QueueName=DEAD_LETTER_QUEUE_NAME)["QueueUrl"]
    queue_url = args.queue_url or (
        sqs.get_queue_url(QueueName=WEBHOOK_QUEUE_NAME)["QueueUrl"] if local else ""
    )
    failures = FailureRecords(
        operations_client("dynamodb", args.endpoint_url), args.ledger_table, time.time
    )
    dead_letters = DeadLetters(sqs, dlq_url, queue_url, last_failures=failures.last_failures)
    if args.action == "list":
        letters = [letter.describe() for letter in dead_letters.letters()]
        if args.json:
            print(json.dumps(letters, indent=2))
            return 0
        print(f"{len(letters)} in the DLQ (the rest of each story: process logs, by message_id)")
        for d in letters:
            print(
                f"  {d['message_id']:<38} {d['provider'] or '-':<11} {d['event_type'] or '-':<28} "
                f"{d['event_id'] or '-':<36} receives {d['receives']}  "
                f"first {d['first_received_at'] or '-'}  {d['note']}"
            )
            print(f"      why: {d['reason'] or 'no failure recorded (see the process logs)'}")
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
