#!/usr/bin/env python3
"""`make histories`: the books against the provider simulators, at scale.

Runs the history property (tests/functional/test_histories.py) in one worker per core, each on
its own hypothesis seed, until at least `--histories` were checked, and prints how many were,
the seeds and the time.
A failure prints the worker's output: the shortest history that reproduces it, as steps of the
state machine, ready to paste into a regression test.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


# Hypothesis checks more histories than the examples it is asked for (it also runs the ones
# it abandons: about 1.4 per example here); asked this many fewer, a worker rarely overshoots.
CHECKED_PER_EXAMPLE = 1.3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=10_000, help="at least this many")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    started = time.monotonic()
    shares = [
        args.histories // args.workers + (n < args.histories % args.workers)
        for n in range(args.workers)
    ]
    with tempfile.TemporaryDirectory() as reports, ThreadPoolExecutor(args.workers) as pool:
        results = list(
            pool.map(
                lambda n: _worker(n, shares[n], args.seed + n, Path(reports)), range(args.workers)
            )
        )
    failed = [log for _, log in results if log is not None]
    for log in failed:
        print(log)
    checked = sum(count for count, _ in results)
    seeds = f"{args.seed}..{args.seed + args.workers - 1}"
    elapsed = time.monotonic() - started
    verdict = "FAILED" if failed else "0 violations"
    print(
        f"histories: {checked} checked in {elapsed:.0f} s by {args.workers} workers,"
        f" hypothesis seeds {seeds} (a worker's further runs: +1000 each): {verdict}"
    )
    return 1 if failed else 0


def _worker(n: int, share: int, seed: int, reports: Path) -> tuple[int, str | None]:
    """Runs the property until it has checked `share` histories (a first run asked for fewer
    examples than that, then runs for what is left, each on the next seed); returns the count
    and, if one failed, the end of its output."""
    checked, run = 0, 0
    while checked < share:
        examples = max(1, math.ceil((share - checked) / CHECKED_PER_EXAMPLE))
        report = reports / f"worker-{n}-{run}"
        environment = {
            **os.environ,
            "UMAVEZ_HISTORIES": str(examples),
            "UMAVEZ_HISTORIES_SEED": str(seed + 1000 * run),
            "UMAVEZ_HISTORIES_REPORT": str(report),
            # Thousands of histories: the functions' INFO lines and EMF blobs only slow them
            # down (a failure prints its history and violations anyway).
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        command = [
            sys.executable,
            *("-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:logging"),
            *("-p", "no:cacheprovider", f"--hypothesis-seed={seed + 1000 * run}"),
            "tests/functional/test_histories.py",
        ]
        done = subprocess.run(
            command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False
        )
        if report.exists():
            checked += int(report.read_text())
        if done.returncode != 0:
            return checked, _failure(done.stdout + done.stderr)
        run += 1
    return checked, None


def _failure(output: str) -> str:
    """The end of a failed run's output, without the metrics blobs (one JSON line per
    function call, `"_aws"`) that would push the history and its violations out of it."""
    kept = [line for line in output.splitlines() if '"_aws"' not in line]
    return "\n".join(kept)[-20_000:]


if __name__ == "__main__":
    sys.exit(main())
