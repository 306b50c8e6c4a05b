"""What `umavez cost` prints and writes: the cost section of docs/cost.md (its shape never
depends on the numbers: `tests/unit/test_cost_model.py` holds the page to it) and, for the
terminal, where the drill mix's DynamoDB capacity and Lambda time go."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from costmodel import markdown as md
from costmodel import statement as statement_pass
from costmodel.measurement import (
    FUNCTION_MEMORY_MB,
    KINDS,
    MIX,
    Measurement,
    Prices,
    of_kind,
    payer,
)
from costmodel.model import (
    LINE_ITEMS,
    Bill,
    MonthlyItem,
    bill,
    fixed_monthly,
)
from costmodel.statement import statement_model, statement_usd_per_payment
from devstack.capacity import Units

README_BEGIN = "<!-- cost:begin -->"
README_END = "<!-- cost:end -->"
SES = "SES e-mail"


def render_block(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """The cost section between its markers (in docs/cost.md): its shape never depends on the
    numbers (`tests/unit/test_cost_model.py` checks docs/cost.md against it)."""
    statement = statement_model(measurement, prices)
    bills = {
        name: bill(sample, prices, webhook_queue, statement)
        for name, sample in measurement.scenarios().items()
    }
    options = measurement.options
    lines = [
        README_BEGIN,
        f"Measured by `make cost` (`umavez cost --orders {options['orders']} --per-kind "
        f"{options['per_kind']}`) on {measurement.measured_on}, on the embedded stack; list "
        "prices in us-east-1 from `costmodel/prices.toml`, arm64, X-Ray: the REST stage "
        f"samples {prices.assumptions['xray_sampling']:.0%} (`xraySampling`), Lambda "
        f"{prices.assumptions['lambda_xray_sampling']:.0%} of the traces it starts. Each kind: "
        f"{options['per_kind']} deliveries of its own; the drill mix: "
        f"{bills[MIX].events if MIX in bills else 0:,} deliveries (HTTP requests, retries "
        f"and forgeries included) of {options['orders']} orders, without faults.",
        "",
        *_per_million(bills),
        "",
        "What each event used (per event, in billing units):",
        "",
        *_per_event(bills),
        "",
        *render_statement_block(statement, prices),
        "",
        "Fixed per month (not per event):",
        "",
        *_monthly(fixed_monthly(measurement.idle, prices, webhook_queue)),
        README_END,
    ]
    return "\n".join(lines) + "\n"


COLUMNS = (*KINDS, MIX)


def _each(bills: Mapping[str, Bill]) -> list[Bill | None]:
    """Each column's bill, None where that scenario was not measured (written "-")."""
    return [bills.get(c) for c in COLUMNS]


def _per_million(bills: Mapping[str, Bill]) -> list[str]:
    lines = md.table_head(["per million events", *COLUMNS], "l" + "r" * len(COLUMNS))
    for item in LINE_ITEMS:
        if item.name != SES:
            cells = [md.usd(b.per_million[item.name]) if b else "-" for b in _each(bills)]
            lines.append(md.row([item.name, *cells]))
    for label, rest in (("**total, HTTP API**", False), ("**total, REST API + WAF**", True)):
        totals = [(b.rest_total if rest else b.http_total) if b else None for b in _each(bills)]
        lines.append(md.row([label, *("-" if t is None else f"**{md.usd(t)}**" for t in totals)]))
    ses = [md.usd(b.per_million[SES]) if b else "-" for b in _each(bills)]
    return [*lines, md.row([f"{SES} (not in the totals)", *ses])]


def _per_event(bills: Mapping[str, Bill]) -> list[str]:
    lines = md.table_head(["per event", "unit", *COLUMNS], "ll" + "r" * len(COLUMNS))
    for item in LINE_ITEMS:
        if item.name in ("API Gateway REST API", "WAF"):
            continue
        name = "API Gateway / WAF" if item.name == "API Gateway HTTP API" else item.name
        used = [md.quantity(b.quantities[item.name]) if b else "-" for b in _each(bills)]
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
    """The statement pass per million payments of one provider (its line above is Stripe's):
    each provider's reads differ, its DynamoDB per line does not."""
    booked_now = prices.assumptions["statement_booked_now_share"]
    lines = [
        "The statement pass per million payments of one provider (modeled, costmodel/statement.py:"
        f" {model.movements_per_payment:g} movements a payment, {booked_now:.0%}"
        " of them booked now, each order matched by the scheduled passes (Stripe's and Mercado"
        " Pago's hourly, Asaas's daily: each Brazil day once); the line above is priced as"
        " Stripe's):",
        "",
        "| per million payments | API calls | lines read | Lambda duration | DynamoDB | total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for provider in statement_pass.PROVIDERS_A_RUN:
        usd = statement_usd_per_payment(model, prices, provider)
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
    waits = Units()
    calls = Units()
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
