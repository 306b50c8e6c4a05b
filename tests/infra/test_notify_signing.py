"""An HTTP sink configured: its signing secret, named to the senders and readable by them only."""

from __future__ import annotations

from collections.abc import Callable

from infra.config import StackConfig
from tests.infra.conftest import Synthesized
from tests.infra.test_stack import function, role_statements

NOTIFY_URL = "https://hooks.example.com/umavez"
SIGNING_SECRET = "umavez/dev/notify/signing"


def signing_secret_id(synth: Synthesized) -> list[str]:
    return [
        logical_id
        for logical_id, secret in synth.resources("AWS::SecretsManager::Secret").items()
        if secret["Properties"].get("Name") == SIGNING_SECRET
    ]


def readers_of(synth: Synthesized, logical_id: str) -> set[str]:
    return {
        name
        for name in ("Ingest", "Process", "Outbox", "Sweeper", "Waiting")
        for statement in role_statements(synth, name)
        if "secretsmanager:GetSecretValue" in statement["Action"]
        and {"Ref": logical_id}
        in (
            statement["Resource"]
            if isinstance(statement["Resource"], list)
            else [statement["Resource"]]
        )
    }


def test_a_notify_url_brings_its_signing_secret_read_by_the_senders_only(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    # Given a stack notifying an HTTP sink
    synth = synth_for(StackConfig(stage="dev", notify_url=NOTIFY_URL))

    # Then its signing secret exists, the senders are told its name, and only they read it
    [secret] = signing_secret_id(synth)
    for name in ("Outbox", "Sweeper"):
        variables = function(synth, name)["Environment"]["Variables"]
        assert (variables["NOTIFY_URL"], variables["NOTIFY_SIGNING_SECRET"]) == (
            NOTIFY_URL,
            SIGNING_SECRET,
        )
    assert readers_of(synth, secret) == {"Outbox", "Sweeper"}


def test_without_a_notify_url_there_is_no_signing_secret(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    synth = synth_for(StackConfig(stage="dev"))

    assert signing_secret_id(synth) == []
    assert "NOTIFY_SIGNING_SECRET" not in function(synth, "Outbox")["Environment"]["Variables"]


def test_preflight_and_the_read_policy_find_the_signing_secret_by_the_stacks_output(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    # Given a stack notifying an HTTP sink
    synth = synth_for(StackConfig(stage="dev", notify_url=NOTIFY_URL))
    [secret] = signing_secret_id(synth)

    # Then an output names its secret, and on-call's read policy may describe it (preflight
    # tells a secret left unset by its versions, never its value)
    outputs = synth.template.to_json()["Outputs"]
    assert outputs["SecretNotifySigning"]["Value"] == SIGNING_SECRET
    [read] = [
        p["Properties"]["PolicyDocument"]["Statement"]
        for k, p in synth.resources("AWS::IAM::ManagedPolicy").items()
        if "OperatorsRead" in k
    ]
    [describe] = [s for s in read if s["Action"] == "secretsmanager:DescribeSecret"]
    assert {"Ref": secret} in describe["Resource"]
