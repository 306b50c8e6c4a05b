"""The statement pass in dollars: its lines and matches per movement and per order changed
(DynamoDB units and Lambda time, from costmodel/statement.py's counts and the cost model's
measured own work), and one run with nothing to book."""

from __future__ import annotations

from costmodel import statement as statement_pass
from costmodel.limits import load_provider_limits
from costmodel.measurement import Measurement, Prices, Sample
from costmodel.statement_reads import provider_reads
from devstack.capacity import Units

# The provider whose reads price the statement's line in the cost per event (the scenarios are
# Stripe's); the page's table of the pass per provider says what the others cost.
STATEMENT_PRICED_AS = "stripe"


def xray_usd(prices: Prices) -> float:
    """A trace: recorded, and retrieved as often as assumed."""
    retrieved = prices.assumptions["xray_retrieved_per_trace"]
    return prices.rate("xray_trace_recorded") + retrieved * prices.rate("xray_trace_retrieved")


def movements_and_orders_changed(sample: Sample) -> tuple[float, float]:
    """What the provider's books list for the sample, as measured: a line per effect process
    committed (a payment, a capture, a refund, a dispute: its transaction; the cancelled ones
    moved nothing), and the orders that entered an hour of the `changed` index (its entry, 1
    WRU each at these sizes), which every provider's pass matches."""
    movements = 0.0
    orders = 0.0
    for (caller, service, operation, _), units in sample.aws.items():
        if caller != "process" or service != "dynamodb":
            continue
        for metric, amount in units.items():
            if metric.startswith("wru_index:") and metric.endswith("/changed"):
                orders += amount
        if operation == "TransactWriteItems":
            cancelled = sum(v for k, v in units.items() if k.startswith("cancelled_transactions"))
            movements += units["requests"] - cancelled
    return movements, orders


def statement_own_work(measurement: Measurement) -> statement_pass.OwnWork:
    """The pass's own work per line, measured on process's same path: a line booked already
    is read as a duplicate delivery is (its per-event work), a line booked now as a new
    payment."""
    scenarios = measurement.scenarios()

    def per_event(kind: str) -> float:
        sample = scenarios[kind]
        return sample.functions.get("process", Units())["compute_ms"] / max(sample.events, 1)

    return statement_pass.OwnWork(per_event("duplicate"), per_event("new payment"))


def statement_model(measurement: Measurement, prices: Prices) -> statement_pass.StatementModel:
    return statement_pass.StatementModel(
        prices.latency,
        statement_own_work(measurement),
        prices.assumptions,
        provider_reads(prices.assumptions),
        load_provider_limits(),
    )


def _statement_lambda_usd(seconds: float, prices: Prices) -> float:
    gigabytes = statement_pass.MEMORY_MB / 1024
    return seconds * gigabytes * prices.rate("lambda_arm_gb_second")


def statement_usd_per_movement(
    model: statement_pass.StatementModel, prices: Prices, provider: str
) -> float:
    """A movement's line, as often as the provider's passes read it: DynamoDB and Lambda time."""
    return prices.dynamodb(model.units_per_movement(provider)) + _statement_lambda_usd(
        model.seconds_per_movement(provider), prices
    )


def statement_usd_per_order_changed(model: statement_pass.StatementModel, prices: Prices) -> float:
    """An order changed, matched by every provider's pass: its entries read, and their time."""
    return prices.dynamodb(model.units_per_order_changed()) + _statement_lambda_usd(
        model.seconds_per_order_changed(), prices
    )


def statement_usd_per_payment(
    model: statement_pass.StatementModel, prices: Prices, provider: str
) -> dict[str, float]:
    """A payment of `provider`'s (its movements, its order matched), by what bills it."""
    movements = model.movements_per_payment
    lines = prices.dynamodb(model.units_per_movement(provider)) * movements
    match = prices.dynamodb(model.units_per_order_changed())
    seconds = model.seconds_per_movement(provider) * movements + model.seconds_per_order_changed()
    return {"Lambda duration": _statement_lambda_usd(seconds, prices), "DynamoDB": lines + match}


def statement_run_usd(prices: Prices, provider: str = STATEMENT_PRICED_AS) -> float:
    """One pass with nothing to book: its invocation and time (a cold start, its secret, its
    checkpoint, the `changed` index, its record, a page), its DynamoDB units, its secret's read
    (the 5-minute cache outlives no hour), a trace (X-Ray's reservoir of one a second samples
    every run of a function invoked three times an hour) and its log bytes."""
    a = prices.assumptions
    seconds = statement_pass.run_fixed_ms(prices.latency, a, provider) / 1000
    log_bytes = a["statement_log_bytes_per_run"]
    return (
        prices.rate("lambda_request")
        + _statement_lambda_usd(seconds, prices)
        + prices.dynamodb(statement_pass.run_fixed_units(provider))
        + prices.rate("secrets_manager_api_call")
        + xray_usd(prices)
        + log_bytes * prices.rate("cloudwatch_logs_ingested_gb") / 2**30
    )
