"""`statement`: a window of a provider's own books read back, booked and matched to the ledger
(functions/statement/). Exit 0 when the books agree, 1 when a mismatch needs a person (or the
read stopped), 2 when nothing could be read."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE
from ops.cli.common import (
    LOCAL_PROVIDER_APIS,
    add_endpoint_url,
    add_provider_api_options,
    operations_client,
)
from ops.cli.redelivery import secret_reader

if TYPE_CHECKING:
    from functions.statement.lines import Line

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
    from functions.process.asaas_api import BASE_URL as ASAAS_BASE_URL
    from functions.process.asaas_api import AsaasApi, AsaasApiNotConfiguredError
    from functions.process.mercadopago_api import BASE_URL as MERCADOPAGO_BASE_URL
    from functions.process.mercadopago_disputes import LedgerDisputes
    from functions.process.service import EffectProcessor
    from functions.process.stripe_api import BASE_URL as STRIPE_BASE_URL
    from functions.shared.providers.asaas import BRAZIL
    from functions.shared.tables import TableNames
    from functions.statement import asaas, mercadopago, stripe
    from functions.statement.asaas import AsaasStatement
    from functions.statement.reading import (
        StatementInterruptedError,
        StatementNotConfiguredError,
    )
    from functions.statement.service import StatementPass
    from ops.replay import ReplayRefusedError, Window

    local = args.endpoint_url != "aws"
    now = time.time()
    try:
        window = Window.parse(args.since, args.until or _iso(now - stripe.SETTLE_SECONDS), now)
    except ReplayRefusedError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    secret = secret_reader(args.endpoint_url, args.stage or ("local" if local else "prod"))
    credential = secret(PROVIDERS[args.provider][1])
    default_api = {
        "stripe": STRIPE_BASE_URL,
        "mercadopago": MERCADOPAGO_BASE_URL,
        "asaas": ASAAS_BASE_URL,
    }[args.provider]
    base_url = args.api_url or (LOCAL_PROVIDER_APIS if local else default_api)
    since, until = int(window.since.timestamp()), int(window.until.timestamp())
    dynamodb = operations_client("dynamodb", args.endpoint_url)
    names = TableNames(ledger=args.ledger_table, outbox=args.outbox_table)
    disputes = LedgerDisputes(dynamodb, names.ledger)
    # The lines are read already: the processor books them and interprets nothing itself.
    passing = StatementPass(dynamodb, names, EffectProcessor(dynamodb, names, time.time), time.time)
    first, last = passing.read_window(since, until)
    lines: list[Line] = []
    known = None
    try:
        if args.provider == "stripe":
            balance = stripe.StripeBalance(credential, time.sleep, base_url)
            for page in balance.pages(first, min(last, int(now)), args.starting_after):
                lines += map(stripe.line_of, page.lines)
        elif args.provider == "mercadopago":
            # Every payment updated since the window began, up to now: a payment booked in the
            # window and changed after it is listed by its last update only.
            search = mercadopago.MercadoPagoPaymentsSearch(credential, time.sleep, base_url)
            for found in search.pages(_instant(first), _instant(now)):
                lines += mercadopago.payment_lines(found.payments, disputes)
        else:
            # Asaas's statement is by day (Brazil's): every day from the window's first on.
            api = AsaasApi(credential, base_url)
            days = AsaasStatement(api, time.sleep).pages(
                _instant(first).astimezone(BRAZIL).date(), _instant(now).astimezone(BRAZIL).date()
            )
            transactions = [t for page in days for t in page.transactions]
            lines = asaas.statement_lines(transactions, api.payment)
            known = asaas.known_to_asaas(api.payment)
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
    report = passing.run(args.provider, lines, since, until, known)
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
