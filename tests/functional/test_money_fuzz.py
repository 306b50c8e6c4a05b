"""Mangled provider payloads through the process Lambda, seeded, in batches that mix them with
pristine ones: no money that is not money is booked, no record is acknowledged without a
visible outcome, and a bad record never fails the good records of its batch.

A few hundred cases by default; `UMAVEZ_FUZZ_CASES=10000` (`make fuzz-money`) for the full
run, `UMAVEZ_FUZZ_SEED` to replay another seed.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from fixtures.lambda_events import sqs_record
from functions.shared import tables
from functions.shared.dynamo import scan_items
from functions.shared.tables import create_table_requests
from infra.settings import PROCESS_BATCH_SIZE
from tests.support.batches import BatchRun, invalid_money, run_batch
from tests.support.mutations import Case, Mutator
from tests.support.pipeline import Pipeline, pipeline_on_moto

CASES_ENV = "UMAVEZ_FUZZ_CASES"
CASES = int(os.environ.get(CASES_ENV, "300"))
SEED = int(os.environ.get("UMAVEZ_FUZZ_SEED", "22"))
# Outcomes whose trace is the entry's key (written now, or by the delivery that counted)
KEYED = frozenset({"applied", "stale", "voided", "duplicate"})
# Outcomes whose trace is the delivery's own audit record
AUDITED = frozenset({"ignored", "bound", "conflict", "unroutable"})
SHOWN = 10
# Cases per set of tables: every case has its own order and ids, so fresh tables between
# chunks change no outcome, and each chunk's check reads only its own cases' items.
CHUNK = 200


@pytest.fixture
def pipeline(monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    # The tables on the in-memory DynamoDB (tests/devstack/test_memory_store.py).
    with pipeline_on_moto(monkeypatch, tables_in_memory=True) as running:
        yield running


@dataclass
class Findings:
    """What the run saw; the violations are the lists, the counters are for the report."""

    silent: list[str] = field(default_factory=list)
    unexplained_failures: list[str] = field(default_factory=list)
    good_failed: list[str] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)
    fields: Counter[str] = field(default_factory=Counter)

    def summary(self, cases: int, seconds: float, invalid: list[str]) -> str:
        return (
            f"money fuzz: {cases} cases, seed {SEED}, {seconds:.0f} s; "
            f"invalid money {len(invalid)}, silent acknowledgements {len(self.silent)}, "
            f"failures without a reason {len(self.unexplained_failures)}, "
            f"batches whose good records failed {len(self.good_failed)}; "
            f"outcomes {dict(sorted(self.outcomes.items()))}; "
            f"fields refused {dict(self.fields.most_common())}"
        )


def test_mangled_money_is_never_booked_never_silent_and_never_fails_its_batch(
    pipeline: Pipeline, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given seeded cases from the captured shapes, about a quarter of them pristine, and
    # pristine companions paying the orders of some mangled ones
    mutator = Mutator(SEED)
    cases = mutator.cases(CASES)
    for case in cases:
        if case.payment is not None:
            known = (
                pipeline.apis.asaas_payments if case.provider == "asaas" else pipeline.apis.payments
            )
            known[case.payment[0]] = case.payment[1]
    findings = Findings()
    started = time.monotonic()

    # When they reach the process Lambda in batches of the stack's size
    invalid: list[str] = []
    for chunk in range(0, len(cases), CHUNK):
        acknowledged: list[tuple[Case, list[dict[str, Any]]]] = []
        for first in range(chunk, min(chunk + CHUNK, len(cases)), PROCESS_BATCH_SIZE):
            batch = cases[first : min(first + PROCESS_BATCH_SIZE, chunk + CHUNK)]
            records = [sqs_record(case.body, {"provider": case.provider}) for case in batch]
            acknowledged += judge(batch, records, run_batch(*records), findings)

        # Then the books hold only money, every record left a visible outcome, and no bad
        # record failed a good one
        traces = traces_of(pipeline)
        for case, lines in acknowledged:
            if not any(traced(line, case, traces) for line in lines):
                outcomes = [line["outcome"] for line in lines]
                findings.silent.append(f"{described(case)}: {outcomes}")
        invalid += invalid_money(pipeline.world)
        fresh_tables(pipeline)
    summary = findings.summary(len(cases), time.monotonic() - started, invalid)
    if CASES_ENV in os.environ:
        with capsys.disabled():  # the full run (make fuzz-money) reports its numbers
            print(f"\n{summary}")
    assert invalid[:SHOWN] == [], summary
    assert findings.silent[:SHOWN] == [], summary
    assert findings.unexplained_failures[:SHOWN] == [], summary
    assert findings.good_failed[:SHOWN] == [], summary


def described(case: Case) -> str:
    return f"{case.provider} {case.template} {list(case.mutations) or 'pristine'}"


def judge(
    batch: list[Case], records: list[dict[str, Any]], run: BatchRun, findings: Findings
) -> list[tuple[Case, list[dict[str, Any]]]]:
    """Counts the batch's outcomes and failures; returns the acknowledged records with their
    outcome lines, to be found in the tables once every batch ran."""
    acknowledged: list[tuple[Case, list[dict[str, Any]]]] = []
    for case, record in zip(batch, records, strict=True):
        message_id = record["messageId"]
        lines = run.outcomes(message_id)
        findings.outcomes.update(line["outcome"] for line in lines)
        if message_id not in run.failed:
            acknowledged.append((case, lines))
            continue
        reasons = [line.get("reason") for line in lines]
        if case.pristine:
            findings.good_failed.append(f"{described(case)}: {reasons}")
        failures = [line for line in lines if line["outcome"] in {"failed", "retried"}]
        if not failures or not all(line.get("reason") for line in failures):
            findings.unexplained_failures.append(f"{described(case)}: {lines}")
        findings.fields.update(str(line.get("field")) for line in failures)
    return acknowledged


@dataclass(frozen=True)
class Traces:
    effect_keys: frozenset[str]
    deliveries: frozenset[str]


def fresh_tables(pipeline: Pipeline) -> None:
    dynamodb = pipeline.world.dynamodb
    for request in create_table_requests(pipeline.world.tables):
        dynamodb.delete_table(TableName=request["TableName"])
        dynamodb.create_table(**request)


def traces_of(pipeline: Pipeline) -> Traces:
    ledger = list(scan_items(pipeline.world.dynamodb, pipeline.world.tables.ledger))
    return Traces(
        frozenset(str(item["effect_key"]) for item in ledger if "effect_key" in item),
        frozenset(
            str(item[tables.PARTITION_KEY])
            for item in ledger
            if item[tables.SORT_KEY] == tables.DELIVERY_SORT
        ),
    )


def traced(line: dict[str, Any], case: Case, traces: Traces) -> bool:
    """An outcome someone can find in the tables: the entry's key, or the delivery's record."""
    if line["outcome"] in KEYED:
        return str(line.get("effect_key")) in traces.effect_keys
    if line["outcome"] in AUDITED:
        event_id = str(line.get("event_id"))
        return tables.delivery_pk(case.provider, event_id) in traces.deliveries
    return False
