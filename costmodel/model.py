"""`umavez cost`: per million events, a scenario's counters x list price / its deliveries x
10^6 (a delivery: an HTTP request to the webhook API); what is not traffic, per month (bill.toml's
`monthly`). Its page: the cost section of docs/cost.md."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from costmodel import markdown as md
from costmodel import statement as st
from costmodel.measurement import (
    KINDS,
    MIX,
    TRACE_STARTERS,
    Measurement,
    Prices,
    Sample,
    figure,
    lambda_milliseconds,
    payer,
    secret_cache_seconds,
)
from devstack.capacity import Units
from functions.shared.tables import CHANGES_SHARDS
from functions.statement.sources import PROVIDERS, SCHEDULED
from infra.reconciliation import PASSES, RUNS_READING_AN_HOUR
from infra.settings import LAMBDA_MEMORY_MB, SCHEDULE_MINUTES

README_BEGIN, README_END = "<!-- cost:begin -->", "<!-- cost:end -->"
SES = "SES e-mail"  # its own row of the page, in neither total
COLUMNS = (*KINDS, MIX)
# The services billed per message (DynamoDB Streams reads by a Lambda trigger are free, the
# secrets' reads priced per month, the providers' APIs not AWS's).
BILLED_AS = {"events": "eventbridge_events", "sesv2": "ses_messages"}
BILL = tomllib.loads(Path(__file__).with_name("bill.toml").read_text())
TEXTS: dict[str, str] = BILL["texts"]


def usage(
    sample: Sample, prices: Prices, webhook_queue: str, statement: st.StatementModel | None = None
) -> Units:
    """What AWS would meter over the sample, in billing units; with `statement`, the statement
    passes' dollars on its movements (modeled, priced as Stripe's)."""
    used, a = Units(), prices.assumptions
    for key, units in sample.aws.items():
        if payer(key, webhook_queue) is None:
            continue
        if (service := key[1]) == "dynamodb":
            for metric, amount in units.items():
                if (kind := metric.split(":", 1)[0]).startswith(("wru_", "rru_")):
                    used["rru" if kind.startswith("rru") else kind] += amount
        elif service == "sqs":
            used["sqs_requests"] += units["billed"] - units["empty_receives"]
        elif service in BILLED_AS:
            used[BILLED_AS[service]] += units["billed"]
    # Lambda: invocations, GB-seconds (modeled in AWS), log bytes, traces.
    overhead = a["cloudwatch_log_event_overhead_bytes"]
    modeled = lambda_milliseconds(sample, prices)
    platform = a["lambda_platform_log_bytes"] + overhead * a["lambda_platform_log_lines"]
    log_bytes = 0.0
    for function, meters in sample.functions.items():
        if function in LAMBDA_MEMORY_MB:
            gigabytes = LAMBDA_MEMORY_MB[function] / 1024
            used["lambda_invocations"] += meters["invocations"]
            used["lambda_gb_seconds"] += modeled[function] / 1000 * gigabytes
            log_bytes += meters["log_bytes"] + meters["emf_bytes"]
            log_bytes += overhead * (meters["log_lines"] + meters["emf_lines"])
            log_bytes += meters["invocations"] * platform
    used["api_requests"] = sample.invocations("ingest")
    used["log_bytes"] = log_bytes + used["api_requests"] * (a["api_access_log_bytes"] + overhead)
    # A trace per sampled webhook: started by ingest with the HTTP API, by the REST stage at
    # `xraySampling`; the stream and the schedules start their own.
    own = sum(sample.invocations(f) for f in TRACE_STARTERS if f in sample.functions)
    own *= a["lambda_xray_sampling"]
    used["xray_traces_http"] = used["api_requests"] * a["lambda_xray_sampling"] + own
    used["xray_traces_rest"] = used["api_requests"] * a["xray_sampling"] + own
    if statement is not None:
        movements, orders = st.movements_and_orders_changed(sample)
        used["statement_lines"] = movements * statement.reads[st.PRICED_AS].reads_of_each_row
        used["statement_usd"] = sum(statement.usd(prices, st.PRICED_AS, movements, orders).values())
    return used


@dataclass(frozen=True)
class LineItem:
    """A row of the page (bill.toml's header says each field)."""

    name: str
    quantity: str
    unit: str
    priced_by: str
    http: bool = True
    rest: bool = True
    shown: str = ""

    def price(self, prices: Prices) -> float:
        if self.priced_by in ("", "xray"):
            return prices.xray_usd() if self.priced_by else 1.0
        rate = prices.rate(self.priced_by)
        return rate / 2**30 if self.priced_by.endswith("_gb") else rate


LINE_ITEMS = tuple(LineItem(**item) for item in BILL["line_items"])


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
    sample: Sample, prices: Prices, webhook_queue: str, statement: st.StatementModel | None = None
) -> Bill:
    used, events = usage(sample, prices, webhook_queue, statement), max(sample.events, 1)
    quantities = {i.name: used[i.shown or i.quantity] / events for i in LINE_ITEMS}
    per_million = {i.name: used[i.quantity] / events * i.price(prices) * 1e6 for i in LINE_ITEMS}
    return Bill(sample.events, quantities, per_million)


