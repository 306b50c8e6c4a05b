"""What `umavez capacity` prints (the table at a rate, text or JSON; a burst's drain) and the
sections it generates: docs/performance.md's (the components, the statement pass) and the
README's short table. Never edited by hand: the tests hold the pages to these functions."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from costmodel import statement as statement_pass
from costmodel.burst import Burst, burst
from costmodel.headroom import CAPACITY_TABLE, QUOTA_INCREASE, Capacity, Row, model
from costmodel.markdown import duration, headroom, number, row, table_head
from costmodel.measurement import DAY, Quotas, StackSettings
from costmodel.per_event import PerEvent
from costmodel.statement import WORKERS, hours_read_of_each_day_hour

DOCS_BEGIN = "<!-- capacity:begin -->"
DOCS_END = "<!-- capacity:end -->"
STATEMENT_BEGIN = "<!-- statement-capacity:begin -->"
STATEMENT_END = "<!-- statement-capacity:end -->"
SUMMARY_BEGIN = "<!-- capacity-summary:begin -->"
SUMMARY_END = "<!-- capacity-summary:end -->"
DOC_RATES = (10.0, 100.0, 1000.0)
# The pages' texts and a provider's verdict in parts, of capacity.toml.
TEXTS: dict[str, str] = CAPACITY_TABLE["texts"]
VERDICT: dict[str, str] = CAPACITY_TABLE["verdict"]


def describe(e: PerEvent) -> str:
    per_payment = e.deliveries_per_payment
    work = {"ingest": e.invocations.get("ingest", 0.0), "process": e.queue_messages}
    work |= {"outbox": e.outbox_items, "reconciliation": 1 / max(per_payment, 1e-9)}
    ms = {f: f"{e.seconds_per(f, per) * 1000:.0f} ms" for f, per in work.items()}
    per = {"messages": e.queue_messages, "items": e.outbox_items, "emails": e.emails}
    per = {name: amount * per_payment for name, amount in per.items()}
    return TEXTS["describe"].format(per_payment=per_payment, **per, **ms)


def render_text(capacity: Capacity, per_event: PerEvent, burst_result: Burst | None) -> str:
    lines = [
        f"capacity at {capacity.payments_per_second:g} payments/s "
        f"({capacity.deliveries_per_second:,.1f} webhook deliveries/s), measured "
        f"{per_event.measured_on}",
        "",
        f"  {'component':<72} {'load':>10} {'limit':>10} {'headroom':>9}  unit",
    ]
    for r in capacity.rows:
        lines.append(
            f"  {r.component:<72} {number(r.load):>10} {number(r.limit):>10} "
            f"{headroom(r.headroom).strip('*'):>9}  {r.unit}"
        )
    first = capacity.first_to_saturate()
    path = capacity.first_to_saturate(webhook_path_only=True)
    lines += ["", f"  first to saturate: {first.component} ({_plain(first)})"]
    lines.append(f"    lifted by: {first.lift}")
    if path is not first:
        lines.append(
            f"  on a webhook's way: {path.component} ({_plain(path)}); lifted by: {path.lift}"
        )
    rest = capacity.first_to_saturate(rest=True)
    if rest is not first:
        lines.append(f"  with REST + WAF: {rest.component}; lifted by: {rest.lift}")
    if burst_result is not None:
        lines += ["", *render_burst(burst_result)]
    return "\n".join(lines) + "\n"


def _plain(r: Row) -> str:
    return headroom(r.headroom).strip("*")


def render_burst(result: Burst) -> list[str]:
    lines = [
        f"  a burst of {result.deliveries:,} deliveries at once:",
        f"    taken in at {result.intake_per_second:,.0f}/s ({result.intake_bottleneck}); "
        f"processed at {result.process_per_second:,.1f}/s; queue peak "
        f"{result.queue_peak:,.0f} messages",
        f"    drained in {duration(result.drain_seconds)}; notifications sent within "
        f"{duration(result.outbox_seconds)}, e-mails within {duration(result.email_seconds)}; "
        f"the reconciliation checks its orders in {duration(result.reconciliation_seconds)}",
    ]
    for deadline in result.deadlines:
        lines.append(
            f"    {deadline.what}: {duration(max(deadline.waits_seconds, 0))} of at most "
            f"{duration(deadline.limit_seconds)}"
            + ("" if deadline.kept else f": PAST IT, {deadline.then}")
        )
    return lines


def to_json(capacity: Capacity, per_event: PerEvent, burst_result: Burst | None) -> dict[str, Any]:
    def row(r: Row) -> dict[str, Any]:
        found = asdict(r)
        found["headroom"] = None if math.isinf(r.headroom) else r.headroom
        return found

    first = capacity.first_to_saturate()
    return {
        "payments_per_second": capacity.payments_per_second,
        "deliveries_per_second": capacity.deliveries_per_second,
        "deliveries_per_payment": per_event.deliveries_per_payment,
        "measured_on": per_event.measured_on,
        "rows": [row(r) for r in capacity.rows],
        "first_to_saturate": row(first),
        "first_on_webhook_path": row(capacity.first_to_saturate(webhook_path_only=True)),
        "burst": None
        if burst_result is None
        else {
            **{k: v for k, v in asdict(burst_result).items() if k != "deadlines"},
            "deadlines": [{**asdict(d), "kept": d.kept} for d in burst_result.deadlines],
        },
    }


def render_docs_block(
    per_event: PerEvent,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
    rates: Sequence[float] = DOC_RATES,
    burst_deliveries: int = 1_000_000,
) -> str:
    """The capacity section of docs/performance.md."""
    settings, quotas = settings or StackSettings(), quotas or Quotas.load()
    models = [model(per_event, rate, settings, quotas) for rate in rates]
    lines = [
        DOCS_BEGIN,
        TEXTS["docs"].format(e=per_event, s=settings, q=quotas, described=describe(per_event)),
        "",
        *rates_table(rates, [m.rows for m in models]),
        "",
        "First to saturate, and the setting that lifts it:",
        "",
        *(_saturation(m) for m in models),
    ]
    example = burst(per_event, burst_deliveries, models[0], settings)
    lines += [
        "",
        TEXTS["docs_burst"].format(n=burst_deliveries),
        "",
        *(line.strip() and f"- {line.strip()}" for line in render_burst(example)[1:]),
        DOCS_END,
    ]
    return "\n".join(lines) + "\n"


def _saturation(m: Capacity) -> str:
    """A rate's line: what saturates first, on a webhook's way, with REST + WAF, and after."""

    def said(r: Row) -> str:
        return f"{r.component} ({headroom(r.headroom)}): {r.lift}"

    first = m.first_to_saturate()
    path = m.first_to_saturate(webhook_path_only=True)
    rest = m.first_to_saturate(rest=True, webhook_path_only=True)
    text = (
        f"- **{m.payments_per_second:,.0f} payments a second** "
        f"({m.deliveries_per_second:,.0f} deliveries): {said(first)}."
    )
    if path is not first:
        text += f" On a webhook's way: {said(path)}."
    if rest is not path:
        text += f" With REST + WAF: {said(rest)}."
    saturated = [r for r in m.saturated() if r is not first and r is not path]
    if saturated:
        text += " Also saturated: " + "; ".join(said(r) for r in saturated) + "."
    return text


def rates_table(
    rates: Sequence[float], at_each: Sequence[Sequence[Row]], no_limit: str = "unlimited"
) -> list[str]:
    """A line per component: its unit, its limit (linked to its page) and, at each rate (the
    rows of `at_each`, in the same order), its load and headroom."""
    columns = ["component", "unit", "limit", *(f"{r:,.0f}/s: load | headroom" for r in rates)]
    lines = table_head(columns, "llr" + "rr" * len(rates))
    for n, first in enumerate(at_each[0]):
        limit = no_limit if first.limit is None else number(first.limit)
        if first.source.startswith("https://"):
            limit = f"[{limit}]({first.source})"
        cells = (f"{number(r[n].load)} | {headroom(r[n].headroom)}" for r in at_each)
        lines.append(row([first.component, first.unit, limit, *cells]))
    return lines


def render_summary_block(
    per_event: PerEvent,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
    rates: Sequence[float] = DOC_RATES,
) -> str:
    """The README's short table: the rate, what gives first, what lifts it."""
    settings, quotas = settings or StackSettings(), quotas or Quotas.load()
    models = [model(per_event, rate, settings, quotas) for rate in rates]
    lines = [
        SUMMARY_BEGIN,
        TEXTS["summary_head"],
        "|---:|---|---|",
    ]
    for m in models:
        first = m.first_to_saturate(webhook_path_only=True)
        # Each setting once, without where it lives: the performance page says that.
        lifts = list(dict.fromkeys(_brief(r.lift) for r in m.saturated() if r.webhook_path))
        lines.append(
            f"| {m.payments_per_second:,.0f} | {first.component} ({headroom(first.headroom)}) | "
            + "; ".join(lifts or ["none"])
            + " |"
        )
    limit = models[0].rows[-1].limit or 0  # the reconciliation's, the table's last stage
    behind = [f"{m.payments_per_second:,.0f}" for m in models if m.rows[-1].headroom < 1]
    behind_at = f" (behind at {', '.join(behind)} a second)" if behind else ""
    reconciliation = TEXTS["summary_reconciliation"].format(limit=limit, behind=behind_at)
    lines += ["", reconciliation, SUMMARY_END]
    return "\n".join(lines) + "\n"


