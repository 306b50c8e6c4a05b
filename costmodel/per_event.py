"""What one delivery of the drill mix used, from a measurement (`make cost`): the figures the
capacity model (headroom.py) multiplies by a rate; durations modeled in AWS."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from costmodel.measurement import (
    MIX,
    RRU_METRICS,
    TABLE_WRU_METRICS,
    Measurement,
    Prices,
    Sample,
    lambda_milliseconds,
    payer,
    webhook_queue,
)


@dataclass(frozen=True)
class PerEvent:
    """What one delivery of the drill mix used (an HTTP request to the webhook API), durations
    modeled in AWS; a payment is one order's story in that mix, its retries included."""

    measured_on: str
    deliveries: int
    orders: int
    invocations: dict[str, float]  # by function
    seconds: dict[str, float]  # by function, modeled in AWS
    queue_messages: float  # webhook queue messages process received
    queue_requests: float  # SQS requests on the webhook queue, as billed
    write_units: dict[str, float]  # by table: transactional and standard writes
    read_units: dict[str, float]  # by table, its indexes included
    index_write_units: dict[str, float]  # by "table/index"
    outbox_items: float  # new outbox items: the stream records the sender gets
    put_events: float
    emails: float  # SES recipients
    waiting_redrives: float  # parked deliveries the waiting run re-enqueued
    seconds_per_redrive: float  # the waiting run's calls for one, modeled in AWS
    secrets_per_container: float  # secrets a warm ingest or process container reads

    @property
    def deliveries_per_payment(self) -> float:
        return self.deliveries / max(self.orders, 1)

    def seconds_per(self, function: str, work: float) -> float:
        """Seconds one unit of `work` (a request, a message, an item, an order) takes."""
        return self.seconds.get(function, 0.0) / work if work else 0.0

    @classmethod
    def of(cls, measurement: Measurement, prices: Prices) -> PerEvent:
        scenarios = measurement.scenarios()
        if MIX not in scenarios:
            raise ValueError("the measurement has no drill mix: run `make cost` (orders > 0)")
        sample = scenarios[MIX]
        events, queue = max(sample.events, 1), webhook_queue()
        modeled = lambda_milliseconds(sample, prices)

        def per(metric: str, *where: str | None) -> float:
            return _sum(sample, metric, *where) / events

        # As billed: the event source mapping's empty long polls are not traffic.
        queue_billed = _sum(sample, "billed", None, "sqs", None, queue, billed=True)
        queue_empty = _sum(sample, "empty_receives", None, "sqs", None, queue, billed=True)
        outbox = f"items_written:{_outbox_table(sample)}"
        return cls(
            measurement.measured_on,
            sample.events,
            int(measurement.options.get("orders", 0)),
            {f: sample.invocations(f) / events for f in sample.functions},
            {f: modeled[f] / 1000 / events for f in sample.functions},
            per("messages", None, "sqs", None, queue),
            (queue_billed - queue_empty) / events,
            _by_table(sample, TABLE_WRU_METRICS, events),
            _by_table(sample, RRU_METRICS, events),
            _by_table(sample, ("wru_index",), events, keep_index=True),
            per(outbox, "process", None, "TransactWriteItems"),
            per("requests", None, "events"),
            per("billed", None, "sesv2"),
            per("requests", "waiting", "sqs", None, queue),
            _redrive_seconds(sample, prices),
            prices.assumptions["secrets_read_per_container"],
        )


def _sum(sample: Sample, metric: str, *key: str | None, billed: bool = False) -> float:
    """A metric over the requests whose key (caller, service, operation, resource) matches
    `key` where it is not None; `billed`: only those AWS bills."""
    queue = webhook_queue()
    return sum(
        units[metric]
        for found, units in sample.aws.items()
        if all(want is None or have == want for have, want in zip(found, key, strict=False))
        and (not billed or payer(found, queue) is not None)
    )


# One re-drive: the message back on the queue, the parked item removed. The run's other calls
# are the same every run, and its local run-to-run time is noise (a schedule of seconds).
REDRIVE_OPERATIONS = frozenset({"SendMessage", "DeleteItem", "TransactWriteItems"})


def _redrive_seconds(sample: Sample, prices: Prices) -> float:
    redrives = _sum(sample, "requests", "waiting", "sqs", "SendMessage")
    milliseconds = sum(
        units["requests"] * prices.latency(service, operation)
        for (caller, service, operation, _), units in sample.aws.items()
        if caller == "waiting" and operation in REDRIVE_OPERATIONS
    )
    return milliseconds / 1000 / redrives if redrives else 0.0


def _by_table(
    sample: Sample, kinds: Sequence[str], events: int, *, keep_index: bool = False
) -> dict[str, float]:
    """Request units by table (an index's reads count on its table; its writes on their own),
    of the stack's functions and event source mappings."""
    found: dict[str, float] = {}
    for (caller, service, _, _), units in sample.aws.items():
        if service != "dynamodb" or not caller:
            continue
        for metric, amount in units.items():
            kind, _, where = metric.partition(":")
            if kind in kinds:
                name = where if keep_index else where.split("/", 1)[0]
                found[name] = found.get(name, 0.0) + amount / events
    return dict(sorted(found.items()))


def _outbox_table(sample: Sample) -> str:
    """The outbox table's name: the table the sender reads by its key."""
    found = (r for c, s, _, r in sample.aws if c == "outbox" and s == "dynamodb" and "outbox" in r)
    return next(found, "outbox")
