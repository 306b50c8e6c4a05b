"""The capacity model: its arithmetic, its quotas with their sources, its counts read from the
measurement `make cost` saved, and the pages it generates (they cannot drift from it)."""

from __future__ import annotations

import copy
import json
import math
import re
import tomllib
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from costmodel.headroom import PerEvent, StackSettings, Stage, burst, model, reconciliation_capacity
from costmodel.headroom_report import (
    DOCS_BEGIN,
    DOCS_END,
    SUMMARY_BEGIN,
    SUMMARY_END,
    render_docs_block,
    render_summary_block,
)
from costmodel.markdown import block_between
from costmodel.measurement import (
    MEASURED_PATH,
    QUOTAS_PATH,
    Measurement,
    Prices,
    Quotas,
    load_measurement,
)
from infra import settings as deployed
from infra.reconciliation import RECONCILIATION
from infra.reconciliation import reconciliation_capacity as fanout_capacity

ROOT = Path(__file__).resolve().parents[2]
SES = "SES sending rate"


@pytest.fixture(scope="module")
def measured() -> PerEvent:
    return PerEvent.of(load_measurement(), Prices.load())


@pytest.fixture(scope="module")
def quotas() -> Quotas:
    return Quotas.load()


def simple_event(**changes: Any) -> PerEvent:
    """A delivery with round numbers: 2 deliveries a payment, process 50 ms a message, the
    sender 25 ms an item, half an e-mail and half an outbox item a delivery."""
    values: dict[str, Any] = {
        "measured_on": "2026-12-01",
        "deliveries": 200,
        "orders": 100,
        "invocations": {"ingest": 1.0, "process": 0.1, "outbox": 0.1},
        "seconds": {"ingest": 0.02, "process": 0.05, "outbox": 0.0125, "reconciliation": 0.01},
        "queue_messages": 1.0,
        "queue_requests": 1.3,
        "write_units": {"ledger": 4.0, "outbox": 2.0},
        "read_units": {"ledger": 6.0, "outbox": 1.0},
        "index_write_units": {"ledger/changed": 0.4},
        "outbox_items": 0.5,
        "put_events": 0.5,
        "emails": 0.5,
        "waiting_redrives": 0.0,
        "seconds_per_redrive": 0.0,
        "secrets_per_container": 2.5,
    }
    values.update(changes)
    return PerEvent(**values)


def row(capacity: Any, prefix: str) -> Any:
    return next(r for r in capacity.rows if r.component.startswith(prefix))


# -- the arithmetic ----------------------------------------------------------------------------


def test_load_is_the_rate_times_what_one_delivery_uses_and_headroom_is_limit_over_load(
    quotas: Quotas,
) -> None:
    # Given 2 deliveries a payment, each writing 4 WRU to the ledger and sending half an e-mail
    event = simple_event()

    # When the stack takes 10 payments a second
    capacity = model(event, 10, StackSettings(), quotas)

    # Then 20 deliveries a second write 80 WRU/s and send 10 e-mails a second: 14/10 headroom
    assert capacity.deliveries_per_second == 20
    assert row(capacity, "DynamoDB `ledger` writes").load == pytest.approx(80)
    ses = row(capacity, SES)
    assert ses.load == pytest.approx(10)
    assert ses.headroom == pytest.approx(quotas.value("ses_send_rate") / 10)


def test_the_table_is_folded_a_row_per_part_of_each_stage_against_its_quota(
    quotas: Quotas,
) -> None:
    # Given a table of one stage repeated over the tables one delivery writes to
    writes = Stage(
        "`{at.part}` writes",
        "WRU/s",
        "rate * amount",
        "dynamodb_table_write_units",
        parts="e.write_units",
    )

    # When it is folded at 10 payments a second (20 deliveries)
    capacity = model(simple_event(), 10, StackSettings(), quotas, stages=[writes])

    # Then each table is a row: its load, the quota as its limit and the quota's page
    assert [r.component for r in capacity.rows] == ["`ledger` writes", "`outbox` writes"]
    assert [r.load for r in capacity.rows] == pytest.approx([80, 40])
    assert {r.limit for r in capacity.rows} == {quotas.value("dynamodb_table_write_units")}
    assert {r.source for r in capacity.rows} == {quotas.source("dynamodb_table_write_units")}