@dataclass(frozen=True)
class MonthlyItem:
    name: str
    how: str
    usd: float
    rest_only: bool = False


def fixed_monthly(
    idle: Mapping[str, Sample], prices: Prices, webhook_queue: str
) -> list[MonthlyItem]:
    """What the stack costs a month whatever the events: the scheduled runs (each its measured
    idle run), then what stands (bill.toml's `monthly`)."""
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
    a = prices.assumptions
    hours = a["hours_per_month"]
    statement_runs = {p: hours * 3600 / st.period_seconds(p) for p in SCHEDULED}
    runs = sum(statement_runs.values())
    statement_usd = sum(n * st.run_usd(prices, p) for p, n in statement_runs.items())
    polls = a["sqs_event_source_pollers"] * hours * 3600 / a["sqs_long_poll_seconds"]
    reads = a["warm_containers"] * a["secrets_read_per_container"] * hours * 3600
    reads /= secret_cache_seconds()
    reconciliations = hours * 60 / SCHEDULE_MINUTES["reconciliation"]
    # At most: Plan, the Map and Finish, and per unit (a pass of an hour of a shard) a check,
    # its Choice, its Succeed.
    transitions = 3 + 3 * PASSES * RUNS_READING_AN_HOUR * CHANGES_SHARDS
    every = ", ".join(f"{p} every {st.period_seconds(p) / 3600:g} h" for p in SCHEDULED)
    figures = {"a": a, "every": every, "runs": runs, "usd_a_run": statement_usd / runs}
    figures |= {"polls": polls, "reads": reads, "reconciliations": reconciliations}
    figures["transitions"] = transitions
    names = SimpleNamespace(**figures, statement_usd=statement_usd)
    names.a, names.rate = SimpleNamespace(**a), SimpleNamespace(**prices.rates)
    usd = {key: float(figure(names, item["usd"])) for key, item in BILL["monthly"].items()}
    return figures, usd


