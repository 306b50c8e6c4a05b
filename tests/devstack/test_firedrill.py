"""The fire drill at a small size: it passes on the real pipeline and fails on a broken one."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.resources import DEVELOPMENT_SECRETS
from devstack.stack import EmbeddedStack
from firedrill.run import DeployedTarget, DrillOptions, run_deployed, run_embedded
from tests.conftest import DrillRun
from tests.support.broken_designs import EventIdKey


@pytest.fixture(autouse=True)
def _own_environment() -> Iterator[None]:
    """The embedded stack sets the Lambda environment for its run and restores it after."""
    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    yield
    assert {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"} == before


def test_small_drill_with_faults_proves_every_guarantee(every_kind_drill: DrillRun) -> None:
    # Given the embedded stack with crashes, conflicts, failing sinks and a stream mapping
    # giving batches up injected
    # When the drill delivers one order of every kind and checks the state
    report, exit_code = every_kind_drill.report, every_kind_drill.exit_code

    # Then every guarantee held
    assert "FAIL" not in report, report
    assert "every guarantee held" in report
    assert exit_code == 0
    # and the report says where the time went: the delivery rate, each stage, each drain next
    # to its allowance, the steps of the run and the local server's requests
    facts = {line.split("  ")[1] for line in report.splitlines() if line.startswith("  ")}
    for fact in (
        "delivery rate",
        "stage: ingest",
        "stage: process",
        "stage: outbox",
        "drains",
        "time",
        "server requests",
        "server: dynamodb",
        "server: sqs",
        "aws calls",
    ):
        assert fact in facts, report
    assert re.search(r"^  delivery rate +[\d.]+ deliveries/s \(\d+ in [\d.]+ s\)$", report, re.M)
    assert re.search(r"^  drains +\d+ s of \d+ s allowed \(peak \d+ in flight", report, re.M)
    # and where the AWS calls its functions made were written
    assert f"in {every_kind_drill.recorded_calls}" in report


def test_drill_catches_a_broken_process_handler_and_exits_non_zero() -> None:
    # Given a process handler that keys effects by the provider's event id
    out, err = io.StringIO(), io.StringIO()

    # When the drill runs against it
    exit_code = run_embedded(
        DrillOptions(orders=8, faults=False, process_variant=EventIdKey), out, err
    )

    # Then it reports the double effect and fails
    report = out.getvalue()
    assert "FAIL  no effect applied twice" in report, report
    assert "GUARANTEES VIOLATED" in report
    assert exit_code == 1


def test_make_run_works_from_any_directory_and_its_console_is_clean(tmp_path: Path) -> None:
    # Given the console script's entry point, run the way `make run` runs it, elsewhere, its
    # output piped (not a terminal)
    command = [
        *(sys.executable, "-m", "ops.cli", "firedrill"),
        *("--deliveries", "25", "--no-faults"),
    ]

    # When it runs outside the repository
    result = subprocess.run(  # noqa: S603 - our own CLI
        command, cwd=tmp_path, capture_output=True, timeout=300, check=False
    )

    # Then it finds everything it needs and reports success
    out, err = result.stdout.decode(), result.stderr.decode()
    assert "every guarantee held" in out, out + err[-2000:]
    assert result.returncode == 0
    # sized by deliveries: the first stories (written kinds and simulated lifecycles, each
    # of a kind of its own) make at least 25, every one delivered
    assert re.search(r"^  orders \(stories\) +(\d+) across \1 kinds$", out, re.MULTILINE), out
    delivered = re.search(r"^  delivered (\d+)/\1 \(100%\)", err, re.MULTILINE)
    assert delivered, err
    assert int(delivered[1]) >= 25
    # and the console holds only the stack's URL, progress lines and the report: no EMF blob,
    # no warning, no carriage return
    console = out + err
    assert '"_aws"' not in console, console[-2000:]
    assert "Warning" not in console, console[-2000:]
    assert "\r" not in console
    assert re.search(r"^  delivered (\d+)/\1 \(100%\), \d+ s$", err, re.MULTILINE), err
    # every line of it one of those: the stack, the progress, what each drain waited for
    progress = re.compile(r"^  (embedded stack up: |delivered \d+/\d+ |drained: quiet after )")
    assert all(progress.match(line) for line in err.splitlines()), err
    # while each function's metrics went to its own EMF file, under its own service
    metrics = tmp_path / ".local" / "metrics"
    functions = (
        "ingest",
        "process",
        "outbox",
        "sweeper",
        "reconciliation",
        "waiting",
        "statement",
    )
    assert sorted(p.stem for p in metrics.glob("*.jsonl")) == sorted(functions)
    for function in functions:
        emf = [
            json.loads(line) for line in (metrics / f"{function}.jsonl").read_text().splitlines()
        ]
        assert emf, function
        assert {d["service"] for d in emf} == {function}
    assert "metrics: process" in out
    assert (tmp_path / ".local" / "lambda-logs.jsonl").stat().st_size > 0


def test_drill_against_a_deployed_stack_checks_the_drills_own_orders() -> None:
    # Given a running stack reached only through its URL and its tables, like a deployed one
    with EmbeddedStack() as deployed:
        target = DeployedTarget(
            url=deployed.front.url,
            secrets={p: DEVELOPMENT_SECRETS[p] for p in ("stripe", "asaas")},
            tables=deployed.resources.tables,
            timeout_seconds=60,
        )
        out, err = io.StringIO(), io.StringIO()

        # When the drill runs against it
        exit_code = run_deployed(DrillOptions(orders=14), target, out, err)

    # Then the Stripe stories (the others are read back from the providers' own APIs) pass
    # every check it can make from outside
    report = out.getvalue()
    assert "FAIL" not in report, report
    assert "books balance for the drill's orders" in report
    assert exit_code == 0
