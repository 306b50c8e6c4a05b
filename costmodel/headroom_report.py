"""What `umavez capacity` prints (the table at a rate, text or JSON; a burst's drain) and the
sections it generates: docs/performance.md's (the components, the statement pass) and the
README's short table. Never edited by hand: the tests hold the pages to these functions."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict
from types import SimpleNamespace
from typing import Any

from costmodel import statement as st
from costmodel.headroom import (
    CAPACITY_TABLE,
    STATEMENT_STAGES,
    Burst,
    Capacity,
    PerEvent,
    Row,
    StackSettings,
    burst,
    model,
)
from costmodel.markdown import block, duration, headroom, number, table
from costmodel.measurement import DAY, Quotas
from functions.statement.sources import PROVIDERS
from infra import settings as deployed

DOCS_BEGIN, DOCS_END = "<!-- capacity:begin -->", "<!-- capacity:end -->"
STATEMENT_BEGIN = "<!-- statement-capacity:begin -->"
STATEMENT_END = "<!-- statement-capacity:end -->"
SUMMARY_BEGIN, SUMMARY_END = "<!-- capacity-summary:begin -->", "<!-- capacity-summary:end -->"
DOC_RATES = (10.0, 100.0, 1000.0)
TEXTS: dict[str, str] = CAPACITY_TABLE["texts"]
VERDICT: dict[str, str] = CAPACITY_TABLE["verdict"]  # a provider's verdict, in parts


def render_rate(capacity: Capacity, per_event: PerEvent, result: Burst | None) -> str:
    """`umavez capacity --rate R`: the page's table, verdict and burst, at R."""
    head = f"Capacity at {capacity.payments_per_second:g} payments a second, measured "
    lines = [head + f"{per_event.measured_on}:", "", *rates_table([capacity.rows], [capacity])]
    lines += ["", _saturation(capacity)]
    if result:
        lines += ["", f"A burst of {result.deliveries:,} deliveries at once:", "", *_burst(result)]
    return "\n".join(lines) + "\n"


def _burst(r: Burst) -> list[str]:
    return [
        f"- taken in at {r.intake_per_second:,.0f}/s ({r.intake_bottleneck}); processed at "
        f"{r.process_per_second:,.1f}/s; queue peak {r.queue_peak:,.0f} messages",
        f"- drained in {duration(r.drain_seconds)}; notifications sent within "
        f"{duration(r.outbox_seconds)}, e-mails within {duration(r.email_seconds)}; "
        f"the reconciliation checks its orders in {duration(r.reconciliation_seconds)}",
        *(
            f"- {d.what}: {duration(max(d.waits_seconds, 0))} of at most "
            f"{duration(d.limit_seconds)}" + ("" if d.kept else f": PAST IT, {d.then}")
            for d in r.deadlines
        ),
    ]


def to_json(capacity: Capacity, per_event: PerEvent, result: Burst | None) -> dict[str, Any]:
    def row(r: Row) -> dict[str, Any]:
        return asdict(r) | {"headroom": None if math.isinf(r.headroom) else r.headroom}

    deadlines = [asdict(d) | {"kept": d.kept} for d in result.deadlines] if result else []
    return {
        "payments_per_second": capacity.payments_per_second,
        "deliveries_per_second": capacity.deliveries_per_second,
        "deliveries_per_payment": per_event.deliveries_per_payment,
        "measured_on": per_event.measured_on,
        "rows": [row(r) for r in capacity.rows],
        "first_to_saturate": row(capacity.first_to_saturate()),
        "first_on_webhook_path": row(capacity.first_to_saturate(webhook_path_only=True)),
        "burst": asdict(result) | {"deadlines": deadlines} if result else None,
    }


def describe(e: PerEvent) -> str:
    per_payment = e.deliveries_per_payment
    work = {"ingest": e.invocations.get("ingest", 0.0), "process": e.queue_messages}
    work |= {"outbox": e.outbox_items, "reconciliation": 1 / max(per_payment, 1e-9)}
    ms = {f: f"{e.seconds_per(f, per) * 1000:.0f} ms" for f, per in work.items()}
    per = {"messages": e.queue_messages, "items": e.outbox_items, "emails": e.emails}
    return TEXTS["describe"].format(
        per_payment=per_payment, **{k: v * per_payment for k, v in per.items()}, **ms
    )


def render_docs_block(
    per_event: PerEvent,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
    burst_deliveries: int = 1_000_000,
) -> str:
    """The capacity section of docs/performance.md."""
    settings, quotas = settings or StackSettings(), quotas or Quotas.load()
    models = [model(per_event, rate, settings, quotas) for rate in DOC_RATES]
    example = burst(per_event, burst_deliveries, models[0])
    intro = TEXTS["docs"].format(
        e=per_event, s=settings, q=quotas, settings=deployed, described=describe(per_event)
    )
    lines = [intro, "", *rates_table([m.rows for m in models], models), ""]
    lines += ["First to saturate, and the setting that lifts it:", "", *map(_saturation, models)]
    lines += ["", TEXTS["docs_burst"].format(n=burst_deliveries), ""]
    lines += _burst(example)
    return block(DOCS_BEGIN, lines, DOCS_END)


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
    text += f" On a webhook's way: {said(path)}." if path is not first else ""
    text += f" With REST + WAF: {said(rest)}." if rest is not path else ""
    if saturated := [r for r in m.saturated() if r is not first and r is not path]:
        text += " Also saturated: " + "; ".join(said(r) for r in saturated) + "."
    return text


