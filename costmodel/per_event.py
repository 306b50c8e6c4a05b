"""What one webhook delivery of the drill mix uses, read from the cost model's measurement
(`make cost` writes it to costmodel/measured.json, never typed by hand): requests per event and
durations in AWS (each function's measured own work plus each AWS call at `[latency_ms]` of
costmodel/prices.toml: the local server is moto behind one lock). A payment is one order's story
in that mix, its deliveries, retries and duplicates included."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from costmodel.measurement import (
    MIX,
    Measurement,
    Prices,
    Sample,
    lambda_milliseconds,
    payer,
    webhook_queue,
)

MEASURED_PATH = Path(__file__).with_name("measured.json")


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
