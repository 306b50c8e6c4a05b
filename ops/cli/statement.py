"""`statement`: a window of a provider's own books read back, booked and matched to the ledger
(functions/statement/). Exit 0 when the books agree, 1 when a mismatch needs a person, 2 when
nothing could be read."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE
from ops.cli.common import LOCAL_PROVIDER_APIS, add_endpoint_url, operations_client
from ops.cli.redelivery import secret_reader


def add_parser(commands: Any) -> None:
    statement = commands.add_parser(
        "statement",
        help="read a window of the provider's books: book what deliveries missed, report "
        "every mismatch, record fees and net",
    )
    providers = statement.add_subparsers(dest="provider", required=True)
    stripe = providers.add_parser("stripe", help="Stripe's balance transactions")
    stripe.add_argument("--since", required=True, help="ISO 8601, inclusive (UTC if no zone)")
    stripe.add_argument(
        "--until", default=None, help="ISO 8601, exclusive; default: now less the settle margin"
    )
    stripe.add_argument("--starting-after", default=None, help="resume after this line (txn_…)")
    stripe.add_argument("--json", action="store_true", help="machine-readable output")
    add_endpoint_url(stripe)
    stripe.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    stripe.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    stripe.add_argument(
        "--stage", default=None, help="secrets umavez/STAGE/...: default local, or prod on aws"
    )
    stripe.add_argument(
        "--api-url",
        default=None,
        help=f"Stripe's API (default: the real one; locally {LOCAL_PROVIDER_APIS})",
    )
    stripe.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from functions.process.service import EffectProcessor
    from functions.process.stripe_api import BASE_URL, StripeApi
    from functions.shared.providers import Interpreters
    from functions.shared.tables import TableNames
    from functions.statement.lines import Line
    from functions.statement.service import StatementPass
    from functions.statement.stripe import (
        SETTLE_SECONDS,
        StatementInterruptedError,
        StatementNotConfiguredError,
        StripeBalance,
        line_of,
    )
    from ops.replay import ReplayRefusedError, Window

    local = args.endpoint_url != "aws"
    now = time.time()
    try:
        window = Window.parse(args.since, args.until or _iso(now - SETTLE_SECONDS), now)
    except ReplayRefusedError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    key = secret_reader(args.endpoint_url, args.stage or ("local" if local else "prod"))(
        "stripe/api-key"
    )
    base_url = args.api_url or (LOCAL_PROVIDER_APIS if local else BASE_URL)
    since, until = int(window.since.timestamp()), int(window.until.timestamp())
    dynamodb = operations_client("dynamodb", args.endpoint_url)
    names = TableNames(ledger=args.ledger_table, outbox=args.outbox_table)
    processor = EffectProcessor(
        dynamodb,
        names,
        time.time,
        Interpreters.build(stripe_refunds=StripeApi(key, base_url).refunds_of_charge),
    )
    passing = StatementPass(dynamodb, names, processor, time.time)
    first, last = passing.read_window(since, until)
    lines: list[Line] = []
    try:
        for page in StripeBalance(key, time.sleep, base_url).pages(
            first, min(last, int(now)), args.starting_after
        ):
            lines += map(line_of, page.lines)
    except (StatementNotConfiguredError, ReplayRefusedError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    except StatementInterruptedError as exc:
        print(
            f"stopped: {exc}\nnothing was booked; run the same command again"
            + (f" with --starting-after {exc.resume}" if exc.resume else ""),
            file=sys.stderr,
        )
        return 1
    report = passing.run("stripe", lines, since, until)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        print(_summary(report.to_json()))
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


def _iso(seconds: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="seconds")
