"""The local console: metrics in a file per function (never on stdout), `umavez show metrics`,
and warnings in the log file."""

from __future__ import annotations

import gc
import json
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

from devstack.metrics import MetricFiles
from devstack.metrics_report import read_totals
from ops.cli import main
from ops.console import warnings_to_log


def documents(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_function_writes_its_own_emf_file_with_its_service_and_nothing_on_the_console(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given two functions' metrics in one process (Powertools shares their sets by default),
    # routed to files the way the embedded stack does
    ingest = Metrics(namespace="Umavez", service="ingest")
    process = Metrics(namespace="Umavez", service="process")
    process.clear_metrics()  # the shared set may hold what earlier tests counted and never flushed
    files = MetricFiles(tmp_path / "metrics")
    undo = [files.route(ingest), files.route(process)]

    @ingest.log_metrics
    def ingest_handler(event: dict[str, Any], context: Any) -> None:
        ingest.add_metric(name="accepted", unit=MetricUnit.Count, value=1)

    @process.log_metrics
    def process_handler(event: dict[str, Any], context: Any) -> None:
        # more values of one metric than Powertools keeps before printing them itself
        for _ in range(event["records"]):
            process.add_metric(name="applied", unit=MetricUnit.Count, value=1)

    @process.log_metrics
    def counts_nothing(event: dict[str, Any], context: Any) -> None:
        pass

    # When they are invoked concurrently, one of them with nothing to count (what earlier tests
    # left for the garbage collector finalized first: an unclosed socket of theirs collected
    # inside the window is not this code's warning)
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        threads = [
            *(threading.Thread(target=ingest_handler, args=({}, None)) for _ in range(30)),
            threading.Thread(target=process_handler, args=({"records": 150}, None)),
            *(
                threading.Thread(target=process_handler, args=({"records": 3}, None))
                for _ in range(9)
            ),
            threading.Thread(target=counts_nothing, args=({}, None)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    for step in undo:
        step()

    # Then the console got nothing, no warning was raised
    console = capsys.readouterr()
    assert (console.out, console.err) == ("", "")
    assert [str(w.message) for w in caught] == []
    # and each file holds EMF documents of its own function only, summing what was counted
    ingest_docs = documents(tmp_path / "metrics" / "ingest.jsonl")
    process_docs = documents(tmp_path / "metrics" / "process.jsonl")
    assert {d["service"] for d in ingest_docs} == {"ingest"}
    assert {d["service"] for d in process_docs} == {"process"}
    assert all(d["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "Umavez" for d in process_docs)
    assert all("applied" not in d for d in ingest_docs)
    totals, services = read_totals(tmp_path / "metrics")
    assert totals == {("ingest", "accepted"): 30, ("process", "applied"): 177}
    assert services == {"ingest": {"ingest"}, "process": {"process"}}
    assert files.totals() == totals
    # and, undone, the modules' providers are Powertools' own again
    assert "flush_metrics" not in vars(process.provider)
    assert not process.provider.metric_set


def test_show_metrics_prints_a_sum_per_function_and_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a function's metrics file
    outbox = Metrics(namespace="Umavez", service="outbox")
    undo = MetricFiles(tmp_path).route(outbox)

    @outbox.log_metrics
    def handler(event: dict[str, Any], context: Any) -> None:
        outbox.add_metric(name="outbox_sent", unit=MetricUnit.Count, value=2)
        outbox.add_metric(name="outbox_retry_later", unit=MetricUnit.Count, value=1)

    handler({}, None)
    handler({}, None)
    undo()

    # When it is shown, as a table and as JSON
    assert main(["show", "metrics", "--dir", str(tmp_path)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert main(["show", "metrics", "--dir", str(tmp_path), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)

    # Then each metric of the function is summed
    assert table[0].split() == ["function", "metric", "sum"]
    assert [line.split() for line in table[1:]] == [
        ["outbox", "outbox_retry_later", "2"],
        ["outbox", "outbox_sent", "4"],
    ]
    assert {(r["function"], r["metric"], r["sum"]) for r in rows} == {
        ("outbox", "outbox_retry_later", 2),
        ("outbox", "outbox_sent", 4),
    }


def test_show_metrics_says_when_there_are_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "metrics", "--dir", str(tmp_path / "nothing")]) == 1
    assert "no metrics in" in capsys.readouterr().out


def test_warnings_go_to_the_log_file_while_the_stack_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "lambda-logs.jsonl"
    with warnings_to_log(log):
        warnings.warn("No application metrics to publish", UserWarning, stacklevel=1)

    assert capsys.readouterr().err == ""
    (record,) = documents(log)
    assert (record["level"], record["category"]) == ("WARNING", "UserWarning")
    assert record["message"] == "No application metrics to publish"
