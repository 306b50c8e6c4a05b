"""The one door from the operator's tool to the embedded stack, the fire drill and the cost model.

The local commands (`serve`, `firedrill`, `cost`, `capacity`, `show metrics`, and any command
pointed at the embedded stack's endpoint) load them through this module, and nothing else in
`ops` imports them: the import contracts in pyproject.toml hold it. The CLI imports this module
only inside those commands, so `umavez preflight` and the commands on the deployed stack never
load moto.
"""

from __future__ import annotations

from costmodel.command import CapacityOptions, run_capacity, run_cost
from costmodel.measurement import CostOptions, embedded_drain_seconds
from devstack.fake_registration import (
    FakeApiError,
    register_asaas_payment,
    register_mercadopago_order,
    register_mercadopago_payment,
    register_stripe_object,
)
from devstack.handlers import stack_log_path
from devstack.metrics_report import show as show_metrics
from devstack.resources import (
    ASAAS_DEVELOPMENT_API_KEY,
    DEAD_LETTER_QUEUE_NAME,
    DEVELOPMENT_SECRETS,
    MERCADOPAGO_DEVELOPMENT_TOKEN,
    STRIPE_DEVELOPMENT_API_KEY,
    WEBHOOK_QUEUE_NAME,
    client,
    put_stripe_event,
)
from devstack.sink import SINK_TABLE, sink_counts
from devstack.stack import RECONCILE_EVERY_SECONDS as LOCAL_RECONCILE_EVERY_SECONDS
from devstack.stack import EmbeddedStack
from firedrill.delivery import DeliveryLog, Providers
from firedrill.run import (
    DEFAULT_DELIVERIES,
    DeployedTarget,
    DrillOptions,
    run_deployed,
    run_embedded,
)
from firedrill.story import Post

__all__ = [
    "ASAAS_DEVELOPMENT_API_KEY",
    "DEAD_LETTER_QUEUE_NAME",
    "DEFAULT_DELIVERIES",
    "DEVELOPMENT_SECRETS",
    "LOCAL_RECONCILE_EVERY_SECONDS",
    "MERCADOPAGO_DEVELOPMENT_TOKEN",
    "SINK_TABLE",
    "STRIPE_DEVELOPMENT_API_KEY",
    "WEBHOOK_QUEUE_NAME",
    "CapacityOptions",
    "CostOptions",
    "DeliveryLog",
    "DeployedTarget",
    "DrillOptions",
    "EmbeddedStack",
    "FakeApiError",
    "Post",
    "Providers",
    "client",
    "embedded_drain_seconds",
    "put_stripe_event",
    "register_asaas_payment",
    "register_mercadopago_order",
    "register_mercadopago_payment",
    "register_stripe_object",
    "run_capacity",
    "run_cost",
    "run_deployed",
    "run_embedded",
    "show_metrics",
    "sink_counts",
    "stack_log_path",
]
