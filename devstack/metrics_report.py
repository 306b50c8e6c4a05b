"""Reading the local stack's metrics files (`.local/metrics/<function>.jsonl`, EMF one document
a line): sums per function and metric, for the drill's report and `umavez show metrics`."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

METRICS_DIR = Path(".local/metrics")
Totals = Counter[tuple[str, str]]  # (function, metric) -> sum of its values


def add_document(totals: Totals, function: str, document: Mapping[str, Any]) -> None:
    """Adds the values of one EMF document's metrics to `totals`, under `function`."""
    for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
        for metric in directive.get("Metrics", []):
            value = document.get(metric["Name"], 0)
            values = value if isinstance(value, list) else [value]
            totals[(function, metric["Name"])] += sum(values)


def read_totals(directory: Path = METRICS_DIR) -> tuple[Totals, dict[str, set[str]]]:
    """Sums per function and metric from the files, and the `service` each file names."""
    totals: Totals = Counter()
    services: dict[str, set[str]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        services[path.stem] = set()
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            document = json.loads(line)
            services[path.stem].add(str(document.get("service")))
            add_document(totals, path.stem, document)
    return totals, services


def by_function(totals: Totals) -> dict[str, str]:
    """One line per function: its metrics with their sums (zero sums left out)."""
    lines: dict[str, list[str]] = {}
    for (function, metric), value in sorted(totals.items()):
        if value:
            lines.setdefault(function, []).append(f"{_number(value)} {metric}")
    return {function: ", ".join(parts) for function, parts in lines.items()}


def table(totals: Totals) -> Iterable[str]:
    rows = [(f, m, _number(v)) for (f, m), v in sorted(totals.items())]
    widths = [max(len(r[i]) for r in [("function", "metric", "sum"), *rows]) for i in range(3)]
    for function, metric, value in [("function", "metric", "sum"), *rows]:
        yield f"{function:<{widths[0]}}  {metric:<{widths[1]}}  {value:>{widths[2]}}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


# -- umavez show metrics ------------------------------------------------------------------------


def show(args: argparse.Namespace) -> int:
    totals, services = read_totals(args.dir)
    if not services:
        print(f"no metrics in {args.dir} (run `umavez firedrill` or `umavez serve` first)")
        return 1
    if args.json:
        rows = [{"function": f, "metric": m, "sum": v} for (f, m), v in sorted(totals.items())]
        print(json.dumps(rows, indent=2))
        return 0
    for line in table(totals):
        print(line)
    return 0