def test_a_lambda_stage_takes_concurrency_times_batch_over_the_batch_duration(
    quotas: Quotas,
) -> None:
    # Given process at 50 ms a message, batches of 10 and a maximum concurrency of 5
    event = simple_event()
    assert deployed.PROCESS_BATCH_SIZE == 10
    settings = StackSettings(process_max_concurrency=5)

    # When its limit is computed
    process = row(model(event, 1, settings, quotas), "process")

    # Then a batch takes 0.5 s and 5 x 10 / 0.5 = 100 messages a second go through
    assert "0.50 s" in process.component
    assert process.limit == pytest.approx(100)
    # and the outbox: 1 shard x 4 lanes x 10 / (10 x 25 ms) = 160 items a second
    outbox = row(model(event, 1, settings, quotas), "outbox")
    assert outbox.limit == pytest.approx(160)


def test_a_burst_drains_at_its_bottleneck_and_says_what_waits_past_its_deadline(
    quotas: Quotas,
) -> None:
    # Given process as the tightest stage on the way in (100 messages a second, 1 a delivery)
    event = simple_event()
    settings = StackSettings()
    capacity = model(event, 1, settings, quotas)

    # When 360,000 deliveries arrive at once
    result = burst(event, 360_000, capacity)

    # Then the API takes them at its throttle, process drains them in an hour, and the queue
    # holds what process has not taken yet
    assert result.intake_per_second == deployed.API_THROTTLE_RATE
    assert result.drain_seconds == pytest.approx(3600)
    assert result.queue_peak == pytest.approx(360_000 * (1 - 100 / deployed.API_THROTTLE_RATE))
    # 180,000 e-mails at 14 a second: past the reconciliation's hour, within the give-up day
    deadlines = {d.what.split(" (")[0]: d for d in result.deadlines}
    assert not deadlines["an outbox item still pending"].kept
    assert deadlines["an e-mail held back by SES's sending rate"].kept
    assert deadlines["the last accepted delivery, in the webhook queue"].kept


def test_the_reconciliation_keeps_up_by_its_fan_out_model() -> None:
    # Given the deployed run: hourly, its units 32 at once within 45 minutes, at most 5,000,000
    # orders read a run, two passes a run
    assert RECONCILIATION.max_orders_per_run == 5_000_000

    # When each pass also reads half an hour again (it fires half past), at 18 ms an order
    capacity = reconciliation_capacity(seconds_per_order=0.018, hour_fraction=0.5)

    # Then it is the fan-out's model at those reads (infra/reconciliation.py): above 200 changed
    # orders a second, limited by its workers' time
    assert capacity.reads_per_change == 3
    fanout = replace(
        RECONCILIATION,
        seconds_per_order_query=0.009,
        seconds_per_outbox_read=0.009,
        reads_of_an_hour=1.5,
    )
    assert capacity.changes_per_second == pytest.approx(fanout_capacity(fanout))
    assert capacity.changes_per_second >= 200
    assert capacity.limited_by.startswith("its 32 workers")
    # and faster reads make the cap on orders a run the limit (5,000,000 / 3 an hour)
    fast = reconciliation_capacity(seconds_per_order=0.001, hour_fraction=0.5)
    assert fast.limited_by == "its cap on orders a run"
    assert fast.changes_per_second == pytest.approx(5_000_000 / 3 / 3600)


# -- from the measurement ----------------------------------------------------------------------


def test_request_counts_come_from_the_measurement_not_from_the_model(quotas: Quotas) -> None:
    # Given the committed measurement, and a copy where the drill mix sent twice the e-mails
    data = json.loads(MEASURED_PATH.read_text())
    doubled = copy.deepcopy(data)
    for entry in doubled["mix"]["aws"]:
        if entry["key"][1] == "sesv2":
            entry["units"]["billed"] *= 2
    prices = Prices.load()

    # When both are modeled at 10 payments a second
    before = model(PerEvent.of(Measurement.from_json(data), prices), 10, quotas=quotas)
    after = model(PerEvent.of(Measurement.from_json(doubled), prices), 10, quotas=quotas)

    # Then SES's load doubles, and nothing else changes
    assert row(after, SES).load == pytest.approx(2 * row(before, SES).load)
    assert row(before, SES).load > 0
    assert row(after, "process").load == row(before, "process").load


