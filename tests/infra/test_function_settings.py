"""Each function reads one settings model, and the CDK stack and the embedded stack write its
environment from that same model: the template's variables are exactly what the function
reads, every one parses, and a value that does not is refused by name."""

from __future__ import annotations

import json
from typing import Any

import pytest

from devstack.resources import LocalResources
from functions.ingest.environment import IngestSettings
from functions.shared.environment import (
    FunctionSettings,
    ProcessSettings,
    ReconcileSettings,
    SenderSettings,
    StatementSettings,
    SweeperSettings,
    WaitingSettings,
)
from functions.shared.errors import SettingsError
from functions.shared.tables import TableNames
from tests.infra.conftest import Synthesized
from tests.infra.test_stack import environment

# Each function's model; what it is given beyond it belongs to Lambda's runtime or Powertools.
MODELS: dict[str, type[FunctionSettings] | type[IngestSettings]] = {
    "Ingest": IngestSettings,
    "Process": ProcessSettings,
    "Waiting": WaitingSettings,
    "Outbox": SenderSettings,
    "Sweeper": SweeperSettings,
    "Reconciliation": ReconcileSettings,
    "Statement": StatementSettings,
}
RUNTIME_PREFIXES = ("POWERTOOLS_", "AWS_")


def names_of(model: type[FunctionSettings] | type[IngestSettings]) -> set[str]:
    if isinstance(model, type) and issubclass(model, FunctionSettings):
        return {field.alias or name for name, field in model.model_fields.items()}
    return set(IngestSettings.VARIABLES.values())


def as_deployed(variables: dict[str, Any]) -> dict[str, str]:
    """The template's values as the function sees them once CloudFormation resolved them (a
    reference becomes a name; a JSON document's references, names)."""

    def resolved(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and "Fn::Join" in value:
            return "".join(part if isinstance(part, str) else "x" for part in value["Fn::Join"][1])
        return "resolved-name"

    return {name: resolved(value) for name, value in variables.items()}


@pytest.mark.parametrize("name", MODELS)
def test_the_template_sets_exactly_what_each_function_reads(prod: Synthesized, name: str) -> None:
    # Given a function's environment in the synthesized template
    variables = environment(prod, name)
    model = MODELS[name]

    # When its own variables are read with its model
    own = {k: v for k, v in variables.items() if not k.startswith(RUNTIME_PREFIXES)}
    settings = model.from_env(as_deployed(variables))

    # Then every one of them is a setting it reads, and it parses
    assert set(own) <= names_of(model), set(own) - names_of(model)
    assert settings is not None


def test_the_embedded_stack_gives_every_function_what_its_model_reads() -> None:
    # Given the embedded stack's environment (one process runs every function)
    resources = LocalResources(
        endpoint_url="http://127.0.0.1:1",
        tables=TableNames("local-ledger", "local-outbox"),
        queue_url="http://127.0.0.1:1/queue/webhooks",
        dead_letter_url="http://127.0.0.1:1/queue/dead",
        outbox_failures_url="http://127.0.0.1:1/queue/failures",
        sink_queue_url="http://127.0.0.1:1/queue/sink",
        bus_name="umavez-local",
        secret_names={"stripe": "umavez/local/stripe/webhook"},
        mercadopago_token_secret="umavez/local/mercadopago/access-token",
        stripe_api_key_secret="umavez/local/stripe/api-key",
    )
    variables = resources.environment()

    # When each function reads it, Then each parses, and every variable is someone's setting
    for model in MODELS.values():
        model.from_env(variables)
    read = set().union(*(names_of(m) for m in MODELS.values()))
    own = {k for k in variables if not k.startswith(RUNTIME_PREFIXES)}
    assert own <= read, own - read
    assert ProcessSettings.from_env(variables).tables == TableNames("local-ledger", "local-outbox")


@pytest.mark.parametrize(
    ("model", "variables", "named"),
    [
        (ProcessSettings, {"RETENTION_DAYS": "ninety"}, "RETENTION_DAYS"),
        (SenderSettings, {"OUTBOX_LEASE_SECONDS": "0"}, "OUTBOX_LEASE_SECONDS"),
        (StatementSettings, {"STATEMENT_WINDOW_SECONDS": "10"}, "STATEMENT_WINDOW_SECONDS"),
        (ProcessSettings, {"PAYMENT_MODE": "production"}, "PAYMENT_MODE"),
        (IngestSettings, {"WEBHOOK_QUEUE_URL": "q"}, "PROVIDER_SECRETS"),
        (IngestSettings, {"WEBHOOK_QUEUE_URL": "q", "PROVIDER_SECRETS": "[1]"}, "PROVIDER_SECRETS"),
        (
            IngestSettings,
            {"WEBHOOK_QUEUE_URL": "q", "PROVIDER_SECRETS": "{}", "ASAAS_SOURCE_IPS": "asaas.com"},
            "ASAAS_SOURCE_IPS",
        ),
    ],
)
def test_a_value_that_does_not_parse_is_refused_by_its_name(
    model: type[FunctionSettings] | type[IngestSettings],
    variables: dict[str, str],
    named: str,
) -> None:
    with pytest.raises(SettingsError, match=named):
        model.from_env(variables)


def test_a_stack_cannot_write_a_setting_the_function_does_not_have() -> None:
    with pytest.raises(TypeError, match="retention_dayz"):
        ProcessSettings.variables(retention_dayz=30)
    assert IngestSettings.variables(provider_secrets={"stripe": "s"}) == {
        "PROVIDER_SECRETS": json.dumps({"stripe": "s"})
    }
