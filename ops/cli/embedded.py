"""The local commands: `serve`, `firedrill`, `cost`, `show metrics`. They load the embedded
stack, the drill and the cost model through `ops.local`, the one door to them; their parsers
load none of it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE, TableNames
from ops.cli.common import DEFAULT_PORT, add_api_type
from ops.console import warnings_to_log


def add_serve_parser(commands: Any) -> None:
    parser = commands.add_parser("serve", help="run the embedded stack until Ctrl-C")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help="webhook front port; AWS (moto) on port+1, the fake provider APIs on port+2",
    )
    add_api_type(parser)
    parser.set_defaults(run=serve)


def add_firedrill_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "firedrill", help="deliver like providers do and check every guarantee"
    )
    size = parser.add_mutually_exclusive_group()
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
    parser.add_argument("--rate", type=float, default=5.0, help="a soak's deliveries per second")
    parser.add_argument(
        "--no-faults", action="store_true", help="no injected crashes, conflicts or sink failures"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--url", help="a deployed stack's API URL (…/live): drill it instead")
    parser.add_argument(
        "--secret", action="append", default=[], help="PROVIDER=SECRET, per provider"
    )
    parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    parser.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    parser.add_argument("--region", default=None)
    add_api_type(parser)  # the embedded stack's front; a deployed stack (--url) has its own
    parser.set_defaults(run=firedrill)


def add_cost_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "cost", help="measure the cost per million events on the embedded stack (minutes)"
    )
    parser.add_argument("--orders", type=int, default=52, help="the drill's mix: orders (0: none)")
    parser.add_argument("--per-kind", type=int, default=20, help="deliveries per event kind")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--readme", type=Path, help="rewrite this file's cost section")
    parser.add_argument("--json", type=Path, help="write the raw measurement here")
    parser.add_argument(
        "--from-json", type=Path, help="price a measurement --json wrote (no stack, seconds)"
    )
    parser.add_argument(
        "--xray-sampling",
        type=float,
        help="share of invocations traced (default: costmodel/prices.toml, 0.05)",
    )
    parser.set_defaults(run=cost)


def add_show_metrics_parser(show_what: Any) -> None:
    """`show metrics`: its options without loading the embedded stack to build the parser."""
    parser = show_what.add_parser(
        "metrics", help="the local stack's metrics: sum per function and metric (.local/metrics)"
    )
    parser.add_argument(
        "--dir", type=Path, default=Path(".local/metrics"), help="default: .local/metrics"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(run=show_metrics)


def show_metrics(args: argparse.Namespace) -> int:
    from ops.local import show_metrics as show

    return show(args)


def cost(args: argparse.Namespace) -> int:
    from ops.local import CostOptions, run_cost

    chosen = ("orders", "per_kind", "seed", "readme", "json", "from_json", "xray_sampling")
    return run_cost(CostOptions(**{name: getattr(args, name) for name in chosen}))


def firedrill(args: argparse.Namespace) -> int:
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
    """--orders, --soak (at --rate), --burst or --deliveries: 1,000 deliveries when none is
    given."""
    from ops.local import DEFAULT_DELIVERIES, embedded_drain_seconds

    if args.burst is not None:
        return {"deliveries": args.burst, "burst": True, "predict_drain": embedded_drain_seconds}
    if args.orders is not None:
        return {"orders": args.orders}
    if args.soak is not None:
        return {"soak_minutes": args.soak, "rate": args.rate}
    return {"deliveries": args.deliveries or DEFAULT_DELIVERIES}


def serve(args: argparse.Namespace) -> int:
    port, api_type = args.port, args.api_type
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
