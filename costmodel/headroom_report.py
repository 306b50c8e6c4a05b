"""What `umavez capacity` prints (a rate's table, markdown or JSON; a burst's drain) and the
sections it generates: docs/performance.md's (the components, the statement pass) and the
README's summary. Never edited by hand: the tests hold the pages to these functions."""

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
from costmodel.markdown import block, duration, headroom, number, paragraphs, table
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
    parts = [head + f"{per_event.measured_on}:", rates_table([capacity.rows], [capacity])]
    parts.append(_saturation(capacity))
    if result:
        parts += [f"A burst of {result.deliveries:,} deliveries at once:", _burst(result)]
    return paragraphs(*parts) + "\n"


def _burst(r: Burst) -> list[str]:
    at = {k: duration(v) if k.endswith("seconds") else v for k, v in vars(r).items()}
    lines = [TEXTS["burst_intake"].format(**at), TEXTS["burst_drained"].format(**at)]
    for d in r.deadlines:
        waits = duration(max(d.waits_seconds, 0))
        past = "" if d.kept else f": PAST IT, {d.then}"
        lines.append(f"- {d.what}: {waits} of at most {duration(d.limit_seconds)}{past}")
    return lines


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
    per = {k: v * per_payment for k, v in per.items()}
    return TEXTS["describe"].format(per_payment=per_payment, **per, **ms)


def render_docs_block(
    per_event: PerEvent, settings: StackSettings | None = None, quotas: Quotas | None = None
) -> str:
    """The capacity section of docs/performance.md, a burst of 1,000,000 its example."""
    settings, quotas = settings or StackSettings(), quotas or Quotas.load()
    models = [model(per_event, rate, settings, quotas) for rate in DOC_RATES]
    example = burst(per_event, 1_000_000, models[0])
    figures = {"e": per_event, "s": settings, "q": quotas, "settings": deployed}
    return block(
        DOCS_BEGIN,
        DOCS_END,
        TEXTS["docs"].format(**figures, described=describe(per_event)),
        rates_table([m.rows for m in models], models),
        "First to saturate, and the setting that lifts it:",
        [_saturation(m) for m in models],
        TEXTS["docs_burst"].format(n=example.deliveries),
        _burst(example),
    )


def _saturation(m: Capacity) -> str:
    """A rate's line: what saturates first, on a webhook's way, with REST + WAF, and after."""

    def said(r: Row) -> str:
        return f"{r.component} ({headroom(r.headroom)}): {r.lift}"

    first = m.first_to_saturate()
    path = m.first_to_saturate(webhook_path_only=True)
    rest = m.first_to_saturate(rest=True, webhook_path_only=True)
    text = f"- **{m.payments_per_second:,.0f} payments a second** "
    text += f"({m.deliveries_per_second:,.0f} deliveries): {said(first)}."
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
    """The README's short table: the rate, what gives first, every setting to change."""
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
    return block(SUMMARY_BEGIN, SUMMARY_END, table(columns, "rll", lines), reconciliation)


def _brief(lift: str) -> str:
    return re.sub(r" in [\w/]+\.py| \([^)]*\)", "", lift)


# -- the statement pass ---------------------------------------------------------------------------


def statement_rows(load: st.PassLoad, quotas: Quotas) -> list[Row]:
    """One provider's pass at a rate, on its cadence: capacity.toml's `statement_stage`s."""
    calls = "averaged over the hour"
    if load.period_seconds >= DAY:
        window = load.limit.window_seconds / 3600
        calls = f"the day's pass in one {window:g}-hour quota window, and process's reads"
    at = SimpleNamespace(l=load, q=quotas, calls=calls, budget=st.TIMEOUT_SECONDS)
    at.ms_a_line, at.period = load.seconds_per_line * 1000, _period(load)
    return [row for stage in STATEMENT_STAGES for row in stage.rows(at)]


def _period(load: st.PassLoad) -> str:
    return "a day" if load.period_seconds >= DAY else "an hour"


def statement_verdict(load: st.PassLoad) -> str:
    """Whether one invocation and the provider's limit carry the rate, and what to do if not."""
    budget, limit, daily = st.TIMEOUT_SECONDS, load.limit.per_second, load.period_seconds >= DAY
    needed = load.payments_per_second * load.lines_per_payment
    f: dict[str, Any] = {"l": load, "budget": budget, "needed": needed, "period": _period(load)}
    f |= {"lines_a_day": needed * load.period_seconds, "work": duration(load.work_seconds_a_run)}
    f |= {"booked_a_run": load.lines_per_second_booked * budget}
    f |= {"window": "the day's" if daily else "the hour's"}
    f["calls"] = number(load.api_calls_per_second)
    parts = ["daily" if daily else "hourly", "keeps_up" if load.keeps_up else "falls_behind"]
    if limit is None:
        parts.append("no_limit")
    else:
        parts.append("within" if load.within_rate_limit else "over")
        f |= {"limit": number(limit), "headroom": headroom(limit / load.api_calls_per_second)}
    if daily and (most := load.payments_a_day_within_limit) is not None:
        parts.append("most")
        f["most"] = number(most)
    return "".join(VERDICT[part].format(**f) for part in parts)


def render_statement_block(model_: st.StatementModel, quotas: Quotas | None = None) -> str:
    """The statement pass's section of docs/performance.md."""
    quotas = quotas or Quotas.load()
    loads = {p: [model_.load(p, rate) for rate in DOC_RATES] for p in PROVIDERS}
    page, get = (model_.latency("provider-api", op) for op in ("page", "GET"))
    figures = {"timeout": st.TIMEOUT_SECONDS, "workers": st.WORKERS, "page_ms": page, "get_ms": get}
    figures["hours_of_day"] = st.hours_read_of_each_day_hour()
    # A provider that publishes no limit has none to hold the load to, not an unlimited one.
    tables = [
        rates_table([statement_rows(load, quotas) for load in loads[p]], loads[p], "not published")
        for p in PROVIDERS
    ]
    verdicts = [
        f"- **{rate:,.0f} payments a second**: "
        + "; ".join(statement_verdict(loads[p][n]) for p in PROVIDERS)
        + "."
        for n, rate in enumerate(DOC_RATES)
    ]
    return block(
        STATEMENT_BEGIN,
        STATEMENT_END,
        TEXTS["statement"].format(m=model_, **figures),
        [*tables[0], *(line for t in tables[1:] for line in t[2:])],
        "Per rate, what one invocation and the provider's limit carry:",
        verdicts,
    )
