"""`umavez capacity`: the load at a rate of payments a second against each component's limit,
and what saturates first (costmodel/headroom.py, reached through `ops.local`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "capacity", help="the load at a rate against each limit, and what saturates first"
    )
    parser.add_argument("--rate", type=float, help="payments a second (the drill mix's)")
    parser.add_argument("--burst", type=int, help="deliveries at once: the drain, what waits")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument(
        "--measured",
        type=Path,
        default=Path("costmodel/measured.json"),
        help="`make cost` wrote it",
    )
    parser.add_argument("--process-max-concurrency", type=int, help="default: the stack's, 5")
    parser.add_argument("--ses-send-rate", type=float, help="default: 14 a second")
    parser.add_argument("--account-concurrency", type=float, help="default: 1,000")
    parser.add_argument("--docs", type=Path, help="rewrite this page's capacity section")
    parser.add_argument("--readme", type=Path, help="rewrite this file's capacity summary")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ops.local import CapacityOptions, run_capacity

    if args.rate is None and args.docs is None and args.readme is None:
        print("umavez capacity: give --rate R (payments a second), or --docs/--readme")
        return 2
    # The measurement `make cost` committed, unless another is named.
    measured = {"measured": args.measured} if args.measured else {}
    return run_capacity(
        CapacityOptions(
            rate=args.rate,
            burst=args.burst,
            json=args.json,
            docs=args.docs,
            readme=args.readme,
            process_max_concurrency=args.process_max_concurrency,
            ses_send_rate=args.ses_send_rate,
            account_concurrency=args.account_concurrency,
            **measured,
        )
    )
