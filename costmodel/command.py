"""`umavez cost`: measure the scenarios on the embedded stack (or read a saved measurement),
price them, print the bill, and rewrite the cost block of a page if asked (`make cost`:
docs/cost.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from costmodel.markdown import replace_between
from costmodel.model import (
    README_BEGIN,
    README_END,
    CostOptions,
    Measurement,
    Prices,
    render_block,
    render_details,
    webhook_queue,
)
from costmodel.scenarios import measure


def run(
    options: CostOptions,
    readme: Path | None = None,
    json_path: Path | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    measured: Path | None = None,
    xray_sampling: float | None = None,
) -> int:
    """Measure (or read a measurement `--json` wrote), price, print; rewrite the cost
    block of `readme` (docs/cost.md, by `make cost`) if asked. Re-pricing a saved measurement
    takes no stack: `--from-json`."""
    prices = Prices.load()
    if xray_sampling is not None:
        prices.assumptions["xray_sampling"] = xray_sampling
    if measured is not None:
        measurement = Measurement.from_json(json.loads(measured.read_text()))
    else:
        measurement = measure(options, err)
    queue = webhook_queue()
    block = render_block(measurement, prices, queue)
    out.write("\n" + block)
    out.write(render_details(measurement, prices, queue))
    out.write(f"  measured in {measurement.elapsed_seconds:.0f} s\n")
    if json_path is not None and measured is None:
        json_path.write_text(json.dumps(measurement.to_json(), indent=1))
    if readme is not None:
        readme.write_text(replace_between(readme.read_text(), README_BEGIN, README_END, block))
        out.write(f"  {readme}: cost section rewritten\n")
    return 0