def _brief(lift: str) -> str:
    return re.sub(r" in [\w/]+\.py| \([^)]*\)", "", lift)


# -- the statement pass ---------------------------------------------------------------------------


def _period(load: statement_pass.PassLoad) -> str:
    return "a day" if load.period_seconds >= DAY else "an hour"


def statement_rows(load: statement_pass.PassLoad, quotas: Quotas) -> list[Row]:
    """One provider's pass at a rate, on its cadence: its API calls against the provider's
    limit, one invocation's budget, the DynamoDB units it adds (off a webhook's way)."""
    provider, limit, budget = load.provider, load.limit, statement_pass.TIMEOUT_SECONDS
    calls = (
        "averaged over the hour"
        if load.period_seconds < DAY
        else f"the day's pass in one {limit.window_seconds / 3600:g}-hour quota window, and "
        "process's reads"
    )
    invocation = (
        f"{provider}: one invocation, {budget} s ({load.seconds_per_line * 1000:.0f} ms a line)"
    )
    needed = f"{load.invocations_a_run_needed:,} invocations of {budget} s {_period(load)}"
    one = load.payments_per_second_one_invocation_keeps_up_with
    rows = [
        Row(
            f"{provider}: API calls ({calls})",
            load.api_calls_per_second,
            limit.per_second,
            "requests/s",
            limit.note,
            limit.source,
        ),
        Row(
            invocation,
            load.payments_per_second,
            one,
            "payments/s",
            needed,
            "costmodel/statement.py",
        ),
    ]
    for kind, units, unit in (
        ("reads", load.rru_per_second, "RRU/s"),
        ("writes", load.wru_per_second, "WRU/s"),
    ):
        quota = f"dynamodb_table_{kind[:-1]}_units"
        component = f"{provider}: DynamoDB {kind} of the scheduled passes"
        rows.append(
            Row(component, units, quotas.value(quota), unit, QUOTA_INCREASE, quotas.source(quota))
        )
    return [replace(r, webhook_path=False) for r in rows]