def test_the_first_to_saturate_at_10_100_and_1000_payments_a_second(
    measured: PerEvent, quotas: Quotas
) -> None:
    # Given the default stack and the committed measurement
    at = {rate: model(measured, rate, StackSettings(), quotas) for rate in (10, 100, 1000)}

    # Then SES gives first at every rate; the hourly reconciliation (fanned out) keeps up with
    # 100 payments a second, not with 1,000
    for capacity in at.values():
        assert capacity.first_to_saturate().component == SES
        assert capacity.first_to_saturate(webhook_path_only=True).component == SES
    saturated = {rate: {r.component.split(" ")[0] for r in c.saturated()} for rate, c in at.items()}
    assert "reconciliation" not in saturated[100]
    assert "reconciliation" in saturated[1000]
    # At 10 a second process, the API and the outbox stream keep up; at 100 none of them does
    assert saturated[10] == {"SES"}
    assert {"process", "outbox", "API"} <= {r.component.split(" ")[0] for r in at[100].saturated()}
    # With REST + WAF and no allow list, the WAF's rate rule refuses the providers first
    with_waf = at[10].first_to_saturate(rest=True, webhook_path_only=True)
    assert with_waf.component.startswith("WAF")


def test_raising_process_max_concurrency_moves_the_bottleneck(
    measured: PerEvent, quotas: Quotas
) -> None:
    # Given a merchant at 100 payments a second with SES's quota raised out of the way
    settings = StackSettings(ses_send_rate=10_000)
    assert (
        model(measured, 100, settings, quotas)
        .first_to_saturate(webhook_path_only=True)
        .component.startswith("process")
    )

    # When processMaxConcurrency goes from 5 to 100
    raised = model(measured, 100, replace(settings, process_max_concurrency=100), quotas)

    # Then process keeps up, and the next component is the first to saturate
    assert row(raised, "process").headroom > 1
    assert not raised.first_to_saturate(webhook_path_only=True).component.startswith("process")


# -- the quotas file and the pages ---------------------------------------------------------------


def test_every_quota_says_its_default_whether_aws_raises_it_and_where_it_is_documented() -> None:
    entries = tomllib.loads(QUOTAS_PATH.read_text())["quotas"]
    assert entries
    for name, entry in entries.items():
        assert entry["value"] > 0, name
        assert isinstance(entry["adjustable"], bool), name
        assert entry["unit"], name
        assert re.match(r"^https://(docs\.aws\.amazon\.com|repost\.aws)/", entry["source"]), name
        assert date.fromisoformat(entry["as_of"]) <= date.today(), name


def test_the_pages_hold_the_commands_output_for_the_committed_measurement(
    measured: PerEvent,
) -> None:
    # Given the measurement and quotas in the repository
    # When the generated sections are rendered again
    docs = render_docs_block(measured)
    summary = render_summary_block(measured)

    # Then the performance page and the README hold exactly that: `make capacity` after a
    # change of measurement, quota or setting, or this fails
    page = (ROOT / "docs" / "performance.md").read_text()
    readme = (ROOT / "README.md").read_text()
    assert block_between(page, DOCS_BEGIN, DOCS_END) == docs
    assert block_between(readme, SUMMARY_BEGIN, SUMMARY_END) == summary


def test_the_command_prints_the_table_and_its_json_parses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from ops.cli import main

    # When an operator asks for 100 payments a second with a burst, as text then as JSON
    assert main(["capacity", "--rate", "100", "--burst", "50000"]) == 0
    text = capsys.readouterr().out
    assert main(["capacity", "--rate", "100", "--json", "--process-max-concurrency", "50"]) == 0
    data = json.loads(capsys.readouterr().out)

    # Then the text is the page's markdown at that rate: its table, what saturates first and
    # the burst's drain; the JSON has every row
    assert "| component | unit | limit | 100/s: load | headroom |" in text
    assert re.search(rf"^- \*\*100 payments a second\*\* \([\d,]+ deliveries\): {SES} ", text, re.M)
    assert "A burst of 50,000 deliveries at once:" in text
    assert "- drained in " in text
    assert data["payments_per_second"] == 100
    process = next(r for r in data["rows"] if r["component"].startswith("process"))
    assert "maximum concurrency 50" in process["component"]
    assert all(r["headroom"] is None or r["headroom"] > 0 for r in data["rows"])
    assert not math.isnan(data["deliveries_per_payment"])
