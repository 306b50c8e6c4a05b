"""The fire drill at a small size: it passes on the real pipeline and fails on a broken one."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator

import pytest

from local_stack.firedrill import DrillOptions, run_embedded
from tests.support.broken_designs import EventIdKey


@pytest.fixture(autouse=True)
def _own_environment() -> Iterator[None]:
    """The embedded stack sets the Lambda environment for its run and restores it after."""
    before = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    yield
    assert {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"} == before


def test_small_drill_with_faults_proves_every_guarantee() -> None:
    # Given the embedded stack with crashes, conflicts and failing sinks injected
    out, err = io.StringIO(), io.StringIO()

    # When the drill delivers two orders of every kind and checks the state
    exit_code = run_embedded(DrillOptions(orders=16, faults=True), out, err)

    # Then every guarantee held
    report = out.getvalue()
    assert "FAIL" not in report, report
    assert "every guarantee held" in report
    assert exit_code == 0


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
