"""The cost per million events, measured on the embedded stack: `umavez cost` (`make cost`).

python benchmarks/cost_model.py [--orders 52] [--per-kind 20] [--readme docs/cost.md] [--json FILE]
"""

from __future__ import annotations

import sys

from ops.cli import main

if __name__ == "__main__":
    sys.exit(main(["cost", *sys.argv[1:]]))
