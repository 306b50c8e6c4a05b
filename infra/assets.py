"""What goes into a Lambda asset, without CDK: `functions/__init__.py`, `functions/shared`, the
providers' packages where the function reads webhooks (functions/stripe/, …), the ledger store
(`functions/store`) where the function writes the ledger, and the function's own package
(infra/settings.py lists them). Used by the stack's bundling and by the runtime import check."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def copy_packages(output_dir: Path, packages: Sequence[str]) -> None:
    target = output_dir / "functions"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "functions" / "__init__.py", target / "__init__.py")
    for package in packages:
        shutil.copytree(
            ROOT / "functions" / package,
            target / package,
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )
