"""Hermetic AWS for every test: fake credentials, moto, tables from the shared definitions."""

from __future__ import annotations

import os

# Set before any Lambda module is imported: Powertools reads these at import time.
os.environ.update(
    {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_SERVICE_NAME": "umavez-tests",
        "POWERTOOLS_METRICS_NAMESPACE": "Umavez",
    }
)

import fcntl
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
import pytest
from aws_lambda_powertools import Metrics
from moto import mock_aws
from moto.core.config import default_user_config

# Every function's handler imported before any test runs: a Powertools Logger keeps the stdout
# it was created with, and one created first inside a stack under capsys would write to the
# capture file capsys closes after its test.
import functions.ingest.handler
import functions.outbox.handler
import functions.outbox.sweeper_handler
import functions.process.handler
import functions.process.waiting_handler
import functions.reconcile.handler
import functions.statement.handler  # noqa: F401
from devstack.memory.hook import MOTO_PASSES_DYNAMODB, memory_dynamodb
from functions.shared.tables import create_table_requests
from tests.support.asaas import AsaasAsDelivered, processor_factory
from tests.support.clients import serialized
from tests.support.clock import FakeClock
from tests.support.world import TABLES, ProcessorFactory, World

# One boto3 session for the whole run. moto's default starts each mock on a new one, and a
# client of a new session loads its service's model again: about 100 ms a client, against 4
# ms from a session that already has it, paid by most tests. The session keeps the first
# credentials it resolves: fake ones, the environment above holding nothing else, and the
# tests that take credentials away make their own session (tests/ops).
default_user_config["core"]["reset_boto3_session"] = False

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


# The tooling's suite: the tests of the embedded stack, the fire drill, the cost model and the
# benchmarks. Everything else tests what users run: the functions, the stack, the operator's
# tool. Both run in `make test`; `pytest -m product` or `-m tooling` runs one.
TOOLING_DIRECTORIES = ("devstack",)
TOOLING_MODULES = frozenset(
    {
        "test_cost_model.py",
        "test_cost_model_matches_stack.py",
        "test_capacity_model.py",
        "test_benchmark_replay.py",
        "test_local_mappings_match_stack.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test marked `product` or `tooling` by where it lives."""
    for item in items:
        path = item.path
        tooling = path.parent.name in TOOLING_DIRECTORIES or path.name in TOOLING_MODULES
        item.add_marker(pytest.mark.tooling if tooling else pytest.mark.product)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Tests run in random order (pytest-randomly). `make test` runs quietly, without the header
    that names the seed: it is said at the end, where a failure is read, so that order can be
    run again. Nothing is said when the plugin is off (`-p no:randomly`)."""
    seed = config.getoption("randomly_seed", default=None)
    if seed is not None and config.getoption("randomly_reorganize", default=False):
        terminalreporter.write_line(f"tests ran in random order; --randomly-seed={seed} repeats it")


@pytest.fixture(autouse=True)
def _no_metrics_left_over() -> Iterator[None]:
    """Powertools keeps one metric set for every `Metrics` of the process, and only a handler's
    `log_metrics` prints and empties it: what a test counted by calling a function's code
    directly (`handle_message`, `respond`) would be printed by the next test's handler. Each
    test starts and ends with the set empty, whatever ran before it."""
    shared = Metrics()
    shared.clear_metrics()
    yield
    shared.clear_metrics()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def asaas_api() -> AsaasAsDelivered:
    return AsaasAsDelivered()


@pytest.fixture
def make_processor(clock: FakeClock, asaas_api: AsaasAsDelivered) -> ProcessorFactory:
    return processor_factory(clock, asaas_api)


@pytest.fixture
def dynamodb() -> Iterator[DynamoDBClient]:
    """The stack's tables on the project's in-memory DynamoDB (its contract with moto:
    tests/devstack/test_memory_store.py), everything else on moto. A test that reads a
    table's stream takes `moto_dynamodb` instead: the store keeps no streams."""
    with mock_aws(config=MOTO_PASSES_DYNAMODB), memory_dynamodb():
        yield _with_tables(boto3.client("dynamodb"))


@pytest.fixture
def moto_dynamodb() -> Iterator[DynamoDBClient]:
    """The stack's tables on moto, with their streams."""
    with mock_aws():
        yield _with_tables(boto3.client("dynamodb"))


def _with_tables(client: DynamoDBClient) -> DynamoDBClient:
    for request in create_table_requests(TABLES):
        client.create_table(**request)
    return client


@pytest.fixture
def world(
    dynamodb: DynamoDBClient, make_processor: ProcessorFactory, asaas_api: AsaasAsDelivered
) -> World:
    return World(serialized(dynamodb), TABLES, make_processor, asaas_api)


@dataclass(frozen=True)
class DrillRun:
    """One fire drill on the embedded stack: its exit code, its report, and the file of the
    AWS calls its functions made (`firedrill.run.RecordedCalls`)."""

    exit_code: int
    report: str
    recorded_calls: Path


@pytest.fixture(scope="session")
def every_kind_drill(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> DrillRun:
    """A drill with faults of one story of every written kind (and the simulated lifecycles
    between them): what the drill's own test and the permission tests read. Run once for
    the whole session: the first worker to need it runs it, the others read what it wrote."""
    shared = tmp_path_factory.getbasetemp()
    if worker_id != "master":  # every worker's base is under the session's
        shared = shared.parent
    done = shared / "every-kind-drill.json"
    with (shared / "every-kind-drill.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            done.write_text(json.dumps(_run_every_kind_drill(shared / "aws-calls.json")))
    run = json.loads(done.read_text())
    return DrillRun(run["exit_code"], run["report"], Path(run["recorded_calls"]))


def _run_every_kind_drill(calls_path: Path) -> dict[str, object]:
    from firedrill.run import DrillOptions, run_embedded
    from firedrill.stories import KINDS, SIMULATED_EVERY

    # Every written kind once, with a simulated lifecycle every SIMULATED_EVERY-th story.
    orders = len(KINDS) * SIMULATED_EVERY // (SIMULATED_EVERY - 1)
    out, err = io.StringIO(), io.StringIO()
    exit_code = run_embedded(
        DrillOptions(orders=orders, faults=True, calls_path=calls_path), out, err
    )
    return {"exit_code": exit_code, "report": out.getvalue(), "recorded_calls": str(calls_path)}
