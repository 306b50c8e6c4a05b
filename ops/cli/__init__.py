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
from typing import Any

from ops import preflight, stack
from ops.cli import capacity as capacity_command
from ops.cli import embedded, ledger, observe, redelivery, statement
from ops.cli import send as send_command
from ops.cli.mistakes import MISTAKE, explained


def main(argv: Sequence[str] | None = None) -> int:
    # --debug anywhere on the line (before or after the command)
    words = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in words
    args = build_parser().parse_args([w for w in words if w != "--debug"])
    return _run(args, debug=debug)


def build_parser() -> argparse.ArgumentParser:
    """Every command's options; each group's module adds its own, in the order help lists them."""
    parser = argparse.ArgumentParser(
        prog="umavez", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--debug", action="store_true", help="a traceback instead of the one-line error"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    embedded.add_serve_parser(commands)
    embedded.add_firedrill_parser(commands)
    _add_show_parser(commands)
    ledger.add_outbox_parser(commands)
    ledger.add_attach_parser(commands)
    send_command.add_parser(commands)
    observe.add_parsers(commands)
    redelivery.add_replay_parser(commands)
    redelivery.add_dlq_parser(commands)
    statement.add_parser(commands)
    preflight.add_parser(commands).set_defaults(run=preflight.command)
    embedded.add_cost_parser(commands)
    capacity_command.add_parser(commands)
    return parser


def _add_show_parser(commands: Any) -> None:
    show = commands.add_parser("show", help="inspect the tables")
    show_what = show.add_subparsers(dest="what", required=True)
    ledger.add_show_order_parser(show_what)
    ledger.add_show_parked_parsers(show_what)
    embedded.add_show_metrics_parser(show_what)


def _run(args: argparse.Namespace, *, debug: bool) -> int:
    """The command, its stack found first when named; an operator's mistake as one line."""
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
