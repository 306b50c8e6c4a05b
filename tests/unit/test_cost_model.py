"""The cost model's own arithmetic and files: prices with their sources, who pays for what,
the scheduled functions' runs taken out, the cost page's section in the generator's shape, and
what `umavez cost` prints."""

from __future__ import annotations

import io
import re
from datetime import date
from pathlib import Path

import pytest

from costmodel.markdown import block_between, replace_between
from costmodel.measurement import (
    KINDS,
    MEASURED_PATH,
    MIX,
    PRICES_PATH,
    CostOptions,
    Measurement,
    Prices,
    Sample,
    without_idle,
)
from costmodel.model import (
    LINE_ITEMS,
    README_BEGIN,
    README_END,
    bill,
    fixed_monthly,
    render_block,
    shape,
    usage,
)
from devstack.capacity import Units

COST_PAGE = Path(__file__).resolve().parents[2] / "docs" / "cost.md"
QUEUE = "umavez-webhooks"


@pytest.fixture(scope="module")
def prices() -> Prices:
    return Prices.load()


def test_every_price_says_what_it_costs_per_what_where_it_is_published_and_when() -> None:
    import tomllib

    entries = tomllib.loads(PRICES_PATH.read_text())["prices"]
    assert entries
    for name, entry in entries.items():
        assert entry["usd"] >= 0, name
        assert entry["per"] > 0, name
        assert entry["unit"], name
        assert re.match(r"^https://aws\.amazon\.com/[a-z0-9-]+/pricing/", entry["source"]), name
        assert date.fromisoformat(entry["as_of"]) <= date.today(), name


def test_every_price_the_model_uses_is_in_the_file(prices: Prices) -> None:
    sample = _sample(events=1)
    assert {i.name for i in LINE_ITEMS} == set(bill(sample, prices, QUEUE).per_million)
    assert fixed_monthly({"sweeper": sample}, prices, QUEUE)  # no price missing
    for item in LINE_ITEMS:
        assert item.price(prices) >= 0


def _sample(events: int) -> Sample:
    return Sample(
        events,
        {
            ("ingest", "sqs", "SendMessage", QUEUE): Units({"requests": 2, "billed": 2}),
            ("process", "dynamodb", "TransactWriteItems", "ledger"): Units(
                {"requests": 2, "wru_transaction:ledger": 20, "wru_index:ledger/changes": 2}
            ),
            ("outbox", "dynamodb", "GetItem", "ledger"): Units(
                {"requests": 2, "rru_strong:ledger": 2}
            ),
            ("outbox", "events", "PutEvents", "bus"): Units({"requests": 2, "billed": 2}),
            ("outbox", "sesv2", "SendEmail", ""): Units({"requests": 2, "billed": 2}),
            # Lambda's event source mapping: 3 receives that found messages, 7 empty long polls
            ("", "sqs", "ReceiveMessage", QUEUE): Units(
                {"requests": 10, "billed": 10, "empty_receives": 7}
            ),
            ("", "sqs", "DeleteMessageBatch", QUEUE): Units({"requests": 1, "billed": 1}),
            # The local stack's own: the sink's queue, the drain's queries
            ("", "sqs", "ReceiveMessage", "sink"): Units({"requests": 50, "billed": 50}),
            ("", "dynamodb", "Query", "outbox/due"): Units({"requests": 9, "rru_eventual:x": 9}),
        },
        {
            "ingest": Units(
                {"invocations": 2, "compute_ms": 6, "billed_ms": 90, "log_bytes": 1000}
            ),
            "process": Units({"invocations": 1, "compute_ms": 40, "billed_ms": 400}),
            "outbox": Units({"invocations": 1, "compute_ms": 20, "billed_ms": 300}),
        },
    )


def test_usage_bills_the_functions_and_the_event_source_not_the_local_stack(
    prices: Prices,
) -> None:
    used = usage(_sample(events=2), prices, QUEUE)

    assert used["api_requests"] == 2  # one ingest invocation per HTTP request
    assert used["sqs_requests"] == 2 + (10 - 7) + 1  # sends, non-empty receives, delete
    assert used["wru_transaction"] == 20
    assert used["wru_index"] == 2
    assert used["rru"] == 2  # the drain's Query is not billed
    assert used["eventbridge_events"] == 2
    assert used["ses_messages"] == 2
    assert used["lambda_invocations"] == 4
    latency = prices.latency
    ingest_ms = 6 + 2 * latency("sqs", "SendMessage") + 2 * 0.5
    process_ms = 40 + 2 * latency("dynamodb", "TransactWriteItems") + 0.5
    outbox_ms = 20 + 2 * (
        latency("dynamodb", "GetItem") + latency("events", "PutEvents") + latency("sesv2", "x")
    )
    outbox_ms += 0.5
    expected = (ingest_ms * 512 + (process_ms + outbox_ms) * 256) / 1000 / 1024
    assert used["lambda_gb_seconds"] == pytest.approx(expected)
    a = prices.assumptions
    overhead = a["cloudwatch_log_event_overhead_bytes"]
    platform = a["lambda_platform_log_bytes"] + a["lambda_platform_log_lines"] * overhead
    access = a["api_access_log_bytes"] + a["cloudwatch_log_event_overhead_bytes"]
    assert used["log_bytes"] == pytest.approx(1000 + 4 * platform + 2 * access)
    # Two webhooks: ingest starts a trace with the HTTP API, the REST stage with the REST API;
    # process continues it, and each outbox invocation starts its own
    outbox = 1
    assert used["xray_traces_http"] == pytest.approx((2 + outbox) * a["lambda_xray_sampling"])
    assert used["xray_traces_rest"] == pytest.approx(
        2 * a["xray_sampling"] + outbox * a["lambda_xray_sampling"]
    )


