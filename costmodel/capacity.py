"""`umavez capacity` / `make capacity`: what rate the deployed stack sustains, and what gives
first.

For each component on a webhook's way (API Gateway, ingest, SQS, process at its mapping's
maximum concurrency, the DynamoDB tables and index partitions, the outbox stream mapping,
EventBridge, SES, Secrets Manager, Lambda's account concurrency) and for the scheduled runs
(waiting, reconciliation): the load at a rate of payments a second, its limit, the headroom
(limit / load) and the first to saturate, with the setting that lifts it.

Where the numbers come from:

- **requests per event** and **durations**: the cost model's measurement of the drill mix
  (`make cost` writes it to costmodel/measured.json), never typed by hand. A payment is one
  order's story in that mix (its deliveries, retries and duplicates included);
- **durations in AWS**: the cost model's Lambda duration, each function's measured own work
  plus each AWS call at the latencies of `[latency_ms]` in costmodel/prices.toml (an
  assumption: the local server is moto behind one lock);
- **limits**: AWS's documented quotas, with their sources (costmodel/quotas.toml), and the
  stack's own settings (infra/settings.py, infra/config.py, the functions' constants).

Throughput of a Lambda-driven stage = concurrency x batch / the batch's duration. For a burst
(`--burst N` deliveries at once): how long the backlog takes to drain at the bottleneck's rate,
and what waits or is given up meanwhile.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from costmodel import statement as statement_pass
from costmodel.markdown import duration, headroom, number, replace_between
from costmodel.model import (
    MIX,
    Measurement,
    Prices,
    Sample,
    lambda_milliseconds,
    payer,
    statement_model,
    webhook_queue,
)
from infra import settings as stack
from infra.mappings import DEFAULT_PROCESS_MAX_CONCURRENCY
from infra.reconciliation import RECONCILIATION
from infra.reconciliation import reconciliation_capacity as fanout_capacity

QUOTAS_PATH = Path(__file__).with_name("quotas.toml")
MEASURED_PATH = Path(__file__).with_name("measured.json")
DOCS_BEGIN = "<!-- capacity:begin -->"
DOCS_END = "<!-- capacity:end -->"
STATEMENT_BEGIN = "<!-- statement-capacity:begin -->"
STATEMENT_END = "<!-- statement-capacity:end -->"
SUMMARY_BEGIN = "<!-- capacity-summary:begin -->"
SUMMARY_END = "<!-- capacity-summary:end -->"
DOC_RATES = (10.0, 100.0, 1000.0)
HOUR = 3600.0
DAY = 24 * HOUR
# Where the stack's own limits are set, for the table's source column.
STACK_SETTINGS = "infra/settings.py"
STACK_CONTEXT = "infra/config.py"


# -- quotas -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quota:
    name: str
    value: float
    unit: str
    adjustable: bool
    source: str
    as_of: str
    note: str = ""


@dataclass(frozen=True)
class Quotas:
    quotas: dict[str, Quota]
    assumptions: dict[str, float]

    @classmethod
    def load(cls, path: Path = QUOTAS_PATH) -> Quotas:
        loaded = tomllib.loads(path.read_text())
        quotas = {
            name: Quota(
                name,
                float(entry["value"]),
                str(entry["unit"]),
                bool(entry["adjustable"]),
                str(entry["source"]),
                str(entry["as_of"]),
                str(entry.get("note", "")),
            )
            for name, entry in loaded["quotas"].items()
        }
        assumptions = {k: float(v) for k, v in loaded["assumptions"].items()}
        return cls(quotas, assumptions)

    def value(self, name: str) -> float:
        return self.quotas[name].value

    def source(self, name: str) -> str:
        return self.quotas[name].source


# -- the stack's settings -----------------------------------------------------------------------


def _default_of(function: Any, parameter: str) -> Any:
    """A keyword's default in a function's signature: the value the deployed code runs with
    when its handler passes none (the reconciliation's cap on orders a run, ...)."""
    return inspect.signature(function).parameters[parameter].default


@dataclass(frozen=True)
class StackSettings:
    """What the capacity depends on, as deployed by default; a merchant changes some of these
    (`processMaxConcurrency`, the SES quota, the account's Lambda concurrency)."""

    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    process_batch_size: int = stack.PROCESS_BATCH_SIZE
    outbox_batch_size: int = stack.OUTBOX_BATCH_SIZE
    outbox_parallelization_factor: int = stack.OUTBOX_PARALLELIZATION_FACTOR
    api_throttle_rate: float = stack.API_THROTTLE_RATE
    api_throttle_burst: float = stack.API_THROTTLE_BURST
    waf_requests_per_address_per_5_minutes: float = stack.WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES
    # None: AWS's default quota (costmodel/quotas.toml).
    ses_send_rate: float | None = None
    account_concurrency: float | None = None
    queue_retention_seconds: float = stack.WEBHOOK_QUEUE_RETENTION_DAYS * DAY
    visibility_timeout_seconds: float = stack.VISIBILITY_TIMEOUT_FACTOR * (
        stack.PROCESS_TIMEOUT_SECONDS
    )
    max_receive_count: int = stack.MAX_RECEIVE_COUNT
    outbox_stream_max_record_age_seconds: float = stack.OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS
    waiting_every_seconds: float = stack.SCHEDULE_MINUTES["waiting"] * 60.0
    waiting_timeout_seconds: float = stack.WAITING_TIMEOUT_SECONDS
    reconciliation_every_seconds: float = stack.SCHEDULE_MINUTES["reconciliation"] * 60.0
    reconciliation_timeout_seconds: float = stack.RECONCILIATION_TIMEOUT_SECONDS
    scheduled_functions: int = len(stack.SCHEDULED_FUNCTIONS)
    # The hourly reconciliation's units checked at once (its Map's concurrency), for minutes
    # of each hour: counted as always in use.
    reconciliation_concurrency: int = RECONCILIATION.max_concurrency
    # From the functions' own code: read once, below (`code_settings`).
    code: CodeSettings = field(default_factory=lambda: code_settings())


@dataclass(frozen=True)
class CodeSettings:
    """Constants of the functions' code that bound what waits: how long, how many."""

    reconciliation_max_orders_per_run: int
    reconciliation_passes: int
    outbox_pending_deadline_seconds: float
    outbox_give_up_seconds: float
    wait_limit_seconds: float
    secret_cache_seconds: float
    changed_index_shards: int
    due_index_shards: int


def code_settings() -> CodeSettings:
    from functions.ingest.handler import SECRET_CACHE_SECONDS
    from functions.process.waiting import WAIT_LIMIT_SECONDS
    from functions.reconcile.service import Reconciler
    from functions.shared import tables
    from functions.shared.settings import DEFAULT_OUTBOX_GIVE_UP_HOURS

    return CodeSettings(
        reconciliation_max_orders_per_run=int(_default_of(Reconciler, "max_orders_per_run")),
        # Each run reads an hour's changed orders twice: its window, then (the lagged pass)
        # the window a deadline older, for outbox items stuck outside the due index.
        reconciliation_passes=2,
        outbox_pending_deadline_seconds=float(_default_of(Reconciler, "pending_deadline_seconds")),
        outbox_give_up_seconds=DEFAULT_OUTBOX_GIVE_UP_HOURS * HOUR,
        wait_limit_seconds=float(WAIT_LIMIT_SECONDS),
        secret_cache_seconds=float(SECRET_CACHE_SECONDS),
        changed_index_shards=tables.CHANGES_SHARDS,
        due_index_shards=tables.OUTBOX_DUE_SHARDS,
    )


# -- what one delivery uses, measured -----------------------------------------------------------


@dataclass(frozen=True)
class PerEvent:
    """What one delivery of the drill mix used (per HTTP request to the webhook API), from the
    cost model's measurement; durations are modeled in AWS (see the module's docstring)."""

    measured_on: str
    deliveries: int
    orders: int
    invocations: dict[str, float]  # per delivery, by function
    seconds: dict[str, float]  # per delivery, by function: modeled time in AWS
    queue_messages: float  # webhook queue messages process received
    queue_requests: float  # SQS requests on the webhook queue (sends, receives, deletes)
    write_units: dict[str, float]  # by table: transactional and standard writes
    read_units: dict[str, float]  # by table, its indexes included
    index_write_units: dict[str, float]  # by "table/index"
    outbox_items: float  # new outbox items: the stream records the sender gets
    put_events: float  # PutEvents requests
    emails: float  # SES recipients
    waiting_redrives: float  # parked deliveries the waiting run re-enqueued
    seconds_per_redrive: float  # the waiting run's calls for one re-drive, modeled in AWS
    secrets_per_container: float  # secrets a warm ingest or process container reads

    @property
    def deliveries_per_payment(self) -> float:
        return self.deliveries / max(self.orders, 1)

    def seconds_per(self, function: str, work: float) -> float:
        """Seconds one unit of `work` (a request, a message, an item, an order) takes
        `function`: its modeled time divided by the units it did (both per delivery). The
        scheduled runs' idle cost is already taken out: what is left is their work."""
        return self.seconds.get(function, 0.0) / work if work else 0.0

    @classmethod
    def of(cls, measurement: Measurement, prices: Prices) -> PerEvent:
        scenarios = measurement.scenarios()
        if MIX not in scenarios:
            raise ValueError("the measurement has no drill mix: run `make cost` (orders > 0)")
        sample = scenarios[MIX]
        events = max(sample.events, 1)
        queue = webhook_queue()
        modeled = lambda_milliseconds(sample, prices)
        invocations = {f: sample.invocations(f) / events for f in sample.functions}
        seconds = {f: modeled[f] / 1000 / events for f in sample.functions}
        return cls(
            measured_on=measurement.measured_on,
            deliveries=sample.events,
            orders=int(measurement.options.get("orders", 0)),
            invocations=invocations,
            seconds=seconds,
            queue_messages=_sum(sample, "messages", service="sqs", resource=queue) / events,
            # As billed: the event source mapping's empty long polls are not traffic.
            queue_requests=(
                _sum(sample, "billed", service="sqs", resource=queue, billed_only=True)
                - _sum(sample, "empty_receives", service="sqs", resource=queue, billed_only=True)
            )
            / events,
            write_units=_by_table(sample, ("wru_transaction", "wru_standard"), events),
            read_units=_by_table(sample, ("rru_strong", "rru_eventual", "rru_transaction"), events),
            index_write_units=_by_table(sample, ("wru_index",), events, keep_index=True),
            outbox_items=_sum(
                sample,
                f"items_written:{_outbox_table(sample)}",
                operation="TransactWriteItems",
                callers=("process",),
            )
            / events,
            put_events=_sum(sample, "requests", service="events") / events,
            emails=_sum(sample, "billed", service="sesv2") / events,
            waiting_redrives=_sum(
                sample, "requests", service="sqs", resource=queue, callers=("waiting",)
            )
            / events,
            seconds_per_redrive=_redrive_seconds(sample, prices),
            secrets_per_container=prices.assumptions["secrets_read_per_container"],
        )


def _sum(
    sample: Sample,
    metric: str,
    *,
    service: str | None = None,
    operation: str | None = None,
    resource: str | None = None,
    callers: Iterable[str] | None = None,
    billed_only: bool = False,
) -> float:
    """One metric summed over the measured requests that match; `billed_only`: only those
    AWS bills (the functions' and the event source mappings', not the local stack's own)."""
    wanted = set(callers) if callers is not None else None
    queue = webhook_queue()
    return sum(
        units[metric]
        for key, units in sample.aws.items()
        if (service is None or key[1] == service)
        and (operation is None or key[2] == operation)
        and (resource is None or key[3] == resource)
        and (wanted is None or key[0] in wanted)
        and (not billed_only or payer(key, queue) is not None)
    )


# What the waiting run does for one re-drive: the message back on the queue, the parked item
# removed. Its other calls (reading the waiting partition and the bindings) are the same on
# every run, and the local schedule runs every few seconds, not every 5 minutes: the measured
# run-to-run time is noise, while these calls are counted and timed like the cost model's.
REDRIVE_OPERATIONS = frozenset({"SendMessage", "DeleteItem", "TransactWriteItems"})


def _redrive_seconds(sample: Sample, prices: Prices) -> float:
    redrives = _sum(
        sample, "requests", service="sqs", callers=("waiting",), operation="SendMessage"
    )
    if not redrives:
        return 0.0
    milliseconds = sum(
        units["requests"] * prices.latency(service, operation)
        for (caller, service, operation, _), units in sample.aws.items()
        if caller == "waiting" and operation in REDRIVE_OPERATIONS
    )
    return milliseconds / 1000 / redrives


def _by_table(
    sample: Sample, kinds: Sequence[str], events: int, *, keep_index: bool = False
) -> dict[str, float]:
    """Request units by table (an index's reads count on its table; its writes on their own)
    over the requests AWS serves for the stack's functions and event source mappings."""
    found: dict[str, float] = {}
    for (caller, service, _, _), units in sample.aws.items():
        if service != "dynamodb" or not caller:
            continue
        for metric, amount in units.items():
            kind, _, where = metric.partition(":")
            if kind not in kinds:
                continue
            name = where if keep_index else where.split("/", 1)[0]
            found[name] = found.get(name, 0.0) + amount / events
    return dict(sorted(found.items()))


def _outbox_table(sample: Sample) -> str:
    """The outbox table's name in the measured stack: the table the sender reads by its key."""
    for caller, service, _, resource in sample.aws:
        if caller == "outbox" and service == "dynamodb" and "outbox" in resource:
            return resource
    return "outbox"


def load_measurement(path: Path = MEASURED_PATH) -> Measurement:
    return Measurement.from_json(json.loads(path.read_text()))


def embedded_drain_seconds(
    deliveries: int, process_concurrency: int, measurement: Measurement | None = None
) -> float:
    """How long the embedded stack takes to drain `deliveries` queued at once (the burst
    drill), predicted from the drill mix as measured on this machine: process's wall-clock time
    per delivery (its invocations' time over the deliveries, which includes its waits on the
    local server's lock), spread over the stack's process pollers. The outbox drains beside
    process, and finishes behind it by about one item's time."""
    sample = (measurement or load_measurement()).scenarios()[MIX]
    process_ms = sample.functions["process"]["billed_ms"]
    per_delivery = process_ms / 1000 / max(sample.events, 1)
    return deliveries * per_delivery / max(process_concurrency, 1)


# -- the reconciliation -------------------------------------------------------------------------


@dataclass(frozen=True)
class ReconciliationCapacity:
    orders_read_per_run: float
    runs_per_hour: float
    reads_per_change: float
    limited_by: str

    @property
    def changes_per_second(self) -> float:
        """Orders changed a second (each changed order counted once an hour) it keeps up with."""
        return self.orders_read_per_run * self.runs_per_hour / self.reads_per_change / HOUR


def reconciliation_capacity(
    settings: StackSettings, seconds_per_order: float, hour_fraction: float
) -> ReconciliationCapacity:
    """The scheduled check's sustained capacity: its fan-out's model (infra/reconciliation.py:
    32 units at once within a 45-minute budget, at most `max_orders_per_run` orders read a
    run), at `seconds_per_order` (checked: a Query and a read of its outbox items; half of it
    for an order another run's window reads again) and with each pass reading `hour_fraction`
    of an hour again (the `changed` index knows the hour only)."""
    fanout = replace(
        RECONCILIATION,
        max_orders_per_run=settings.code.reconciliation_max_orders_per_run,
        run_every_seconds=int(settings.reconciliation_every_seconds),
        reads_of_an_hour=1 + hour_fraction,
    )
    if seconds_per_order:
        fanout = replace(
            fanout,
            seconds_per_order_query=seconds_per_order / 2,
            seconds_per_outbox_read=seconds_per_order / 2,
        )
    changes = fanout_capacity(fanout)
    by_cap = fanout.max_orders_per_run / (fanout.run_every_seconds * fanout.reads_per_change)
    limited_by = (
        "its cap on orders a run"
        if changes >= by_cap
        else f"its {fanout.max_concurrency} workers' time within the run's budget"
    )
    return ReconciliationCapacity(
        orders_read_per_run=changes * fanout.run_every_seconds * fanout.reads_per_change,
        runs_per_hour=HOUR / settings.reconciliation_every_seconds,
        reads_per_change=fanout.reads_per_change,
        limited_by=limited_by,
    )


# -- the model ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    component: str
    load: float
    limit: float | None  # None: no documented limit
    unit: str
    lift: str  # the setting that lifts the limit (and the value this rate needs)
    source: str  # where the limit is documented or set
    rest_only: bool = False  # the WAF: only with `-c apiType=rest -c waf=true`
    webhook_path: bool = True  # False: the scheduled checks, off a webhook's way

    @property
    def headroom(self) -> float:
        if self.limit is None or self.load <= 0:
            return math.inf
        return self.limit / self.load


@dataclass(frozen=True)
class Capacity:
    payments_per_second: float
    deliveries_per_second: float
    rows: list[Row]

    def applying(self, rest: bool = False) -> list[Row]:
        return [r for r in self.rows if rest or not r.rest_only]

    def first_to_saturate(self, rest: bool = False, webhook_path_only: bool = False) -> Row:
        """The tightest component: the first to saturate as the rate grows."""
        rows = [r for r in self.applying(rest) if r.webhook_path or not webhook_path_only]
        return min(rows, key=lambda r: r.headroom)

    def saturated(self, rest: bool = False) -> list[Row]:
        return sorted((r for r in self.applying(rest) if r.headroom < 1), key=lambda r: r.headroom)


def _at_least(
    setting: str,
    current: float,
    load: float,
    limit: float | None,
    *,
    unit: str = "",
    most: float | None = None,
    beyond: str = "and more",
) -> str:
    """The setting, and when the load is over the limit, the value that carries it (the limit
    grows in proportion to the setting: a concurrency, a rate); `most`: AWS's ceiling on it."""
    if limit is None or load <= limit:
        return setting
    needed = math.ceil(current * load / limit)
    if most is not None and needed > most:
        return f"{setting} at its most ({most:,.0f}{unit}), {beyond}"
    return f"{setting} >= {needed:,}{unit}"


def model(
    per_event: PerEvent,
    payments_per_second: float,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
) -> Capacity:
    settings = settings or StackSettings()
    quotas = quotas or Quotas.load()
    rate = payments_per_second * per_event.deliveries_per_payment  # deliveries a second
    e = per_event
    code = settings.code

    ingest_seconds = e.seconds_per("ingest", e.invocations.get("ingest", 0.0))
    ses_rate = settings.ses_send_rate or quotas.value("ses_send_rate")
    account = settings.account_concurrency or quotas.value("lambda_concurrent_executions")
    shards = quotas.assumptions["outbox_stream_shards"]
    outbox_lanes = shards * settings.outbox_parallelization_factor

    # Lambda-driven stages: concurrency x batch / the batch's duration (one record after another).
    per_message = e.seconds_per("process", e.queue_messages)
    per_item = e.seconds_per("outbox", e.outbox_items)
    process_batch_seconds = settings.process_batch_size * per_message
    process_limit = (
        settings.process_max_concurrency * settings.process_batch_size / process_batch_seconds
        if process_batch_seconds
        else None
    )
    outbox_batch_seconds = settings.outbox_batch_size * per_item
    outbox_limit = (
        outbox_lanes * settings.outbox_batch_size / outbox_batch_seconds
        if outbox_batch_seconds
        else None
    )
    messages = rate * e.queue_messages
    items = rate * e.outbox_items
    ingest_concurrency = rate * e.seconds.get("ingest", 0.0)
    process_concurrency = min(messages * per_message, settings.process_max_concurrency)
    outbox_concurrency = min(items * per_item, outbox_lanes)
    others = (
        settings.process_max_concurrency
        + outbox_lanes
        + (settings.scheduled_functions + settings.reconciliation_concurrency)
    )

    rows = [
        Row(
            "API Gateway stage throttle (HTTP or REST)",
            rate,
            settings.api_throttle_rate,
            "requests/s",
            _at_least(
                f"`API_THROTTLE_RATE` in {STACK_SETTINGS}",
                settings.api_throttle_rate,
                rate,
                settings.api_throttle_rate,
                unit="/s",
            ),
            STACK_SETTINGS,
        ),
        Row(
            "API Gateway account quota (HTTP and REST APIs together)",
            rate,
            quotas.value("api_gateway_account_rps"),
            "requests/s",
            "a quota increase request",
            quotas.source("api_gateway_account_rps"),
        ),
        Row(
            "WAF rate rule per source address (REST + WAF only)",
            rate / quotas.assumptions["provider_source_addresses"],
            settings.waf_requests_per_address_per_5_minutes
            / quotas.value("waf_rate_window_seconds"),
            "requests/s",
            "`providerIpAllowList` (the providers' addresses are never counted)",
            quotas.source("waf_rate_window_seconds"),
            rest_only=True,
        ),
        Row(
            f"ingest Lambda ({ingest_seconds * 1000:.0f} ms a request)",
            ingest_concurrency,
            account - others,
            "concurrent executions",
            _at_least("a Lambda concurrency quota", account, ingest_concurrency, account - others),
            quotas.source("lambda_concurrent_executions"),
        ),
        Row(
            "SQS webhook queue (sends, receives, deletes)",
            rate * e.queue_requests,
            None,
            "requests/s",
            "none needed: a standard queue's API rate is unlimited",
            quotas.source("sqs_in_flight_messages"),
        ),
        Row(
            f"process at maximum concurrency {settings.process_max_concurrency} "
            f"(batch {settings.process_batch_size}: {process_batch_seconds:.2f} s)",
            messages,
            process_limit,
            "messages/s",
            _at_least(
                "`processMaxConcurrency`",
                settings.process_max_concurrency,
                messages,
                process_limit,
                most=quotas.value("sqs_event_source_maximum_concurrency"),
            ),
            STACK_CONTEXT,
        ),
    ]
    for table, units in e.write_units.items():
        rows.append(
            Row(
                f"DynamoDB `{table}` writes",
                rate * units,
                quotas.value("dynamodb_table_write_units"),
                "WRU/s",
                "a quota increase request",
                quotas.source("dynamodb_table_write_units"),
            )
        )
    for table, units in e.read_units.items():
        rows.append(
            Row(
                f"DynamoDB `{table}` reads",
                rate * units,
                quotas.value("dynamodb_table_read_units"),
                "RRU/s",
                "a quota increase request",
                quotas.source("dynamodb_table_read_units"),
            )
        )
    new_write, new_read = (
        quotas.value("dynamodb_new_table_write_units"),
        quotas.value("dynamodb_new_table_read_units"),
    )
    for table in sorted(set(e.write_units) | set(e.read_units)):
        # A linear combination of both, in write units.
        combined = (
            e.write_units.get(table, 0.0) + e.read_units.get(table, 0.0) * new_write / new_read
        )
        rows.append(
            Row(
                f"DynamoDB `{table}`, a new table's instant peak",
                rate * combined,
                new_write,
                "WRU/s (reads at 1/3)",
                "warm throughput on the table, or a 30-minute ramp",
                quotas.source("dynamodb_new_table_write_units"),
            )
        )
    ledger_writes = max(e.write_units.values(), default=0.0)
    rows.append(
        Row(
            "one order's partition: a payment's whole story within a second",
            ledger_writes * e.deliveries_per_payment,
            quotas.value("dynamodb_partition_write_units"),
            "WRU/s",
            "none (a hard limit): one order takes this many stories a second",
            quotas.source("dynamodb_partition_write_units"),
        )
    )
    index_shards = {"changed": code.changed_index_shards, "due": code.due_index_shards}
    for index, units in e.index_write_units.items():
        name = index.split("/", 1)[-1]
        partitions = index_shards.get(name, 1)
        rows.append(
            Row(
                f"index `{name}`: each of its {partitions} partitions"
                + (" of the hour" if name == "changed" else ""),
                rate * units / partitions,
                quotas.value("dynamodb_partition_write_units"),
                "WRU/s",
                "more shards (`CHANGES_SHARDS`, `OUTBOX_DUE_SHARDS` in functions/shared/tables.py)",
                quotas.source("dynamodb_partition_write_units"),
            )
        )
    rows += [
        Row(
            f"outbox stream mapping ({shards:.0f} shard x {settings.outbox_parallelization_factor}"
            f", batch {settings.outbox_batch_size}: {outbox_batch_seconds:.2f} s)",
            items,
            outbox_limit,
            "items/s",
            _at_least(
                f"`OUTBOX_PARALLELIZATION_FACTOR` in {STACK_SETTINGS} (shards grow with the table)",
                settings.outbox_parallelization_factor,
                items,
                outbox_limit,
                most=quotas.value("stream_parallelization_factor"),
                beyond="and more stream shards",
            ),
            quotas.source("stream_parallelization_factor"),
        ),
        Row(
            "EventBridge PutEvents",
            rate * e.put_events,
            quotas.value("eventbridge_put_events_tps"),
            "requests/s",
            "a quota increase request",
            quotas.source("eventbridge_put_events_tps"),
        ),
        Row(
            "SES sending rate",
            rate * e.emails,
            ses_rate,
            "e-mails/s",
            _at_least("the SES sending rate quota", ses_rate, rate * e.emails, ses_rate, unit="/s"),
            quotas.source("ses_send_rate"),
        ),
        Row(
            "Secrets Manager GetSecretValue (cached 5 min a container)",
            (ingest_concurrency + process_concurrency)
            * e.secrets_per_container
            / code.secret_cache_seconds,
            quotas.value("secrets_manager_get_secret_value_tps"),
            "requests/s",
            "none needed (a hard limit)",
            quotas.source("secrets_manager_get_secret_value_tps"),
        ),
        Row(
            "Lambda account concurrency (all functions)",
            ingest_concurrency
            + process_concurrency
            + outbox_concurrency
            + (settings.scheduled_functions + settings.reconciliation_concurrency),
            account,
            "concurrent executions",
            "a Lambda concurrency quota increase",
            quotas.source("lambda_concurrent_executions"),
        ),
    ]
    per_redrive = e.seconds_per_redrive
    rows.append(
        Row(
            f"waiting run (every {settings.waiting_every_seconds / 60:.0f} min, "
            f"{settings.waiting_timeout_seconds:.0f} s timeout)",
            rate * e.waiting_redrives,
            settings.waiting_timeout_seconds / per_redrive / settings.waiting_every_seconds
            if per_redrive
            else None,
            "re-drives/s",
            "its timeout (`WAITING_TIMEOUT_SECONDS` in infra/settings.py)",
            STACK_SETTINGS,
            webhook_path=False,
        )
    )
    reconciliation = reconciliation_capacity(
        settings,
        e.seconds_per("reconciliation", 1 / max(e.deliveries_per_payment, 1e-9)),
        quotas.assumptions["reconciliation_hour_fraction"],
    )
    rows.append(
        Row(
            f"reconciliation (hourly, {reconciliation.orders_read_per_run:,.0f} orders a run, "
            f"{reconciliation.reads_per_change:g} reads a change)",
            payments_per_second,
            reconciliation.changes_per_second,
            "orders changed/s",
            f"{reconciliation.limited_by}: the Map's `max_concurrency` (up to 40) in "
            "infra/reconciliation.py, `CHANGES_SHARDS`, `MAX_ORDERS_PER_RUN`",
            "infra/reconciliation.py",
            webhook_path=False,
        )
    )
    return Capacity(payments_per_second, rate, rows)


# -- a burst ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Deadline:
    what: str
    waits_seconds: float
    limit_seconds: float
    then: str  # what happens past the limit

    @property
    def kept(self) -> bool:
        return self.waits_seconds <= self.limit_seconds


@dataclass(frozen=True)
class Burst:
    deliveries: int
    intake_per_second: float
    intake_bottleneck: str
    process_per_second: float
    drain_seconds: float
    queue_peak: float
    outbox_seconds: float
    email_seconds: float
    reconciliation_seconds: float
    deadlines: list[Deadline]


def burst(
    per_event: PerEvent, deliveries: int, capacity: Capacity, settings: StackSettings
) -> Burst:
    """`deliveries` sent at once (a provider's backlog after an outage): the API admits them at
    its tightest limit (the rest is refused with 429 and retried by the provider), SQS holds
    what process has not taken yet, and each later stage drains at its own rate."""
    rows = {r.component: r for r in capacity.rows}
    e = per_event
    intake = [
        r
        for r in capacity.applying()
        if r.webhook_path
        and r.unit == "requests/s"
        and r.limit is not None
        and "API" in r.component
    ]
    ingest = next(r for r in capacity.rows if r.component.startswith("ingest"))
    ingest_per_second = (
        ingest.limit / e.seconds["ingest"] if ingest.limit and e.seconds.get("ingest") else math.inf
    )
    gate = min(intake, key=lambda r: r.limit or math.inf)
    intake_rate = min(gate.limit or math.inf, ingest_per_second)
    intake_name = gate.component if (gate.limit or math.inf) <= ingest_per_second else "ingest"
    process = next(r for r in capacity.rows if r.component.startswith("process"))
    process_rate = (process.limit or math.inf) / max(e.queue_messages, 1e-9)
    drain_rate = min(intake_rate, process_rate)
    drain = deliveries / drain_rate
    queue_peak = max(0.0, deliveries * (1 - process_rate / intake_rate))
    outbox = next(r for r in capacity.rows if r.component.startswith("outbox"))
    outbox_seconds = max(drain, deliveries * e.outbox_items / (outbox.limit or math.inf))
    ses = rows["SES sending rate"]
    email_seconds = max(drain, deliveries * e.emails / (ses.limit or math.inf))
    reconciliation = capacity.rows[-1]
    orders = deliveries / max(e.deliveries_per_payment, 1e-9)
    reconciliation_seconds = orders / (reconciliation.limit or math.inf)
    code = settings.code
    deadlines = [
        Deadline(
            "a delivery refused with 429 until the API takes it (the providers retry: "
            "Stripe for 3 days)",
            deliveries / intake_rate,
            code.wait_limit_seconds,
            "the provider stops retrying: `umavez replay` the window",
        ),
        Deadline(
            "the last accepted delivery, in the webhook queue",
            drain,
            settings.queue_retention_seconds,
            "SQS deletes it unprocessed (queue retention)",
        ),
        Deadline(
            "a parked delivery whose binding is still queued",
            drain,
            code.wait_limit_seconds,
            "it moves to unmatched (money nobody can route: alarmed, attachable)",
        ),
        Deadline(
            "a new outbox item, before its stream record is sent",
            outbox_seconds - drain,
            settings.outbox_stream_max_record_age_seconds,
            "the mapping drops the record; the sweeper parks the item and sends it",
        ),
        Deadline(
            "an outbox item still pending (the reconciliation's deadline)",
            max(outbox_seconds, email_seconds) - drain,
            code.outbox_pending_deadline_seconds,
            "the reconciliation reports it stuck (an alarm, nothing lost)",
        ),
        Deadline(
            "an e-mail held back by SES's sending rate",
            email_seconds - drain,
            code.outbox_give_up_seconds,
            "the item is given up (dead, alarmed; `umavez outbox revive --all-dead`)",
        ),
    ]
    return Burst(
        deliveries,
        intake_rate,
        intake_name,
        process_rate,
        drain,
        queue_peak,
        outbox_seconds,
        email_seconds,
        reconciliation_seconds,
        deadlines,
    )


# -- rendering ----------------------------------------------------------------------------------


def describe(per_event: PerEvent) -> str:
    e = per_event
    per_payment = e.deliveries_per_payment

    def ms(function: str, per: float) -> str:
        return f"{e.seconds_per(function, per) * 1000:.0f} ms"

    return (
        f"A payment is one order's story in the drill mix: {per_payment:.2f} webhook deliveries "
        "(the payment, its other event types, refunds, disputes, the providers' retries and "
        f"resends), {e.queue_messages * per_payment:.2f} queue messages processed, "
        f"{e.outbox_items * per_payment:.2f} outbox items (EventBridge events) and "
        f"{e.emails * per_payment:.2f} e-mails. Durations in AWS (measured own work plus each "
        f"AWS call at `[latency_ms]` of costmodel/prices.toml): ingest "
        f"{ms('ingest', e.invocations.get('ingest', 0.0))} a request, process "
        f"{ms('process', e.queue_messages)} a message, the outbox sender "
        f"{ms('outbox', e.outbox_items)} an item, the reconciliation "
        f"{ms('reconciliation', 1 / max(per_payment, 1e-9))} an order."
    )


def render_text(capacity: Capacity, per_event: PerEvent, burst_result: Burst | None) -> str:
    lines = [
        f"capacity at {capacity.payments_per_second:g} payments/s "
        f"({capacity.deliveries_per_second:,.1f} webhook deliveries/s), measured "
        f"{per_event.measured_on}",
        "",
        f"  {'component':<72} {'load':>10} {'limit':>10} {'headroom':>9}  unit",
    ]
    for row in capacity.rows:
        lines.append(
            f"  {row.component:<72} {number(row.load):>10} {number(row.limit):>10} "
            f"{headroom(row.headroom).strip('*'):>9}  {row.unit}"
        )
    first = capacity.first_to_saturate()
    lines += [
        "",
        f"  first to saturate: {first.component} ({headroom(first.headroom).strip('*')})",
    ]
    lines.append(f"    lifted by: {first.lift}")
    path = capacity.first_to_saturate(webhook_path_only=True)
    if path is not first:
        lines.append(
            f"  on a webhook's way: {path.component} ({headroom(path.headroom).strip('*')})"
            f"; lifted by: {path.lift}"
        )
    rest = capacity.first_to_saturate(rest=True)
    if rest is not first:
        lines.append(f"  with REST + WAF: {rest.component}; lifted by: {rest.lift}")
    if burst_result is not None:
        lines += ["", *render_burst(burst_result)]
    return "\n".join(lines) + "\n"


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
    """The capacity section of docs/performance.md: generated, never edited by hand (a test
    holds the page to this function's output for the committed measurement)."""
    settings = settings or StackSettings()
    quotas = quotas or Quotas.load()
    models = [model(per_event, rate, settings, quotas) for rate in rates]
    header = " | ".join(f"{rate:,.0f}/s: load | headroom" for rate in rates)
    lines = [
        DOCS_BEGIN,
        f"Generated by `make capacity` from the drill mix measured by `make cost` on "
        f"{per_event.measured_on} (costmodel/measured.json: {per_event.deliveries} deliveries "
        f"of {per_event.orders} orders) and AWS's default quotas in us-east-1 "
        "(costmodel/quotas.toml, each with its source); the stack's defaults "
        f"(`processMaxConcurrency` {settings.process_max_concurrency}, the outbox stream "
        f"read {settings.outbox_parallelization_factor} batches at a time from "
        f"{quotas.assumptions['outbox_stream_shards']:.0f} shard). {describe(per_event)}",
        "",
        f"| component | unit | limit | {header} |",
        "|---|---|---:|" + "---:|---:|" * len(rates),
    ]
    for n, row in enumerate(models[0].rows):
        cells = " | ".join(
            f"{number(m.rows[n].load)} | {headroom(m.rows[n].headroom)}" for m in models
        )
        limit = number(row.limit)
        if row.source.startswith("https://"):
            limit = f"[{limit}]({row.source})"
        lines.append(f"| {row.component} | {row.unit} | {limit} | {cells} |")
    lines += ["", "First to saturate, and the setting that lifts it:", ""]
    for m in models:
        first = m.first_to_saturate()
        path = m.first_to_saturate(webhook_path_only=True)
        text = (
            f"- **{m.payments_per_second:,.0f} payments a second** "
            f"({m.deliveries_per_second:,.0f} deliveries): {first.component} "
            f"({headroom(first.headroom)}): {first.lift}."
        )
        if path is not first:
            text += (
                f" On a webhook's way: {path.component} ({headroom(path.headroom)}): {path.lift}."
            )
        rest = m.first_to_saturate(rest=True, webhook_path_only=True)
        if rest is not path:
            text += f" With REST + WAF: {rest.component} ({headroom(rest.headroom)}): {rest.lift}."
        saturated = [r for r in m.saturated() if r is not first and r is not path]
        if saturated:
            text += (
                " Also saturated: "
                + "; ".join(f"{r.component} ({headroom(r.headroom)}): {r.lift}" for r in saturated)
                + "."
            )
        lines.append(text)
    example = burst(per_event, burst_deliveries, models[0], settings)
    lines += [
        "",
        f"A provider's backlog of {burst_deliveries:,} deliveries at once (after an outage), on "
        f"the default stack (`umavez capacity --rate 10 --burst {burst_deliveries}`):",
        "",
        *(line.strip() and f"- {line.strip()}" for line in render_burst(example)[1:]),
        DOCS_END,
    ]
    return "\n".join(lines) + "\n"


def render_summary_block(
    per_event: PerEvent,
    settings: StackSettings | None = None,
    quotas: Quotas | None = None,
    rates: Sequence[float] = DOC_RATES,
) -> str:
    """The README's short table: the rate, what gives first, what lifts it."""
    settings = settings or StackSettings()
    quotas = quotas or Quotas.load()
    lines = [
        SUMMARY_BEGIN,
        "| payments/s | first to saturate on a webhook's way | every setting to change, "
        "tightest first |",
        "|---:|---|---|",
    ]
    models = [model(per_event, rate, settings, quotas) for rate in rates]
    for m in models:
        first = m.first_to_saturate(webhook_path_only=True)
        # Each setting once, without where it lives: the performance page says that.
        lifts = list(dict.fromkeys(_brief(r.lift) for r in m.saturated() if r.webhook_path))
        lines.append(
            f"| {m.payments_per_second:,.0f} | {first.component} ({headroom(first.headroom)}) | "
            + "; ".join(lifts or ["none"])
            + " |"
        )
    reconciliation = models[0].rows[-1]
    behind = [f"{m.payments_per_second:,.0f}" for m in models if m.rows[-1].headroom < 1]
    lines += [
        "",
        "The hourly reconciliation, fanned out, keeps up with "
        f"{reconciliation.limit or 0:,.0f} changed orders a second"
        + (f" (behind at {', '.join(behind)} a second)" if behind else "")
        + ". Every component, quotas with sources, bursts: "
        "[docs/performance.md](docs/performance.md).",
    ]
    lines.append(SUMMARY_END)
    return "\n".join(lines) + "\n"


def _brief(lift: str) -> str:
    return re.sub(r" in [\w/]+\.py| \([^)]*\)", "", lift)


# -- the statement pass ---------------------------------------------------------------------------


def _period(load: statement_pass.PassLoad) -> str:
    return "a day" if load.period_seconds >= statement_pass.DAY else "an hour"


def statement_rows(load: statement_pass.PassLoad, quotas: Quotas) -> list[Row]:
    """One provider's pass at a rate (every payment this provider's), on its cadence: its API
    calls against the provider's limit, one invocation's budget, the DynamoDB units it adds."""
    provider = load.provider
    limit = load.limit
    one = load.payments_per_second_one_invocation_keeps_up_with
    calls = (
        "averaged over the hour"
        if load.period_seconds < statement_pass.DAY
        else f"the day's pass in one {limit.window_seconds / 3600:g}-hour quota window, and "
        "process's reads"
    )
    return [
        Row(
            f"{provider}: API calls ({calls})",
            load.api_calls_per_second,
            limit.per_second,
            "requests/s",
            limit.note,
            limit.source,
            webhook_path=False,
        ),
        Row(
            f"{provider}: one invocation, {statement_pass.TIMEOUT_SECONDS} s "
            f"({load.seconds_per_line * 1000:.0f} ms a line)",
            load.payments_per_second,
            one,
            "payments/s",
            f"{load.invocations_a_run_needed:,} invocations of "
            f"{statement_pass.TIMEOUT_SECONDS} s {_period(load)}",
            "costmodel/statement.py",
            webhook_path=False,
        ),
        Row(
            f"{provider}: DynamoDB reads of the scheduled passes",
            load.rru_per_second,
            quotas.value("dynamodb_table_read_units"),
            "RRU/s",
            "a quota increase request",
            quotas.source("dynamodb_table_read_units"),
            webhook_path=False,
        ),
        Row(
            f"{provider}: DynamoDB writes of the scheduled passes",
            load.wru_per_second,
            quotas.value("dynamodb_table_write_units"),
            "WRU/s",
            "a quota increase request",
            quotas.source("dynamodb_table_write_units"),
            webhook_path=False,
        ),
    ]


def statement_verdict(load: statement_pass.PassLoad) -> str:
    """Whether one invocation and the provider's limit carry the rate, and what the deployment
    must do where they do not."""
    budget = statement_pass.TIMEOUT_SECONDS
    needed = load.payments_per_second * load.lines_per_payment
    daily = load.period_seconds >= statement_pass.DAY
    if daily:
        text = (
            f"{load.provider}: {needed * load.period_seconds:,.0f} lines a day to book in one run, "
            f"one invocation books {load.lines_per_second_booked * budget:,.0f} in its {budget} s; "
        )
    else:
        text = (
            f"{load.provider}: {needed:,.0f} lines a second to book, one invocation books "
            f"{load.lines_per_second_booked:,.0f}; "
        )
    window = "the day's" if daily else "the hour's"
    if load.keeps_up:
        text += f"one invocation keeps up ({duration(load.work_seconds_a_run)} of {budget} s)"
    else:
        text += (
            f"**one invocation does not keep up** ({duration(load.work_seconds_a_run)} of work "
            f"{_period(load)} for its {budget} s: {window} window split among "
            f"{load.invocations_a_run_needed:,} invocations, or its lines booked that many at "
            "once)"
        )
    limit = load.limit.per_second
    if limit is None:
        text += f"; {number(load.api_calls_per_second)} API calls a second (no published limit)"
    elif load.within_rate_limit:
        text += (
            f"; {number(load.api_calls_per_second)} API calls a second, within "
            f"{number(limit)} ({headroom(limit / load.api_calls_per_second)})"
        )
    else:
        text += (
            f"; **{number(load.api_calls_per_second)} API calls a second over its limit of "
            f"{number(limit)}** ({headroom(limit / load.api_calls_per_second)})"
        )
    most = load.payments_a_day_within_limit
    if daily and most is not None:
        text += f"; the limit carries {number(most)} payments a day"
    return text


def render_statement_block(
    model_: statement_pass.StatementModel,
    quotas: Quotas | None = None,
    rates: Sequence[float] = DOC_RATES,
) -> str:
    """The statement pass's section of docs/performance.md: generated, like the capacity's."""
    quotas = quotas or Quotas.load()
    loads = {
        provider: [model_.load(provider, rate) for rate in rates]
        for provider in statement_pass.PROVIDERS_A_RUN
    }
    header = " | ".join(f"{rate:,.0f}/s: load | headroom" for rate in rates)
    a = model_.assumptions
    lines = [
        STATEMENT_BEGIN,
        "Generated by `make capacity` from costmodel/statement.py: each provider's pass at "
        "every payment being that provider's, on its cadence (Stripe's and Mercado Pago's "
        "hourly, Asaas's daily), one invocation of "
        f"{statement_pass.TIMEOUT_SECONDS} s a run; "
        f"{model_.movements_per_payment:g} movements a payment, each line read "
        f"{model_.reads['stripe'].reads_of_each_row:.2f} times (Stripe, Mercado Pago: the "
        f"window's edges) or {model_.reads['asaas'].reads_of_each_row:g} time (Asaas: each day "
        "once, the morning after; hourly, each pass would read the day so far, each line "
        f"{statement_pass.hours_read_of_each_day_hour():.1f} times); "
        f"process reads {model_.reads['asaas'].process_calls_per_payment:g} Asaas payments a "
        "payment from the same quota; "
        f"{a['statement_booked_now_share']:.0%} booked now; a line's DynamoDB calls at "
        "`[latency_ms]` of costmodel/prices.toml, a page of 100 at "
        f"{model_.latency('provider-api', 'page'):.0f} ms, an object at "
        f"{model_.latency('provider-api', 'GET'):.0f} ms; {statement_pass.WORKERS} lines or "
        "orders at once (their own work one after another); API calls averaged over the hour "
        "(Asaas: over its quota's 12 hours, a day's pass falling in one), DynamoDB units over "
        "each pass's period.",
        "",
        f"| component | unit | limit | {header} |",
        "|---|---|---:|" + "---:|---:|" * len(rates),
    ]
    for provider in statement_pass.PROVIDERS_A_RUN:
        rows = [statement_rows(load, quotas) for load in loads[provider]]
        for n, row in enumerate(rows[0]):
            cells = " | ".join(f"{number(r[n].load)} | {headroom(r[n].headroom)}" for r in rows)
            # A provider that publishes no limit has none to hold the load to, not an unlimited one.
            limit = "not published" if row.limit is None else number(row.limit)
            if row.source.startswith("https://"):
                limit = f"[{limit}]({row.source})"
            lines.append(f"| {row.component} | {row.unit} | {limit} | {cells} |")
    lines += ["", "Per rate, what one invocation and the provider's limit carry:", ""]
    for n, rate in enumerate(rates):
        verdicts = "; ".join(statement_verdict(loads[p][n]) for p in statement_pass.PROVIDERS_A_RUN)
        lines.append(f"- **{rate:,.0f} payments a second**: {verdicts}.")
    lines.append(STATEMENT_END)
    return "\n".join(lines) + "\n"


# -- the command --------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapacityOptions:
    rate: float | None = None
    burst: int | None = None
    json: bool = False
    measured: Path = MEASURED_PATH
    docs: Path | None = None
    readme: Path | None = None
    process_max_concurrency: int | None = None
    ses_send_rate: float | None = None
    account_concurrency: float | None = None


def run(options: CapacityOptions, out: Any = None) -> int:
    """Print the capacity at `rate` (text or JSON); rewrite the generated sections of the
    performance page and the README if asked (`make capacity`)."""
    import sys

    out = out or sys.stdout
    per_event = PerEvent.of(load_measurement(options.measured), Prices.load())
    settings = StackSettings()
    overrides: dict[str, Any] = {
        "process_max_concurrency": options.process_max_concurrency,
        "ses_send_rate": options.ses_send_rate,
        "account_concurrency": options.account_concurrency,
    }
    settings = replace(settings, **{k: v for k, v in overrides.items() if v is not None})
    quotas = Quotas.load()
    if options.rate is not None:
        capacity = model(per_event, options.rate, settings, quotas)
        result = burst(per_event, options.burst, capacity, settings) if options.burst else None
        if options.json:
            out.write(json.dumps(to_json(capacity, per_event, result), indent=1) + "\n")
        else:
            out.write(render_text(capacity, per_event, result))
    if options.docs is not None:
        block = render_docs_block(per_event, settings, quotas)
        options.docs.write_text(
            replace_between(options.docs.read_text(), DOCS_BEGIN, DOCS_END, block)
        )
        if not options.json:
            out.write(f"  {options.docs}: capacity section rewritten\n")
    if options.docs is not None:
        measurement = load_measurement(options.measured)
        block = render_statement_block(statement_model(measurement, Prices.load()), quotas)
        options.docs.write_text(
            replace_between(options.docs.read_text(), STATEMENT_BEGIN, STATEMENT_END, block)
        )
    if options.readme is not None:
        block = render_summary_block(per_event, settings, quotas)
        options.readme.write_text(
            replace_between(options.readme.read_text(), SUMMARY_BEGIN, SUMMARY_END, block)
        )
        if not options.json:
            out.write(f"  {options.readme}: capacity summary rewritten\n")
    return 0