def render_block(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """The cost section of docs/cost.md, its markers included."""
    statement = st.statement_model(measurement, prices)
    scenarios = measurement.scenarios()
    bills = [
        bill(scenarios[c], prices, webhook_queue, statement) if c in scenarios else None
        for c in COLUMNS
    ]
    mix = bills[-1].events if bills[-1] else 0
    a, monthly = prices.assumptions, fixed_monthly(measurement.idle, prices, webhook_queue)
    return md.block(
        README_BEGIN,
        README_END,
        TEXTS["intro"].format(o=measurement.options, m=measurement, a=a, mix=mix),
        _per_million(bills),
        "What each event used (per event, in billing units):",
        _per_event(bills),
        TEXTS["statement"].format(s=statement, a=a),
        _statement_table(statement, prices),
        "Fixed per month (not per event):",
        _monthly(monthly),
    )


def _per_million(bills: Sequence[Bill | None]) -> list[str]:
    rows = [
        [item.name, *(md.usd(b.per_million[item.name]) if b else "-" for b in bills)]
        for item in LINE_ITEMS
        if item.name != SES
    ]
    for label, rest in (("**total, HTTP API**", False), ("**total, REST API + WAF**", True)):
        totals = [(b.rest_total if rest else b.http_total) if b else None for b in bills]
        rows.append([label, *("-" if t is None else f"**{md.usd(t)}**" for t in totals)])
    ses = [md.usd(b.per_million[SES]) if b else "-" for b in bills]
    rows.append([f"{SES} (not in the totals)", *ses])
    return md.table(["per million events", *COLUMNS], "l" + "r" * len(COLUMNS), rows)


def _per_event(bills: Sequence[Bill | None]) -> list[str]:
    rows = [
        [
            "API Gateway / WAF" if item.name == "API Gateway HTTP API" else item.name,
            item.unit,
            *(md.quantity(b.quantities[item.name]) if b else "-" for b in bills),
        ]
        for item in LINE_ITEMS
        if item.name not in ("API Gateway REST API", "WAF")
    ]
    return md.table(["per event", "unit", *COLUMNS], "ll" + "r" * len(COLUMNS), rows)


def _statement_table(model: st.StatementModel, prices: Prices) -> list[str]:
    rows = []
    for provider in PROVIDERS:
        one = model.usd(prices, provider, model.movements_per_payment, 1)
        usd = {k: v * 1e6 for k, v in one.items()}
        calls = model.reads[provider].calls_per_payment() * 1e6
        read = model.lines_per_payment(provider) * 1e6
        total = f"**{md.usd(sum(usd.values()))}**"
        cells = [md.usd(usd["Lambda duration"]), md.usd(usd["DynamoDB"]), total]
        rows.append([provider, md.quantity(calls), md.quantity(read), *cells])
    columns = ["per million payments", "API calls", "lines read", "Lambda duration"]
    return md.table([*columns, "DynamoDB", "total"], "lrrrrr", rows)


def _monthly(monthly: Sequence[MonthlyItem]) -> list[str]:
    rows = [
        [f"{e.name} (REST + WAF only)" if e.rest_only else e.name, e.how, md.usd(e.usd)]
        for e in monthly
    ]
    http = sum(e.usd for e in monthly if not e.rest_only)
    rows.append(["**total, HTTP API**", "", f"**{md.usd(http)}**"])
    rows.append(["**total, REST API + WAF**", "", f"**{md.usd(sum(e.usd for e in monthly))}**"])
    return md.table(["item", "how", "per month"], "llr", rows)


def shape(block: str) -> str:
    """The block with every number masked: what the generator fixes, not what it measured."""
    return re.sub(r"\d[\d,.]*", "#", block)


def render_details(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """For the terminal: each function's share of the drill mix, per event (the local wall
    clock an upper bound on the modeled time) and the requests nobody is billed for."""
    name = MIX if MIX in (scenarios := measurement.scenarios()) else KINDS[0]
    sample, dynamodb = scenarios[name], Units()
    events, modeled = max(sample.events, 1), lambda_milliseconds(sample, prices)
    for key, units in sample.aws.items():
        if key[1] == "dynamodb" and (who := payer(key, webhook_queue)):
            dynamodb[who] += prices.dynamodb(units) / events * 1e6
    rows = []
    for f in sorted(f for f in sample.functions if f in LAMBDA_MEMORY_MB):
        runs = sample.functions[f]["invocations"]
        each = (
            f"{ms / runs:.1f} ms" if runs else "-"
            for ms in (sample.functions[f]["billed_ms"], modeled[f])
        )
        if runs or dynamodb[f]:
            rows.append([f, md.quantity(runs / events), *each, md.usd(dynamodb[f])])
    columns = [f"{name}, per event", "invocations", "a run, local wall clock", "in AWS, modeled"]
    lines = md.table([*columns, "DynamoDB per million"], "lrrrr", rows)
    local = f"{measurement.excluded_requests:,} requests the local stack made itself"
    return f"\n{md.paragraphs(lines, f'Not billed: {local} (drain, sinks, checks, polling).')}\n"