def test_totals_per_million_events_for_each_api_type_leave_e_mail_out(prices: Prices) -> None:
    charged = bill(_sample(events=2), prices, QUEUE)
    lines = charged.per_million

    assert lines["API Gateway HTTP API"] == pytest.approx(1.00)  # one request per event
    assert lines["API Gateway REST API"] == pytest.approx(3.50)
    assert lines["WAF"] == pytest.approx(0.60)
    assert lines["DynamoDB transactions"] == pytest.approx(10 * 0.625)  # 10 WRU per event
    assert lines["SES e-mail"] == pytest.approx(100.0)
    # Each API type has its own X-Ray line: who starts the trace differs (docs/observability.md)
    http_only = 1.00 + lines["X-Ray (HTTP API)"]
    rest_only = 3.50 + 0.60 + lines["X-Ray (REST API)"]
    shared = sum(lines.values()) - lines["SES e-mail"] - http_only - rest_only
    assert charged.http_total == pytest.approx(shared + http_only)
    assert charged.rest_total == pytest.approx(shared + rest_only)
    assert lines["X-Ray (REST API)"] < lines["X-Ray (HTTP API)"]  # 1% of webhooks, not 5%


def test_scheduled_runs_are_taken_out_at_their_idle_cost_and_their_extra_work_stays() -> None:
    idle_run = Sample(
        1,
        {("waiting", "dynamodb", "Query", "ledger"): Units({"requests": 1, "rru_strong:l": 1})},
        {"waiting": Units({"invocations": 1, "compute_ms": 2})},
    )
    # Five runs locally, one of which re-drove a parked delivery (one more Query, a send)
    ran = Sample(
        3,
        {
            ("waiting", "dynamodb", "Query", "ledger"): Units({"requests": 6, "rru_strong:l": 6}),
            ("waiting", "sqs", "SendMessage", QUEUE): Units({"requests": 1, "billed": 1}),
        },
        {"waiting": Units({"invocations": 5, "compute_ms": 13})},
    )

    left = without_idle(ran, {"waiting": idle_run})

    assert left.events == 3
    assert left.aws[("waiting", "dynamodb", "Query", "ledger")] == Units(
        {"requests": 1, "rru_strong:l": 1}
    )
    assert left.aws[("waiting", "sqs", "SendMessage", QUEUE)]["billed"] == 1
    assert left.functions["waiting"] == Units({"compute_ms": 3})


def _measurement() -> Measurement:
    sample = _sample(events=2)
    return Measurement(
        {"orders": 52, "per_kind": 20, "seed": 42},
        dict.fromkeys(KINDS, sample),
        {"sweeper": sample, "waiting": sample, "reconciliation": sample},
        sample,
        "2026-11-30",
        200.0,
    )


def test_the_cost_page_section_is_in_the_shape_the_generator_writes(prices: Prices) -> None:
    written = block_between(COST_PAGE.read_text(), README_BEGIN, README_END)
    generated = render_block(_measurement(), prices, QUEUE)

    assert shape(written) == shape(generated)
    assert MIX in generated
    for kind in KINDS:
        assert f"| {kind} " in generated


def test_rewriting_the_cost_page_replaces_only_the_block() -> None:
    text = "before\n<!-- cost:begin -->\nold\n<!-- cost:end -->\nafter\n"
    block = "<!-- cost:begin -->\nnew\n<!-- cost:end -->\n"
    assert replace_between(text, README_BEGIN, README_END, block) == "before\n" + block + "after\n"
    with pytest.raises(ValueError, match="cost:begin"):
        replace_between("no markers", README_BEGIN, README_END, block)


def test_the_command_prints_the_page_section_then_each_functions_share() -> None:
    from costmodel.command import run_cost

    # When the committed measurement is priced again (no stack)
    out = io.StringIO()
    assert run_cost(CostOptions(from_json=MEASURED_PATH), out) == 0
    text = out.getvalue()

    # Then the terminal shows the page's markdown block, then one table of each function's
    # share of the drill mix (its time a run, local and modeled, and its DynamoDB), then what
    # the local stack made that nobody is billed for
    assert text.index(README_BEGIN) < text.index(README_END) < text.index("| drill mix, per event")
    assert re.search(r"^\| process \| [\d.]+ \| [\d.]+ ms \| [\d.]+ ms \| \$[\d.]+ \|$", text, re.M)
    assert re.search(r"^Not billed: [\d,]+ requests the local stack made itself", text, re.M)
