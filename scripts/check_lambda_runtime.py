"""Import every Lambda handler the way Lambda will: from its own asset, with only the runtime
dependencies (pyproject's [project.dependencies], which Powertools' layer and the runtime
provide), with tracing on (`LAMBDA_TASK_ROOT` set, as in Lambda: the X-Ray SDK is imported)
and off (`POWERTOOLS_TRACE_DISABLED=true`: it is not). A dev-only import, or a package missing
from an asset, fails here and not in production. Run with the runtime-only venv's Python by
`make test`."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The repository's other packages and the dev-only libraries: a handler importing any of them
# would fail in its Lambda, where none is installed.
NOT_SHIPPED = {
    *("moto", "pytest", "aws_cdk"),
    *("infra", "ops", "devstack", "costmodel", "firedrill", "fixtures", "benchmarks", "tests"),
}
sys.path.insert(0, str(ROOT))

from infra.assets import copy_packages  # noqa: E402
from infra.settings import LAMBDA_PACKAGES  # noqa: E402

ENVIRONMENT = {
    "PATH": os.environ.get("PATH", ""),
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_ACCESS_KEY_ID": "runtime-check",
    "AWS_SECRET_ACCESS_KEY": "runtime-check",
    "POWERTOOLS_METRICS_NAMESPACE": "Umavez",
}


TRACING = {"tracing on": {}, "tracing off": {"POWERTOOLS_TRACE_DISABLED": "true"}}


def main(runtime_python: str) -> int:
    failures = 0
    for name, (handler, packages) in LAMBDA_PACKAGES.items():
        module, attribute = handler.rsplit(".", 1)
        with tempfile.TemporaryDirectory() as asset:
            copy_packages(Path(asset), packages)
            for mode, switches in TRACING.items():
                traced = not switches
                code = (
                    f"import sys; sys.path.insert(0, {asset!r}); import {module} as m; "
                    f"assert callable(m.{attribute}); "
                    "assert not [n for n in sys.modules if n.split('.')[0] in "
                    f"{NOT_SHIPPED!r}]; "
                    f"assert ('aws_xray_sdk' in sys.modules) is {traced}, 'X-Ray SDK imported?'"
                )
                result = subprocess.run(
                    [runtime_python, "-I", "-c", code],
                    env={**ENVIRONMENT, "LAMBDA_TASK_ROOT": asset, **switches},
                    cwd=asset,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                status = "ok" if result.returncode == 0 else "FAILED"
                print(f"  {name:<15} {handler:<52} {mode:<12} {status}")
                if result.returncode:
                    failures += 1
                    print(result.stderr[-2000:])
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1])))  # not resolve(): the venv is a symlink
