"""`umavez capacity`: the load at a rate of payments a second against each component's limit,
and what saturates first (costmodel/headroom.py, reached through `ops.local`)."""

from __future__ import annotations

import argparse


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
