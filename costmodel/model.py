"""`umavez cost`: the cost per million events, and the cost section of docs/cost.md.

Per million events = (a scenario's counters x list price) / its deliveries x 10^6; a delivery is
one HTTP request to the webhook API (a provider's retry is another). What is not traffic is
priced per month instead: the scheduled functions' runs (each run's measured idle cost, taken out
of the scenarios as many times as they ran), the event source mapping's empty long polls, the
secrets' reads. Lambda duration is modeled in AWS (measurement.py `lambda_milliseconds`). The
page's section keeps its shape whatever the numbers: `tests/unit/test_cost_model.py` holds it.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from costmodel import markdown as md
from costmodel import statement as statement_pass
from costmodel.measurement import (
    FUNCTION_MEMORY_MB,
    KINDS,
    MIX,
    PROVIDER_API,
    RRU_METRICS,
    SCHEDULE_MINUTES,
    TABLE_WRU_METRICS,
    TRACE_STARTERS,
    Measurement,
    Prices,
    Sample,
    lambda_milliseconds,
    of_kind,
    payer,
)
from costmodel.statement import STATEMENT_PRICED_AS, period_seconds, statement_run_usd
from devstack.capacity import Units
from functions.shared.tables import CHANGES_SHARDS
from infra.reconciliation import PASSES, RUNS_READING_AN_HOUR

README_BEGIN = "<!-- cost:begin -->"
README_END = "<!-- cost:end -->"
SES = "SES e-mail"  # its own row of the page, in neither total
COLUMNS = (*KINDS, MIX)
DYNAMODB_METRICS = (*TABLE_WRU_METRICS, "wru_index", *RRU_METRICS)
# The services billed by one counter of theirs: the quantity it goes to, and the counter.
BILLED_AS = {
    "dynamodbstreams": ("streams_reads", "requests"),
    "events": ("eventbridge_events", "billed"),
    "sesv2": ("ses_messages", "billed"),
    "secretsmanager": ("secrets_calls", "billed"),
    PROVIDER_API: ("provider_api_calls", "requests"),
}


def usage(
    sample: Sample,
    prices: Prices,
    webhook_queue: str,
    statement: statement_pass.StatementModel | None = None,
) -> Units:
    """What AWS would meter over the sample, in billing units; with `statement`, what the
    statement passes spend on its movements (in dollars: modeled, priced as Stripe's)."""
    used = _requests_usage(sample, webhook_queue)
    _lambda_usage(sample, prices, used)
    used["rru"] = sum(used[m] for m in RRU_METRICS)
    if statement is not None:
        movements, orders = statement_pass.movements_and_orders_changed(sample)
        reads = statement.reads[STATEMENT_PRICED_AS].reads_of_each_row
        used["statement_lines"] = movements * reads
        used["statement_usd"] = movements * statement_pass.statement_usd_per_movement(
            statement, prices, STATEMENT_PRICED_AS
        ) + orders * statement_pass.statement_usd_per_order_changed(statement, prices)
    return used


def _requests_usage(sample: Sample, webhook_queue: str) -> Units:
    used = Units()
    for key, units in sample.aws.items():
        service = key[1]
        if payer(key, webhook_queue) is None:
            continue
        if service == "dynamodb":
            for metric, amount in units.items():
                kind = metric.split(":", 1)[0]
                if kind in DYNAMODB_METRICS:
                    used[kind] += amount
        elif service == "sqs":
            used["sqs_requests"] += units["billed"] - units["empty_receives"]
        elif service in BILLED_AS:
            quantity, counter = BILLED_AS[service]
            used[quantity] += units[counter]
        else:
            used[f"unpriced:{service}"] += units["requests"]
    return used


def _lambda_usage(sample: Sample, prices: Prices, used: Units) -> None:
    """Invocations, GB-seconds (modeled in AWS, and as run locally), log bytes and traces."""
    a = prices.assumptions
    overhead = a["cloudwatch_log_event_overhead_bytes"]
    modeled = lambda_milliseconds(sample, prices)
    log_bytes = 0.0
    for function, meters in sample.functions.items():
        if function not in FUNCTION_MEMORY_MB:
            continue
        invocations = meters["invocations"]
        gigabytes = FUNCTION_MEMORY_MB[function] / 1024
        used["lambda_invocations"] += invocations
        used["lambda_gb_seconds"] += modeled[function] / 1000 * gigabytes
        used["local_gb_seconds"] += meters["billed_ms"] / 1000 * gigabytes
        log_bytes += meters["log_bytes"] + meters["emf_bytes"]
        log_bytes += overhead * (meters["log_lines"] + meters["emf_lines"])
        log_bytes += invocations * (
            a["lambda_platform_log_bytes"] + overhead * a["lambda_platform_log_lines"]
        )
    used["api_requests"] = sample.invocations("ingest")
    log_bytes += used["api_requests"] * (a["api_access_log_bytes"] + overhead)
    used["log_bytes"] = log_bytes
    # A trace per sampled webhook (infra/constructs/pipeline.py): started by ingest at Lambda's
    # rate with the HTTP API, by the REST stage at `xraySampling`; the stream and the schedules
    # start their own.
    lambda_rate = a["lambda_xray_sampling"]
    starters = sum(sample.invocations(f) for f in TRACE_STARTERS if f in sample.functions)
    own_traces = starters * lambda_rate
    used["xray_traces_http"] = used["api_requests"] * lambda_rate + own_traces
    used["xray_traces_rest"] = used["api_requests"] * a["xray_sampling"] + own_traces


@dataclass(frozen=True)
class LineItem:
    name: str
    quantity: str  # a key of `usage`
    unit: str
    priced_by: str  # a price of prices.toml (`_gb`: per GB); "xray": a trace; "": dollars
    http: bool = True  # in the HTTP API total
    rest: bool = True  # in the REST + WAF total
    shown: str = ""  # the quantity the per-event table shows, when not the one priced

    def price(self, prices: Prices) -> float:
        if self.priced_by in ("", "xray"):
            return prices.xray_usd() if self.priced_by else 1.0
        rate = prices.rate(self.priced_by)
        return rate / 2**30 if self.priced_by.endswith("_gb") else rate


BILL = tomllib.loads(Path(__file__).with_name("bill.toml").read_text())
LINE_ITEMS = tuple(LineItem(**item) for item in BILL["line_items"])
TEXTS: dict[str, str] = BILL["texts"]


@dataclass(frozen=True)
class Bill:
    """One scenario: per event, the quantity and the dollars per million events of each line."""

    events: int
    quantities: dict[str, float]  # per event, by line item name
    per_million: dict[str, float]  # USD per million events, by line item name

    @property
    def http_total(self) -> float:
        return sum(self.per_million[i.name] for i in LINE_ITEMS if i.http)

    @property
    def rest_total(self) -> float:
        return sum(self.per_million[i.name] for i in LINE_ITEMS if i.rest)


def bill(
    sample: Sample,
    prices: Prices,
    webhook_queue: str,
    statement: statement_pass.StatementModel | None = None,
) -> Bill:
    used = usage(sample, prices, webhook_queue, statement)
    events = max(sample.events, 1)
    quantities = {i.name: used[i.shown or i.quantity] / events for i in LINE_ITEMS}
    per_million = {i.name: used[i.quantity] / events * i.price(prices) * 1e6 for i in LINE_ITEMS}
    return Bill(sample.events, quantities, per_million)


@dataclass(frozen=True)
class MonthlyItem:
    name: str
    how: str
    usd: float
    rest_only: bool = False


def reconciliation_transitions_per_run() -> int:
    """When every unit it may plan holds changes: Plan, the Map and Finish, and per unit (a
    pass of an hour of a shard; each pass reads two hours) a check, its Choice, its Succeed."""
    return 3 + 3 * PASSES * RUNS_READING_AN_HOUR * CHANGES_SHARDS


def fixed_monthly(
    idle: Mapping[str, Sample], prices: Prices, webhook_queue: str
) -> list[MonthlyItem]:
    """What the stack costs a month whatever the events: the scheduled runs (each as its
    measured idle run; the statement's modeled), then what stands (bill.toml's `monthly`)."""
    hours = prices.assumptions["hours_per_month"]
    items = []
    for function, minutes in SCHEDULE_MINUTES.items():
        if run := idle.get(function):
            runs = hours * 60 / minutes
            one = bill(Sample(1, run.aws, run.functions), prices, webhook_queue).http_total
            how = f"{runs:,.0f} runs x ${one / 1e6:.7f} measured idle run"
            items.append(MonthlyItem(f"{function} (every {minutes} min)", how, runs * one / 1e6))
    figures, usd = _standing(prices)
    for key, text in BILL["monthly"].items():
        name, how = text["name"].format(**figures), text["how"].format(**figures)
        items.append(MonthlyItem(name, how, usd[key], text.get("rest_only", False)))
    return items


def _standing(prices: Prices) -> tuple[dict[str, Any], dict[str, float]]:
    """The month's figures bill.toml's texts name, and each standing item's dollars."""
    a, rate = prices.assumptions, prices.rate
    hours = a["hours_per_month"]
    # A run per provider on its cadence: Stripe's and Mercado Pago's hourly, Asaas's daily.
    scheduled = statement_pass.SCHEDULED_RUNS
    statement_runs = {p: hours * 3600 / period_seconds(p) for p in scheduled}
    runs = sum(statement_runs.values())
    statement_usd = sum(n * statement_run_usd(prices, p) for p, n in statement_runs.items())
    pollers, poll_seconds = a["sqs_event_source_pollers"], a["sqs_long_poll_seconds"]
    polls = pollers * hours * 3600 / poll_seconds
    # Secrets are read through a 5-minute cache: the calls follow the warm containers.
    warm, per_container = a["warm_containers"], a["secrets_read_per_container"]
    reads = warm * per_container * hours * 60 / 5
    reconciliations = hours * 60 / SCHEDULE_MINUTES["reconciliation"]
    transitions = reconciliation_transitions_per_run()
    transition = rate("step_functions_state_transition")
    every = ", ".join(f"{p} every {period_seconds(p) / 3600:g} h" for p in scheduled)
    figures = {"a": a, "every": every, "runs": runs, "usd_a_run": statement_usd / runs}
    figures |= {"polls": polls, "reads": reads, "reconciliations": reconciliations}
    figures["transitions"] = transitions
    usd = {
        "statement": statement_usd,
        "statement_metrics": a["statement_custom_metrics"] * rate("cloudwatch_custom_metric_month"),
        "long_polls": polls * rate("sqs_request"),
        "secrets": a["secrets"] * rate("secrets_manager_secret_month"),
        "secret_reads": reads * rate("secrets_manager_api_call"),
        "reconciliation_runs": reconciliations * transitions * transition,
        "kms_key": rate("kms_key_month"),
        "dashboard": rate("cloudwatch_dashboard_month"),
        "waf_web_acl": rate("waf_web_acl_month") + a["waf_rules"] * rate("waf_rule_month"),
    }
    return figures, usd


# -- the page's section and the terminal's details ------------------------------------------------


def render_block(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """The cost section of docs/cost.md, its markers included."""
    statement = statement_pass.statement_model(measurement, prices)
    scenarios = measurement.scenarios().items()
    bills = {name: bill(sample, prices, webhook_queue, statement) for name, sample in scenarios}
    mix = bills[MIX].events if MIX in bills else 0
    intro = TEXTS["intro"].format(
        o=measurement.options, m=measurement, a=prices.assumptions, mix=mix
    )
    lines = [
        README_BEGIN,
        intro,
        "",
        *_per_million([bills.get(c) for c in COLUMNS]),
        "",
        "What each event used (per event, in billing units):",
        "",
        *_per_event([bills.get(c) for c in COLUMNS]),
        "",
        *render_statement_block(statement, prices),
        "",
        "Fixed per month (not per event):",
        "",
        *_monthly(fixed_monthly(measurement.idle, prices, webhook_queue)),
        README_END,
    ]
    return "\n".join(lines) + "\n"


def _per_million(bills: Sequence[Bill | None]) -> list[str]:
    """A column per scenario, "-" where it was not measured."""
    lines = md.table_head(["per million events", *COLUMNS], "l" + "r" * len(COLUMNS))
    for item in LINE_ITEMS:
        if item.name != SES:
            cells = [md.usd(b.per_million[item.name]) if b else "-" for b in bills]
            lines.append(md.row([item.name, *cells]))
    for label, rest in (("**total, HTTP API**", False), ("**total, REST API + WAF**", True)):
        totals = [(b.rest_total if rest else b.http_total) if b else None for b in bills]
        lines.append(md.row([label, *("-" if t is None else f"**{md.usd(t)}**" for t in totals)]))
    ses = [md.usd(b.per_million[SES]) if b else "-" for b in bills]
    return [*lines, md.row([f"{SES} (not in the totals)", *ses])]


def _per_event(bills: Sequence[Bill | None]) -> list[str]:
    lines = md.table_head(["per event", "unit", *COLUMNS], "ll" + "r" * len(COLUMNS))
    for item in LINE_ITEMS:
        if item.name in ("API Gateway REST API", "WAF"):
            continue
        name = "API Gateway / WAF" if item.name == "API Gateway HTTP API" else item.name
        used = [md.quantity(b.quantities[item.name]) if b else "-" for b in bills]
        lines.append(md.row([name, item.unit, *used]))
    return lines


def _monthly(monthly: Sequence[MonthlyItem]) -> list[str]:
    lines = md.table_head(["item", "how", "per month"], "llr")
    for entry in monthly:
        name = f"{entry.name} (REST + WAF only)" if entry.rest_only else entry.name
        lines.append(md.row([name, entry.how, md.usd(entry.usd)]))
    http = sum(e.usd for e in monthly if not e.rest_only)
    return [
        *lines,
        f"| **total, HTTP API** | | **{md.usd(http)}** |",
        f"| **total, REST API + WAF** | | **{md.usd(sum(e.usd for e in monthly))}** |",
    ]


def render_statement_block(model: statement_pass.StatementModel, prices: Prices) -> list[str]:
    """The statement pass per million payments of one provider: its reads differ, its
    DynamoDB per line does not."""
    lines = [
        TEXTS["statement"].format(s=model, a=prices.assumptions),
        "",
        "| per million payments | API calls | lines read | Lambda duration | DynamoDB | total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for provider in statement_pass.PROVIDERS_A_RUN:
        usd = statement_pass.statement_usd_per_payment(model, prices, provider)
        calls = model.reads[provider].calls_per_payment() * 1e6
        read = model.lines_per_payment(provider) * 1e6
        lines.append(
            f"| {provider} | {md.quantity(calls)} | {md.quantity(read)} | "
            f"{md.usd(usd['Lambda duration'] * 1e6)} | {md.usd(usd['DynamoDB'] * 1e6)} | "
            f"**{md.usd(sum(usd.values()) * 1e6)}** |"
        )
    return lines


def shape(block: str) -> str:
    """The block with every number masked: what the generator fixes, not what it measured."""
    return re.sub(r"\d[\d,.]*", "#", block)


def render_details(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """For the terminal: where the drill mix's DynamoDB capacity and Lambda time go."""
    scenarios = measurement.scenarios()
    name = MIX if MIX in scenarios else KINDS[0]
    sample = scenarios[name]
    events = max(sample.events, 1)
    out = [f"\n  DynamoDB per event, {name} (by who pays, request and table):"]
    rows = []
    for key, units in sample.aws.items():
        who = payer(key, webhook_queue)
        if who is None or key[1] != "dynamodb":
            continue
        wru, rru = of_kind(units, "wru"), of_kind(units, "rru")
        usd = prices.dynamodb(units) / events * 1e6
        rows.append(
            (usd, who, key[2], key[3], units["requests"] / events, wru / events, rru / events)
        )
    for usd, who, operation, table, requests, wru, rru in sorted(rows, reverse=True):
        out.append(
            f"    {who:<24} {operation:<20} {table:<16} {requests:6.2f} req  "
            f"{wru:6.2f} WRU  {rru:6.2f} RRU  {md.usd(usd):>8}/M"
        )
    out.append(f"\n  Lambda per event, {name} (local wall clock; own work; modeled in AWS):")
    waits, calls = Units(), Units()
    for (caller, service, operation, _), units in sample.aws.items():
        waits[caller] += units["requests"] * prices.latency(service, operation)
        calls[caller] += units["requests"]
    for function, meters in sorted(sample.functions.items()):
        runs = meters["invocations"]
        if function not in FUNCTION_MEMORY_MB or not runs:
            continue
        modeled = (meters["compute_ms"] + waits[function]) / runs + 0.5
        out.append(
            f"    {function:<16} {runs / events:5.2f} invocations of "
            f"{FUNCTION_MEMORY_MB[function]:>4} MB: {meters['billed_ms'] / runs:7.1f} ms local, "
            f"{meters['compute_ms'] / runs:6.1f} ms own work + {calls[function] / runs:5.1f} "
            f"AWS calls = {modeled:6.1f} ms modeled; "
            f"{(meters['log_bytes'] + meters['emf_bytes']) / runs:5.0f} log bytes"
        )
    out.append(
        f"\n  not billed: {measurement.excluded_requests:,} requests the local stack made itself "
        "(drain, sinks, checks, polling)\n"
    )
    return "\n".join(out)
