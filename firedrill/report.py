"""The drill's report: the facts of the run, then one line per guarantee, PASS or FAIL."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from firedrill.checks import Check
from firedrill.delivery import DeliveryLog
from firedrill.stories import Story
from local_stack.metrics_report import by_function
from local_stack.stack import EmbeddedStack
from local_stack.state import LedgerState


def render(checks: Sequence[Check], facts: dict[str, Any], stream: TextIO = sys.stdout) -> None:
    width = max(len(c.name) for c in checks) + 2
    stream.write("\n  fire drill\n  " + "-" * (width + 50) + "\n")
    for name, value in facts.items():
        stream.write(f"  {name:<{width}}{value}\n")
    stream.write("  " + "-" * (width + 50) + "\n")
    for check in checks:
        mark = "PASS" if check.ok else "FAIL"
        stream.write(f"  {mark}  {check.name:<{width}}{check.detail}\n")
    verdict = "every guarantee held" if all(c.ok for c in checks) else "GUARANTEES VIOLATED"
    stream.write("  " + "-" * (width + 50) + f"\n  {verdict}\n")


def deliveries_line(log: DeliveryLog) -> str:
    answers = ", ".join(f"{k or 'timeout'}x{v}" for k, v in sorted(log.by_status.items()))
    return f"{log.attempts}: {answers}"


def embedded_facts(
    faults: bool,
    drill: Sequence[Story],
    log: DeliveryLog,
    stack: EmbeddedStack,
    state: LedgerState,
    elapsed: float,
) -> dict[str, Any]:
    effects = [e for v in state.orders.values() for e in v.effects]
    process: Counter[str] = sum((p.stats for p in stack.process_pollers), start=Counter())
    return {
        "orders (stories)": f"{len(drill)} across {len({s.kind for s in drill})} kinds",
        "deliveries (HTTP attempts)": deliveries_line(log),
        "provider retries": log.retries,
        "effects": ", ".join(
            f"{n} {outcome}" for outcome, n in Counter(e["outcome"] for e in effects).items()
        ),
        "faults injected": (
            f"{stack.aws.stats()['conflicts_injected']} transaction conflicts, "
            f"{process['crashed_before_delete']} crashes before SQS delete, "
            f"{stack.faults.channel_failures:.0%} of sends failing, "
            f"{stack.faults.crash_after_send:.0%} crashing after the send"
            if faults
            else "none"
        ),
        "process records (with redeliveries)": process["records"],
        # Sums of each function's metrics, as written to .local/metrics (`umavez show metrics`).
        **{f"metrics: {f}": line for f, line in by_function(stack.metrics.totals()).items()},
        "elapsed": f"{elapsed:.1f} s",
    }
