"""The two commands. `umavez cost`: measure the scenarios on the embedded stack (or read a saved
measurement), price them, print the bill, rewrite a page's cost block if asked (`make cost`).
`umavez capacity`: the load at a rate against each limit, and the generated capacity sections
of docs/performance.md and the README (`make capacity`)."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

from costmodel import headroom_report as report
from costmodel.headroom import PerEvent, StackSettings, burst, model
from costmodel.markdown import replace_between
from costmodel.measurement import (
    MEASURED_PATH,
    CostOptions,
    Prices,
    Quotas,
    load_measurement,
    webhook_queue,
)
from costmodel.model import README_BEGIN, README_END, render_block, render_details
from costmodel.statement import statement_model


def run_cost(options: CostOptions, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Measure (or price `from_json`, no stack), print; save it and rewrite a page if asked."""
    prices = Prices.load()
    if options.xray_sampling is not None:
        prices.assumptions["xray_sampling"] = options.xray_sampling
    if options.from_json is None:
        from costmodel.scenarios import measure  # the embedded stack, only to measure

        measurement = measure(options, err)
    else:
        measurement = load_measurement(options.from_json)
    block = render_block(measurement, prices, webhook_queue())
    out.write("\n" + block + render_details(measurement, prices, webhook_queue()))
    out.write(f"Measured in {measurement.elapsed_seconds:.0f} s.\n")
    if options.json is not None and options.from_json is None:
        options.json.write_text(json.dumps(measurement.to_json(), indent=1))
    if options.readme is not None:
        _rewrite(options.readme, README_BEGIN, README_END, block)
        out.write(f"  {options.readme}: cost section rewritten\n")
    return 0


@dataclass(frozen=True)
class CapacityOptions:
    rate: float | None = None
    burst: int | None = None
    json: bool = False
    measured: Path = MEASURED_PATH
    docs: Path | None = None
    readme: Path | None = None
    process_max_concurrency: int | None = None
    ses_send_rate: float | None = None
    account_concurrency: float | None = None

    def settings(self) -> StackSettings:
        """The stack's defaults, but for what the options change."""
        concurrency = self.process_max_concurrency
        chosen = StackSettings() if concurrency is None else StackSettings(concurrency)
        return replace(
            chosen, ses_send_rate=self.ses_send_rate, account_concurrency=self.account_concurrency
        )


def _rewrite(path: Path, begin: str, end: str, block: str) -> None:
    path.write_text(replace_between(path.read_text(), begin, end, block))


def run_capacity(options: CapacityOptions, out: TextIO | None = None) -> int:
    """Print the capacity at `rate` (markdown or JSON); rewrite the generated sections of the
    performance page and the README if asked (`make capacity`)."""
    out = out or sys.stdout
    measurement, prices = load_measurement(options.measured), Prices.load()
    per_event = PerEvent.of(measurement, prices)
    settings, quotas = options.settings(), Quotas.load()
    if options.rate is not None:
        capacity = model(per_event, options.rate, settings, quotas)
        result = burst(per_event, options.burst, capacity) if options.burst else None
        if options.json:
            out.write(json.dumps(report.to_json(capacity, per_event, result), indent=1) + "\n")
        else:
            out.write(report.render_rate(capacity, per_event, result))
    said = []
    if options.docs is not None:
        block = report.render_docs_block(per_event, settings, quotas)
        _rewrite(options.docs, report.DOCS_BEGIN, report.DOCS_END, block)
        block = report.render_statement_block(statement_model(measurement, prices), quotas)
        _rewrite(options.docs, report.STATEMENT_BEGIN, report.STATEMENT_END, block)
        said.append(f"  {options.docs}: capacity section rewritten\n")
    if options.readme is not None:
        block = report.render_summary_block(per_event, settings, quotas)
        _rewrite(options.readme, report.SUMMARY_BEGIN, report.SUMMARY_END, block)
        said.append(f"  {options.readme}: capacity summary rewritten\n")
    out.write("" if options.json else "".join(said))
    return 0
