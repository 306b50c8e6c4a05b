"""What `umavez cost` prints and writes: the cost section of docs/cost.md (its shape never
depends on the numbers: `tests/unit/test_cost_model.py` holds the page to it) and, for the
terminal, where the drill mix's DynamoDB capacity and Lambda time go."""

from __future__ import annotations

import re

from costmodel import markdown as md
from costmodel import statement as statement_pass
from costmodel.measurement import FUNCTION_MEMORY_MB, KINDS, MIX, Measurement, Prices, payer
from costmodel.model import (
    LINE_ITEMS,
    bill,
    fixed_monthly,
    statement_model,
    statement_usd_per_payment,
)
from devstack.capacity import Units

README_BEGIN = "<!-- cost:begin -->"
README_END = "<!-- cost:end -->"


def render_block(measurement: Measurement, prices: Prices, webhook_queue: str) -> str:
    """The cost section between its markers (in docs/cost.md): its shape never depends on the
    numbers (`tests/unit/test_cost_model.py` checks docs/cost.md against it)."""
    scenarios = measurement.scenarios()
    statement = statement_model(measurement, prices)
    bills = {
        name: bill(sample, prices, webhook_queue, statement) for name, sample in scenarios.items()
    }
    columns = [*KINDS, MIX]
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
        "| per million events | " + " | ".join(columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for item in LINE_ITEMS:
        if item.name == "SES e-mail":
            continue
        lines.append(
            f"| {item.name} | "
            + " | ".join(
                md.usd(bills[c].per_million[item.name]) if c in bills else "-" for c in columns
            )
            + " |"
        )
    for label, rest in (("**total, HTTP API**", False), ("**total, REST API + WAF**", True)):
        lines.append(
            f"| {label} | "
            + " | ".join(
                f"**{md.usd(bills[c].rest_total if rest else bills[c].http_total)}**"
                if c in bills
                else "-"
                for c in columns
            )
            + " |"
        )
    lines.append(
        "| SES e-mail (not in the totals) | "
        + " | ".join(
            md.usd(bills[c].per_million["SES e-mail"]) if c in bills else "-" for c in columns
        )
        + " |"
    )
    lines += [
        "",
        "What each event used (per event, in billing units):",
        "",
        "| per event | unit | " + " | ".join(columns) + " |",
        "|---|---|" + "---:|" * len(columns),
    ]
    for item in LINE_ITEMS:
        if item.name in ("API Gateway REST API", "WAF"):
            continue
        name = "API Gateway / WAF" if item.name == "API Gateway HTTP API" else item.name
        lines.append(
            f"| {name} | {item.unit} | "
            + " | ".join(
                md.quantity(bills[c].quantities[item.name]) if c in bills else "-" for c in columns
            )
            + " |"
        )
    lines += ["", *render_statement_block(statement, prices)]
    lines += [
        "",
        "Fixed per month (not per event):",
        "",
        "| item | how | per month |",
        "|---|---|---:|",
    ]
    monthly = fixed_monthly(measurement.idle, prices, webhook_queue)
    for entry in monthly:
        name = f"{entry.name} (REST + WAF only)" if entry.rest_only else entry.name
        lines.append(f"| {name} | {entry.how} | {md.usd(entry.usd)} |")
    monthly_http = sum(e.usd for e in monthly if not e.rest_only)
    lines.append(f"| **total, HTTP API** | | **{md.usd(monthly_http)}** |")
    lines.append(f"| **total, REST API + WAF** | | **{md.usd(sum(e.usd for e in monthly))}** |")
    lines.append(README_END)
    return "\n".join(lines) + "\n"


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
        wru = sum(v for k, v in units.items() if k.split(":")[0].startswith("wru"))
        rru = sum(v for k, v in units.items() if k.split(":")[0].startswith("rru"))
        usd = (
            (
                wru * prices.rate("dynamodb_write_request_unit")
                + rru * prices.rate("dynamodb_read_request_unit")
            )
            / events
            * 1e6
        )
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
