#!/usr/bin/env python3
"""`make histories`: the books against the provider simulators, at scale.

Runs the history property (tests/functional/test_histories.py) in one worker per core, each on
its own hypothesis seed, and prints how many histories were checked, the seeds and the time.
A failure prints the worker's output: the shortest history that reproduces it, as steps of the
state machine, ready to paste into a regression test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as reports:
        workers = []
        for n in range(args.workers):
            share = args.histories // args.workers + (n < args.histories % args.workers)
            report = Path(reports) / f"worker-{n}"
            environment = {
                **os.environ,
                "UMAVEZ_HISTORIES": str(share),
                "UMAVEZ_HISTORIES_SEED": str(args.seed + n),
                "UMAVEZ_HISTORIES_REPORT": str(report),
                # Thousands of histories: the functions' INFO lines and EMF blobs only slow
                # them down (a failure prints its history and violations anyway).
                "POWERTOOLS_LOG_LEVEL": "WARNING",
                "POWERTOOLS_METRICS_DISABLED": "true",
            }
            command = [
                sys.executable,
                *(
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:randomly",
                    "-p",
                    "no:logging",
                    "-p",
                    "no:cacheprovider",
                ),
                f"--hypothesis-seed={args.seed + n}",
                "tests/functional/test_histories.py",
            ]
            log = Path(reports) / f"worker-{n}.log"
            with log.open("w") as out:
                process = subprocess.Popen(
                    command, cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT
                )
            workers.append((process, report, log))
        failed = False
        checked = 0
        for process, report, log in workers:
            if process.wait() != 0:
                failed = True
                print(log.read_text()[-20_000:])
            if report.exists():
                checked += int(report.read_text())
    seeds = f"{args.seed}..{args.seed + args.workers - 1}"
    elapsed = time.monotonic() - started
    verdict = "FAILED" if failed else "0 violations"
    print(
        f"histories: {checked} checked in {elapsed:.0f} s by {args.workers} workers,"
        f" hypothesis seeds {seeds}: {verdict}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