def statement_verdict(load: statement_pass.PassLoad) -> str:
    """Whether one invocation and the provider's limit carry the rate, and what to do if not."""
    budget, limit = statement_pass.TIMEOUT_SECONDS, load.limit.per_second
    needed = load.payments_per_second * load.lines_per_payment
    daily = load.period_seconds >= DAY
    figures: dict[str, Any] = {
        "l": load,
        "budget": budget,
        "needed": needed,
        "lines_a_day": needed * load.period_seconds,
        "booked_a_run": load.lines_per_second_booked * budget,
        "work": duration(load.work_seconds_a_run),
        "period": _period(load),
        "window": "the day's" if daily else "the hour's",
        "calls": number(load.api_calls_per_second),
    }
    parts = ["daily" if daily else "hourly", "keeps_up" if load.keeps_up else "falls_behind"]
    if limit is None:
        parts.append("no_limit")
    else:
        parts.append("within" if load.within_rate_limit else "over")
        figures |= {"limit": number(limit), "headroom": headroom(limit / load.api_calls_per_second)}
    most = load.payments_a_day_within_limit
    if daily and most is not None:
        parts.append("most")
        figures["most"] = number(most)
    return "".join(VERDICT[part].format(**figures) for part in parts)


def render_statement_block(
    model_: statement_pass.StatementModel,
    quotas: Quotas | None = None,
    rates: Sequence[float] = DOC_RATES,
) -> str:
    """The statement pass's section of docs/performance.md."""
    quotas = quotas or Quotas.load()
    loads = {
        provider: [model_.load(provider, rate) for rate in rates]
        for provider in statement_pass.PROVIDERS_A_RUN
    }
    header = [f"{rate:,.0f}/s: load | headroom" for rate in rates]
    figures = {
        "timeout": statement_pass.TIMEOUT_SECONDS,
        "workers": WORKERS,
        "hours_of_day": hours_read_of_each_day_hour(),
        "page_ms": model_.latency("provider-api", "page"),
        "get_ms": model_.latency("provider-api", "GET"),
    }
    lines = [
        STATEMENT_BEGIN,
        TEXTS["statement"].format(m=model_, **figures),
        "",
        *table_head(["component", "unit", "limit", *header], "llr" + "rr" * len(rates)),
    ]
    for provider in statement_pass.PROVIDERS_A_RUN:
        at_each = [statement_rows(load, quotas) for load in loads[provider]]
        # A provider that publishes no limit has none to hold the load to, not an unlimited one.
        lines += rates_table(rates, at_each, no_limit="not published")[2:]
    lines += ["", "Per rate, what one invocation and the provider's limit carry:", ""]
    for n, rate in enumerate(rates):
        verdicts = "; ".join(statement_verdict(loads[p][n]) for p in statement_pass.PROVIDERS_A_RUN)
        lines.append(f"- **{rate:,.0f} payments a second**: {verdicts}.")
    lines.append(STATEMENT_END)
    return "\n".join(lines) + "\n"
