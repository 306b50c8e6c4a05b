"""`statement`: a window of a provider's own books read back, booked and matched to the ledger
(functions/statement/). Exit 0 when the books agree, 1 when a mismatch needs a person (or the
read stopped), 2 when nothing could be read."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE
from ops.cli.common import (
    LOCAL_PROVIDER_APIS,
    add_endpoint_url,
    add_provider_api_options,
    operations_client,
)
from ops.cli.redelivery import secret_reader

PROVIDERS = {
    "stripe": ("Stripe's balance transactions", "stripe/api-key"),
    "mercadopago": ("Mercado Pago's payments, by their last update", "mercadopago/access-token"),
    "asaas": ("Asaas's financial transactions, and the payments they name", "asaas/api-key"),
}


def add_parser(commands: Any) -> None:
    statement = commands.add_parser(
        "statement",
        help="read a window of the provider's books: book what deliveries missed, report "
        "every mismatch, record fees and net",
    )
    providers = statement.add_subparsers(dest="provider", required=True)
    for provider, (description, _) in PROVIDERS.items():
        parser = providers.add_parser(provider, help=description)
        parser.add_argument("--since", required=True, help="ISO 8601, inclusive (UTC if no zone)")
        parser.add_argument(
            "--until", default=None, help="ISO 8601, exclusive; default: now less the settle margin"
        )
        if provider == "stripe":
            parser.add_argument(
                "--starting-after", default=None, help="resume after this line (txn_…)"
            )
        parser.add_argument("--json", action="store_true", help="machine-readable output")
        add_endpoint_url(parser)
        parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
        parser.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
        add_provider_api_options(parser)
        parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from functions.asaas.api import AsaasApiNotConfiguredError
    from functions.process.mercadopago_disputes import LedgerDisputes
    from functions.process.service import EffectProcessor
    from functions.shared.tables import TableNames
    from functions.statement.reading import (
        StatementInterruptedError,
        StatementNotConfiguredError,
    )
    from functions.statement.service import StatementPass
    from functions.statement.sources import DEFAULT_API_URLS, SETTLE_SECONDS, StatementSource
    from ops.replay import ReplayRefusedError, Window

    local = args.endpoint_url != "aws"
    now = time.time()
    default_until = _iso(now - SETTLE_SECONDS[args.provider])
    try:
        window = Window.parse(args.since, args.until or default_until, now)
    except ReplayRefusedError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    secret = secret_reader(args.endpoint_url, args.stage or ("local" if local else "prod"))
    base_url = args.api_url or (LOCAL_PROVIDER_APIS if local else DEFAULT_API_URLS[args.provider])
    since, until = int(window.since.timestamp()), int(window.until.timestamp())
    dynamodb = operations_client("dynamodb", args.endpoint_url)
    names = TableNames(ledger=args.ledger_table, outbox=args.outbox_table)
    source = StatementSource(
        args.provider,
        secret(PROVIDERS[args.provider][1]),
        base_url,
        time.sleep,
        LedgerDisputes(dynamodb, names.ledger),
    )
    # The lines are read already: the processor books them and interprets nothing itself.
    passing = StatementPass(dynamodb, names, EffectProcessor(dynamodb, names, time.time), time.time)
    first, last = passing.read_window(since, until)
    try:
        read = source.read(first, last, int(now), getattr(args, "starting_after", None))
    except (StatementNotConfiguredError, AsaasApiNotConfiguredError, ReplayRefusedError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    except StatementInterruptedError as exc:
        # Nothing of a read that stopped is booked: it starts over (a line booked since is a
        # duplicate then), never from the cursor it stopped at.
        print(
            f"stopped: {exc}\nnothing was booked; run the same command again",
            file=sys.stderr,
        )
        return 1
    report = passing.run(args.provider, read.lines, since, until, read.known)
    print(json.dumps(report.to_json(), indent=2) if args.json else _summary(report.to_json()))
    return 1 if report.mismatches else 0


def _summary(report: dict[str, Any]) -> str:
    counts = ", ".join(f"{n} {kind}" for kind, n in report["mismatches"].items())
    lines = [
        f"{report['provider']} statement {report['since']} .. {report['until']}: "
        f"{report['lines_read']} lines, {report['movements']} moving an order's money",
        f"  booked now (no delivery had brought them): {report['booked']}",
        f"  already booked: {report['already_booked']}; pending: {report['pending']}; "
        f"fees recorded: {report['fees_recorded']}; entries checked: {report['entries_checked']}",
        f"  mismatches: {counts}",
        *(f"  found      {found}" for found in report["found"]),
        *(f"  {d['kind']:<26} {d['order_id'] or '-':<20} {d['detail']}" for d in report["details"]),
    ]
    return "\n".join(lines)


def _instant(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _iso(seconds: float) -> str:
    return _instant(seconds).isoformat(timespec="seconds")