def rates_table(
    at_each: Sequence[Sequence[Row]], rates: Sequence[Any], no_limit: str = "unlimited"
) -> list[str]:
    """A line per component: its unit, its limit (linked to its page) and, at each rate (the
    rows of `at_each`, `rates` their `payments_per_second`), its load and headroom."""
    at = [f"{number(r.payments_per_second)}/s: load | headroom" for r in rates]
    lines = []
    for n, first in enumerate(at_each[0]):
        limit = no_limit if first.limit is None else number(first.limit)
        if first.source.startswith("https://"):
            limit = f"[{limit}]({first.source})"
        cells = (f"{number(r[n].load)} | {headroom(r[n].headroom)}" for r in at_each)
        lines.append([first.component, first.unit, limit, *cells])
    return table(["component", "unit", "limit", *at], "llr" + "rr" * len(rates), lines)


def render_summary_block(
    per_event: PerEvent, settings: StackSettings | None = None, quotas: Quotas | None = None
) -> str:
    """The README's short table: the rate, what gives first, what lifts it."""
    models = [model(per_event, rate, settings, quotas) for rate in DOC_RATES]
    lines = []
    for m in models:
        first = m.first_to_saturate(webhook_path_only=True)
        # Each setting once, without where it lives: the performance page says that.
        lifts = dict.fromkeys(_brief(r.lift) for r in m.saturated() if r.webhook_path)
        said = f"{first.component} ({headroom(first.headroom)})"
        lines.append([f"{m.payments_per_second:,.0f}", said, "; ".join(lifts or ["none"])])
    limit = models[0].rows[-1].limit or 0  # the reconciliation's, the table's last stage
    behind = [f"{m.payments_per_second:,.0f}" for m in models if m.rows[-1].headroom < 1]
    behind_at = f" (behind at {', '.join(behind)} a second)" if behind else ""
    columns = ["payments/s", "first to saturate on a webhook's way"]
    columns.append("every setting to change, tightest first")
    reconciliation = TEXTS["summary_reconciliation"].format(limit=limit, behind=behind_at)
    return block(SUMMARY_BEGIN, [*table(columns, "rll", lines), "", reconciliation], SUMMARY_END)


def _brief(lift: str) -> str:
    return re.sub(r" in [\w/]+\.py| \([^)]*\)", "", lift)


# -- the statement pass ---------------------------------------------------------------------------


def statement_rows(load: st.PassLoad, quotas: Quotas) -> list[Row]:
    """One provider's pass at a rate, on its cadence: capacity.toml's `statement_stage`s."""
    calls = "averaged over the hour"
    if load.period_seconds >= DAY:
        window = load.limit.window_seconds / 3600
        calls = f"the day's pass in one {window:g}-hour quota window, and process's reads"
    ms_a_line, budget, period = load.seconds_per_line * 1000, st.TIMEOUT_SECONDS, _period(load)
    at = SimpleNamespace(
        l=load, q=quotas, calls=calls, ms_a_line=ms_a_line, budget=budget, period=period
    )
    return [row for stage in STATEMENT_STAGES for row in stage.rows(at)]


def _period(load: st.PassLoad) -> str:
    return "a day" if load.period_seconds >= DAY else "an hour"


def statement_verdict(load: st.PassLoad) -> str:
    """Whether one invocation and the provider's limit carry the rate, and what to do if not."""
    budget, limit, daily = st.TIMEOUT_SECONDS, load.limit.per_second, load.period_seconds >= DAY
    needed = load.payments_per_second * load.lines_per_payment
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
    if daily and (most := load.payments_a_day_within_limit) is not None:
        parts.append("most")
        figures["most"] = number(most)
    return "".join(VERDICT[part].format(**figures) for part in parts)


def render_statement_block(model_: st.StatementModel, quotas: Quotas | None = None) -> str:
    """The statement pass's section of docs/performance.md."""
    quotas = quotas or Quotas.load()
    loads = {p: [model_.load(p, rate) for rate in DOC_RATES] for p in PROVIDERS}
    figures = {
        "timeout": st.TIMEOUT_SECONDS,
        "workers": st.WORKERS,
        "hours_of_day": st.hours_read_of_each_day_hour(),
        "page_ms": model_.latency("provider-api", "page"),
        "get_ms": model_.latency("provider-api", "GET"),
    }
    # A provider that publishes no limit has none to hold the load to, not an unlimited one.
    tables = [
        rates_table([statement_rows(load, quotas) for load in loads[p]], loads[p], "not published")
        for p in PROVIDERS
    ]
    lines = [TEXTS["statement"].format(m=model_, **figures), "", *tables[0]]
    lines += [line for t in tables[1:] for line in t[2:]]
    lines += ["", "Per rate, what one invocation and the provider's limit carry:", ""]
    for n, rate in enumerate(DOC_RATES):
        verdicts = "; ".join(statement_verdict(loads[p][n]) for p in PROVIDERS)
        lines.append(f"- **{rate:,.0f} payments a second**: {verdicts}.")
    return block(STATEMENT_BEGIN, lines, STATEMENT_END)
