"""The drill's report: the facts of the run, then one line per guarantee, PASS or FAIL."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from devstack.drain import Drained
from devstack.metrics_report import by_function
from devstack.stack import EmbeddedStack, StageTimes
from firedrill.checks import Check
from firedrill.delivery import DeliveryLog
from firedrill.story import Story
from ops.state import LedgerState


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
    drains: Sequence[Drained],
    steps: dict[str, float],
) -> dict[str, Any]:
    effects = [e for v in state.orders.values() for e in v.effects]
    process: Counter[str] = sum((p.stats for p in stack.process_pollers), start=Counter())
    delivering = steps.get("delivering", 0.0)
    return {
        "orders (stories)": f"{len(drill)} across {len({s.kind for s in drill})} kinds",
        "deliveries (HTTP attempts)": deliveries_line(log),
        "delivery rate": f"{log.attempts / max(delivering, 1e-9):.1f} deliveries/s "
        f"({log.attempts} in {delivering:.1f} s)",
        "provider retries": log.retries,
        "effects": ", ".join(
            f"{n} {outcome}" for outcome, n in Counter(e.outcome for e in effects).items()
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
        **stage_facts(stack.stage_times),
        "drains": drains_line(drains),
        "time": ", ".join(f"{name} {seconds:.1f} s" for name, seconds in steps.items()),
        # Sums of each function's metrics, as written to .local/metrics (`umavez show metrics`).
        **{f"metrics: {f}": line for f, line in by_function(stack.metrics.totals()).items()},
    }


STAGES = ("ingest", "process", "outbox")


def stage_facts(times: StageTimes) -> dict[str, str]:
    """Per stage (then the scheduled functions): invocations, records and wall-clock time."""
    facts = {}
    names = [*STAGES, *sorted(set(times.stages) - set(STAGES))]
    for name in names:
        stage = times.stages.get(name)
        if stage is None or not stage.invocations:
            continue
        per = stage.seconds / max(stage.records, 1) * 1000
        unit = "request" if name == "ingest" else "record"
        facts[f"stage: {name}"] = (
            f"{stage.seconds:.1f} s in {stage.invocations} invocations, "
            f"{stage.records} {unit}s ({per:.0f} ms a {unit})"
        )
    return facts


def drains_line(drains: Sequence[Drained]) -> str:
    """Each drain: how long it took next to what it was allowed (proportional to its work)."""
    parts = []
    for drained in drains:
        waits = ", waits let pass" if drained.waits_let_pass else ""
        state = "quiet" if drained else f"GAVE UP with {drained.left}"
        parts.append(
            f"{drained.seconds:.0f} s of {drained.bound_seconds:.0f} s allowed "
            f"(peak {drained.peak} in flight{waits}): {state}"
        )
    return "; ".join(parts)


def server_facts(stats: dict[str, Any], top: int = 6) -> dict[str, str]:
    """The local AWS server's requests per service, its costliest operations first: where a
    local run's time goes (every request holds the server's one lock)."""
    by_service: dict[str, list[tuple[str, int, float]]] = {}
    for name, (count, seconds) in stats.get("calls", {}).items():
        service, _, operation = name.partition(" ")
        by_service.setdefault(service, []).append((operation, int(count), float(seconds)))
    total_requests = sum(c for calls in by_service.values() for _, c, _ in calls)
    total_seconds = sum(t for calls in by_service.values() for _, _, t in calls)
    facts = {"server requests": f"{total_requests} in {total_seconds:.1f} s under its lock"}
    ranked = sorted(by_service.items(), key=lambda kv: -sum(t for _, _, t in kv[1]))
    for service, calls in ranked:
        calls.sort(key=lambda call: -call[2])
        shown = ", ".join(f"{op} {n} ({t:.1f} s)" for op, n, t in calls[:top])
        more = f", {len(calls) - top} more" if len(calls) > top else ""
        facts[f"server: {service}"] = shown + more
    return facts
