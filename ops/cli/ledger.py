"""The ledger's commands: `show order|waiting|unmatched`, `attach`, `outbox revive`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE, TableNames
from ops.cli.common import add_endpoint_url

if TYPE_CHECKING:
    from functions.process.waiting import Waiting
    from functions.shared.items import Entry, FeeLine, Parked
    from ops.state import OrderView

# Deliveries to each local sink, per outbox item.
SinkCounts = dict[str, dict[str, int]]


def add_show_order_parser(show_what: Any) -> None:
    parser = show_what.add_parser("order", help="an order, its effects and its outbox items")
    parser.add_argument("order_id")
    parser.add_argument(
        "--json", action="store_true", help="machine-readable output (fields in docs/operations.md)"
    )
    add_endpoint_url(parser, "the deployed tables")
    parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    parser.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    parser.set_defaults(run=show_order)


def add_show_parked_parsers(show_what: Any) -> None:
    """`show waiting` and `show unmatched`: the two shelves of parked deliveries."""
    for what, description in (
        ("waiting", "deliveries waiting for the order their payment belongs to"),
        ("unmatched", "money nobody could route: waited past the providers' retries"),
    ):
        parser = show_what.add_parser(what, help=description)
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_endpoint_url(parser, "the deployed tables")
        parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
        parser.set_defaults(run=show_parked)


def add_outbox_parser(commands: Any) -> None:
    outbox = commands.add_parser("outbox", help="operate on outbox items (notifications)")
    outbox_what = outbox.add_subparsers(dest="outbox_command", required=True)
    revive = outbox_what.add_parser(
        "revive",
        help="dead notifications (or one sent without the e-mail it is owed) back to pending, "
        "same key: the sweeper sends them",
    )
    revive_which = revive.add_mutually_exclusive_group(required=True)
    revive_which.add_argument("outbox_id", nargs="?", help="one item (obx_...)")
    revive_which.add_argument("--all-dead", action="store_true", help="every dead item")
    revive.add_argument("--json", action="store_true", help="machine-readable output")
    add_endpoint_url(revive, "the deployed table")
    revive.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    revive.set_defaults(run=outbox_revive)


def add_attach_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "attach", help="bind a waiting or unmatched payment to its order; it is then applied"
    )
    parser.add_argument("provider", choices=["stripe", "mercadopago", "asaas"])
    parser.add_argument("object", help="the provider object: pi_..., a payment id, pay_...")
    parser.add_argument("order_id")
    add_endpoint_url(parser)
    parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    parser.add_argument(
        "--queue-url", default=None, help="the webhook queue (default: the local stack's)"
    )
    parser.add_argument(
        "--force", action="store_true", help="bind even if no delivery waits for the object"
    )
    parser.set_defaults(run=attach)


def _waiting_room(endpoint_url: str, ledger_table: str, queue_url: str | None) -> Waiting:
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


def show_parked(args: argparse.Namespace) -> int:
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


def outbox_revive(args: argparse.Namespace) -> int:
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
        handed_back = (ReviveResult.REVIVED, ReviveResult.REOPENED)
        print(f"{sum(r.result in handed_back for r in report)} revived")
        for r in report:
            detail = (
                f"died {iso_time(r.died_at or 0)} after {r.attempts} attempts: {r.last_error}"
                if r.result is ReviveResult.REVIVED
                else "sent without its e-mail: the sweeper e-mails it"
                if r.result is ReviveResult.REOPENED
                else f"status {r.status}"
                if r.result is ReviveResult.NOT_DEAD
                else "no such item"
            )
            print(f"  {r.result.value:<9} {r.outbox_id}  {detail}")
    if args.all_dead:
        return 0
    return 0 if report[0].result in (ReviveResult.REVIVED, ReviveResult.REOPENED) else 1


def attach(args: argparse.Namespace) -> int:
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


def show_order(args: argparse.Namespace) -> int:
    import boto3

    from ops.local import SINK_TABLE, client, sink_counts
    from ops.state import order_view

    local = args.endpoint_url != "aws"
    dynamodb: Any = client("dynamodb", args.endpoint_url) if local else boto3.client("dynamodb")
    view = order_view(dynamodb, TableNames(args.ledger_table, args.outbox_table), args.order_id)
    sinks = sink_counts(args.endpoint_url) if local and _has_table(dynamodb, SINK_TABLE) else {}
    # Only the local stack's sinks count what they received.
    report = _order_report(args.order_id, view, sinks if local else None)
    if not view.order and not view.effects:
        print(f"no order {args.order_id!r}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(report, indent=2, default=str))
        return 0
    _print_order(report)
    return 0


def _order_report(order_id: str, view: OrderView, sinks: SinkCounts | None) -> dict[str, Any]:
    """The order as `show order --json` prints it (fields in docs/operations.md)."""
    order = view.books
    return {
        "order_id": order_id,
        "status": order.financial_status.value,
        "lifecycle_status": order.lifecycle_status,
        "currency": order.currency or "",
        "recipient": order.recipient,
        "totals": {t.value.removesuffix("_total"): n for t, n in order.totals.items()},
        "last_event_at": order.last_event_at,
        "last_event_id": order.last_event_id,
        # What the provider kept and paid out, from its statement (None until it was read),
        # in the account's settlement currency.
        "fee_total": order.fee_total,
        "net_total": order.net_total,
        "settlement_currency": order.settlement_currency,
        "statement_lines": _statement_lines(view.fees),
        "effects": _effect_rows(view.effects),
        "outbox": _outbox_rows(view.outbox, sinks),
    }


def _statement_lines(fees: list[FeeLine]) -> list[dict[str, Any]]:
    return [
        {"line": f.line, "category": f.category, "fee": f.fee, "net": f.net, "currency": f.currency}
        for f in sorted(fees, key=lambda f: (f.line_created or 0, f.line))
    ]


_EFFECT_FIELDS = (
    "effect_key",
    "transition",
    "outcome",
    "external_ref",
    "payment",
    "amount",
    "event_id",
    "event_type",
    "via",
)


def _effect_rows(effects: list[Entry]) -> list[dict[str, Any]]:
    """In the order they were applied."""
    return [
        {k: getattr(e, k) for k in _EFFECT_FIELDS}
        for e in sorted(effects, key=lambda e: (e.ordering_token or 0, e.effect_key))
    ]


def _outbox_rows(outbox: list[dict[str, Any]], sinks: SinkCounts | None) -> list[dict[str, Any]]:
    """Each item with its deliveries to the local sinks (None when there are no local sinks)."""
    return [
        {
            "outbox_id": i["outbox_id"],
            "transition": i["transition"],
            "status": i["status"],
            "late": bool(i.get("late")),
            "attempts": i.get("attempts", 0),
            "sink_deliveries": sinks.get(i["outbox_id"]) if sinks is not None else None,
        }
        for i in outbox
    ]


def _print_order(report: dict[str, Any]) -> None:
    from functions.shared.money import render as render_money

    currency = report["currency"]
    totals = ", ".join(
        f"{name} {render_money(amount, currency)}"
        for name, amount in report["totals"].items()
        if amount
    )
    print(f"order {report['order_id']}: {report['status']}  ({totals or 'nothing counted'})")
    print(f"  lifecycle {report['lifecycle_status']}, customer {report['recipient']}")
    print(f"  last event {report['last_event_id']} (token {report['last_event_at']})")
    if report["fee_total"] is not None:
        settled = str(report["settlement_currency"] or currency)
        print(
            f"  provider fees {render_money(int(report['fee_total']), settled)}, net "
            f"{render_money(int(report['net_total']), settled)} "
            f"({len(report['statement_lines'])} statement lines)"
        )
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


def _has_table(dynamodb: Any, name: str) -> bool:
    return name in dynamodb.list_tables().get("TableNames", [])


def describe(item: Parked, now: float) -> dict[str, Any]:
    """One waiting or unmatched delivery, for the CLI and logs (the raw body left out)."""
    return {
        "provider": item.provider,
        "event_id": item.event_id,
        "event_type": item.event_type,
        "waits_for": item.objects,
        "transition": item.transition,
        "object": item.external_ref,
        "amount": item.amount,
        "currency": item.currency,
        "waiting_seconds": int(now - item.waiting_since),
        "unmatched_at": item.unmatched_at,
        "raw_event": json.loads(item.body) if item.body else None,
    }
