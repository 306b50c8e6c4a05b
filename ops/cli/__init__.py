"""`umavez`: run the stack locally, drill it, look inside it, send it an event.

umavez serve [--port 8750] [--api-type http|rest]   the embedded stack until Ctrl-C
umavez firedrill [--deliveries N | --orders N | --soak MINUTES [--rate R] | --burst N]
       [--no-faults]
       [--api-type http|rest]
Where the stack is, for the commands that read or repair it: the local one (default), a
deployed one by name (STACK: --stack-name NAME [--region R] [--profile P], its resources from
its outputs), or --endpoint-url aws with physical names (--ledger-table, --queue-url, ...).

umavez show order ORDER_ID [--json] [STACK]
umavez show waiting|unmatched [--json] [STACK]
umavez attach PROVIDER OBJECT ORDER_ID [STACK]
umavez send EVENT_FILE [--provider stripe] [--url URL] [--secret S] [--wait 30]
       [--api-url URL] [--endpoint-url URL --ledger-table T --outbox-table T]
umavez replay stripe|mercadopago --since ISO [--until ISO] [--types T1,T2] [--starting-after ID]
       [--wait S] [STACK] [--api-url URL]
umavez statement stripe|mercadopago|asaas --since ISO [--until ISO] [--starting-after TXN]
       [--json] [STACK] [--api-url URL]   the provider's books: what deliveries missed, mismatches
umavez dlq list [--json] | dlq redrive (--message-id ID ... | --all) [STACK]
umavez outbox revive OUTBOX_ID | --all-dead [--json] [STACK]
umavez status [--json] [STACK]        the pipeline's health; exit 1 when a person is needed
umavez trace EVENT_ID|ORDER_ID [--json] [--since 7d] [STACK]   one event's journey
umavez show metrics [--json]           what the local functions counted (.local/metrics/)
umavez preflight --stack-name NAME [--region R] [--profile P] [--test-alarm] [--json]
       the account before and after `cdk deploy` (docs/deploy.md)
--debug, anywhere: a traceback instead of a one-line error.
umavez cost [--orders 52] [--per-kind 20] [--readme docs/cost.md] [--json FILE | --from-json FILE]
       [--xray-sampling RATE]
umavez capacity --rate R [--burst N] [--json] [--process-max-concurrency N] [--ses-send-rate R]
       the load at R payments a second, each component's limit, what saturates first
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE
from ops import preflight, stack
from ops.cli import capacity as capacity_command
from ops.cli import embedded, ledger, observe, redelivery, statement
from ops.cli import send as send_command
from ops.cli.common import (
    DEFAULT_PORT,
    LOCAL_PROVIDER_APIS,
    add_api_type,
    add_endpoint_url,
)
from ops.cli.mistakes import MISTAKE, explained


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="umavez", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--debug", action="store_true", help="a traceback instead of the one-line error"
    )
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the embedded stack until Ctrl-C")
    serve.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="webhook front port; AWS (moto) on port+1, the fake provider APIs on port+2",
    )
    add_api_type(serve)
    serve.set_defaults(run=embedded.serve)

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
    size.add_argument(
        "--burst",
        type=int,
        metavar="N",
        help="queue N deliveries while process is down (a backlog), then drain and check",
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
    add_api_type(drill)  # the embedded stack's front; a deployed stack (--url) has its own
    drill.set_defaults(run=embedded.firedrill)

    show = commands.add_parser("show", help="inspect the tables")
    show_what = show.add_subparsers(dest="what", required=True)
    order = show_what.add_parser("order", help="an order, its effects and its outbox items")
    order.add_argument("order_id")
    order.add_argument(
        "--json", action="store_true", help="machine-readable output (fields in docs/operations.md)"
    )
    add_endpoint_url(order, "the deployed tables")
    order.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    order.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    order.set_defaults(run=ledger.show_order)

    for what, description in (
        ("waiting", "deliveries waiting for the order their payment belongs to"),
        ("unmatched", "money nobody could route: waited past the providers' retries"),
    ):
        parked = show_what.add_parser(what, help=description)
        parked.add_argument("--json", action="store_true", help="machine-readable output")
        add_endpoint_url(parked, "the deployed tables")
        parked.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
        parked.set_defaults(run=ledger.show_parked)
    embedded.add_show_metrics_parser(show_what)

    outbox = commands.add_parser("outbox", help="operate on outbox items (notifications)")
    outbox_what = outbox.add_subparsers(dest="outbox_command", required=True)
    revive = outbox_what.add_parser(
        "revive", help="dead notifications back to pending, same key: the sweeper sends them"
    )
    revive_which = revive.add_mutually_exclusive_group(required=True)
    revive_which.add_argument("outbox_id", nargs="?", help="one item (obx_...)")
    revive_which.add_argument("--all-dead", action="store_true", help="every dead item")
    revive.add_argument("--json", action="store_true", help="machine-readable output")
    add_endpoint_url(revive, "the deployed table")
    revive.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    revive.set_defaults(run=ledger.outbox_revive)

    attach = commands.add_parser(
        "attach", help="bind a waiting or unmatched payment to its order; it is then applied"
    )
    attach.add_argument("provider", choices=["stripe", "mercadopago", "asaas"])
    attach.add_argument("object", help="the provider object: pi_..., a payment id, pay_...")
    attach.add_argument("order_id")
    add_endpoint_url(attach)
    attach.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    attach.add_argument(
        "--queue-url", default=None, help="the webhook queue (default: the local stack's)"
    )
    attach.add_argument(
        "--force", action="store_true", help="bind even if no delivery waits for the object"
    )
    attach.set_defaults(run=ledger.attach)

    send = commands.add_parser(
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
    send.add_argument("event_file", type=Path)
    send.add_argument("--provider", default="stripe", choices=["stripe", "mercadopago", "asaas"])
    send.add_argument(
        "--url", default=None, help=f"default: http://127.0.0.1:{DEFAULT_PORT}/webhooks/PROVIDER"
    )
    send.add_argument("--secret", default=None, help="default: the local development secret")
    send.add_argument(
        "--via",
        default="webhook",
        choices=["webhook", "eventbridge"],
        help="Stripe: its webhook (default), or its EventBridge destination (the local bus "
        "at --endpoint-url)",
    )
    send.add_argument(
        "--thin",
        action="store_true",
        help="Stripe: send the thin event of EVENT_FILE (a snapshot event), its object "
        "registered with the fake Stripe API",
    )
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
    # By physical names only: `send` posts to the local front (or --url), whatever it reads.
    add_endpoint_url(
        send, "the deployed tables (with --ledger-table, --outbox-table)", by_name=False
    )
    send.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    send.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    send.set_defaults(run=send_command.send)

    observe.add_parsers(commands)
    redelivery.add_replay_parser(commands)
    redelivery.add_dlq_parser(commands)
    statement.add_parser(commands)
    preflight.add_parser(commands).set_defaults(run=preflight.command)

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
    cost.set_defaults(run=embedded.cost)

    capacity = commands.add_parser(
        "capacity", help="the load at a rate against each limit, and what saturates first"
    )
    capacity.add_argument("--rate", type=float, help="payments a second (the drill mix's)")
    capacity.add_argument("--burst", type=int, help="deliveries at once: the drain, what waits")
    capacity.add_argument("--json", action="store_true", help="machine-readable output")
    capacity.add_argument(
        "--measured",
        type=Path,
        default=Path("costmodel/measured.json"),
        help="`make cost` wrote it",
    )
    capacity.add_argument("--process-max-concurrency", type=int, help="default: the stack's, 5")
    capacity.add_argument("--ses-send-rate", type=float, help="default: 14 a second")
    capacity.add_argument("--account-concurrency", type=float, help="default: 1,000")
    capacity.add_argument("--docs", type=Path, help="rewrite this page's capacity section")
    capacity.add_argument("--readme", type=Path, help="rewrite this file's capacity summary")
    capacity.set_defaults(run=capacity_command.run)

    # --debug anywhere on the line (before or after the command)
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words
    args = parser.parse_args([w for w in words if w != "--debug"])
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        if getattr(args, "stack_name", None) and args.command != "preflight":
            stack.resolve(args)
        return run(args)
    except Exception as exc:
        # The commands that run a stack of their own (serve, firedrill, cost) have no
        # operator's mistake to explain: what fails there is a defect, with its traceback.
        runs_its_own_stack = args.command in {"serve", "firedrill", "cost"}
        line = None if debug or runs_its_own_stack else explained(exc)
        if line is None:
            raise  # a defect, or --debug: the traceback is what helps
        print(f"umavez {args.command}: {line}", file=sys.stderr)
        return MISTAKE
