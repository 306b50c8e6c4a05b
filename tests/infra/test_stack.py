"""The stack a user deploys, asserted on its synthesized CloudFormation."""

from __future__ import annotations

import importlib
import json
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from functions.shared import settings, tables
from infra.config import PROVIDERS, StackConfig
from infra.constructs.pipeline import PROCESS_TIMEOUT
from infra.settings import LAMBDA_PACKAGES, MAX_RECEIVE_COUNT, pinned_powertools_version
from tests.infra.conftest import Synthesized, scheduled_targets

ROOT = Path(__file__).resolve().parents[2]

FUNCTIONS = {
    name.capitalize(): (handler, packages) for name, (handler, packages) in LAMBDA_PACKAGES.items()
}


def logical_id(synth: Synthesized, kind: str, contains: str) -> str:
    [found] = [k for k in synth.resources(kind) if k.startswith(f"Pipeline{contains}")]
    return found


def function(synth: Synthesized, name: str) -> dict[str, Any]:
    functions = synth.resources("AWS::Lambda::Function")
    return functions[logical_id(synth, "AWS::Lambda::Function", name)]["Properties"]  # type: ignore[no-any-return]


def role_statements(synth: Synthesized, name: str) -> list[dict[str, Any]]:
    """Every statement of every policy attached to the function's role."""
    role = logical_id(synth, "AWS::IAM::Role", f"{name}Role")
    return [
        statement
        for policy in synth.resources("AWS::IAM::Policy").values()
        if {"Ref": role} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions_of(statements: list[dict[str, Any]]) -> set[str]:
    actions: set[str] = set()
    for statement in statements:
        value = statement["Action"]
        actions |= {value} if isinstance(value, str) else set(value)
    return actions


@pytest.mark.parametrize("name", FUNCTIONS)
def test_every_function_is_arm64_traced_json_logged_with_limits(
    prod: Synthesized, name: str
) -> None:
    props = function(prod, name)

    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == "python3.13"
    assert props["TracingConfig"]["Mode"] in {"Active", "PassThrough"}
    assert props["LoggingConfig"]["LogFormat"] == "JSON"
    # Lambda's INFO platform records (start, report) are not worth their bytes
    assert props["LoggingConfig"]["SystemLogLevel"] == "WARN"
    assert props["Timeout"] > 0
    assert props["MemorySize"] >= 256
    assert props["Handler"] == FUNCTIONS[name][0]


@pytest.mark.parametrize("name", FUNCTIONS)
def test_the_powertools_layer_is_resolved_at_deploy_for_the_pinned_release_and_architecture(
    prod: Synthesized, name: str
) -> None:
    # Given the release pyproject.toml pins, read here independently of the stack's code
    [pin] = [
        requirement.split("==")[1]
        for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
            "dependencies"
        ]
        if requirement.startswith("aws-lambda-powertools")
    ]
    props = function(prod, name)

    # When the function's layer is read, Then it is AWS's public SSM parameter of that release,
    # for the function's own architecture and runtime, resolved by CloudFormation at deploy
    [layer] = props["Layers"]
    parameter = prod.template.to_json()["Parameters"][layer["Ref"]]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    [architecture] = props["Architectures"]
    assert parameter["Default"] == (
        f"/aws/service/powertools/python/{architecture}/{props['Runtime']}/{pin}"
    )


def test_the_pinned_powertools_release_is_read_from_pyproject(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["boto3", "aws-lambda-powertools[tracer] == 9.8.7"]\n'
    )

    assert pinned_powertools_version(pyproject) == "9.8.7"

    pyproject.write_text('[project]\ndependencies = ["aws-lambda-powertools>=3"]\n')
    with pytest.raises(ValueError, match="pinned"):
        pinned_powertools_version(pyproject)


@pytest.mark.parametrize("name", FUNCTIONS)
def test_handler_paths_are_the_import_paths_the_tests_use(name: str) -> None:
    module, attribute = FUNCTIONS[name][0].rsplit(".", 1)

    assert callable(getattr(importlib.import_module(module), attribute))


@pytest.mark.parametrize("name", FUNCTIONS)
def test_each_asset_holds_the_packages_its_function_names(prod: Synthesized, name: str) -> None:
    asset = prod.outdir / f"asset.{function(prod, name)['Code']['S3Key'].removesuffix('.zip')}"
    own = FUNCTIONS[name][1]

    packaged = sorted(p.name for p in (asset / "functions").iterdir() if p.is_dir())

    assert packaged == sorted({"shared", *own})
    module_path = FUNCTIONS[name][0].rsplit(".", 1)[0].replace(".", "/") + ".py"
    assert (asset / module_path).is_file()


def test_log_groups_have_retention(prod: Synthesized) -> None:
    groups = prod.resources("AWS::Logs::LogGroup")

    assert len(groups) >= len(FUNCTIONS) + 1  # one per function, plus API access logs
    assert all(g["Properties"].get("RetentionInDays") for g in groups.values())


# What each role allows is held against what its function calls, recorded during a drill:
# tests/infra/test_permissions.py.


@pytest.mark.parametrize("name", FUNCTIONS)
def test_only_xray_and_stream_listing_use_a_wildcard_resource(prod: Synthesized, name: str) -> None:
    wildcard = [s for s in role_statements(prod, name) if s["Resource"] == "*"]

    assert actions_of(wildcard) <= {
        "xray:PutTraceSegments",
        "xray:PutTelemetryRecords",
        "dynamodb:ListStreams",
    }
    assert not any(a.endswith(":*") or a == "*" for a in actions_of(role_statements(prod, name)))


def test_roles_use_no_managed_policies(prod: Synthesized) -> None:
    roles = prod.resources("AWS::IAM::Role")
    function_roles = [r for k, r in roles.items() if k.startswith("Pipeline")]

    assert len(function_roles) == len(FUNCTIONS)
    assert all("ManagedPolicyArns" not in r["Properties"] for r in function_roles)


def test_webhook_queue_is_encrypted_tls_only_and_redrives_to_its_dlq(prod: Synthesized) -> None:
    queues = prod.resources("AWS::SQS::Queue")
    webhooks = queues[logical_id(prod, "AWS::SQS::Queue", "QueuesWebhooks")]["Properties"]
    dlq_id = logical_id(prod, "AWS::SQS::Queue", "QueuesDeadLetters")

    assert webhooks["SqsManagedSseEnabled"] is True
    assert webhooks["VisibilityTimeout"] >= 6 * PROCESS_TIMEOUT.to_seconds()
    assert webhooks["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [dlq_id, "Arn"]},
        "maxReceiveCount": MAX_RECEIVE_COUNT,
    }
    # The DLQ takes (and redrives back to) the webhook queue only, named by its fixed name
    dlq = queues[dlq_id]["Properties"]
    [source] = dlq["RedriveAllowPolicy"]["sourceQueueArns"]
    assert dlq["RedriveAllowPolicy"]["redrivePermission"] == "byQueue"
    assert webhooks["QueueName"] == "Umavez-test-webhooks"
    assert source == {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":sqs:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                ":Umavez-test-webhooks",
            ],
        ]
    }
    assert all(q["Properties"].get("SqsManagedSseEnabled") for q in queues.values())
    policies = prod.resources("AWS::SQS::QueuePolicy")
    assert len(policies) == len(queues)
    for policy in policies.values():
        [deny] = policy["Properties"]["PolicyDocument"]["Statement"]
        assert deny["Effect"] == "Deny"
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}


def test_queues_are_retained_in_prod_and_disposable_in_dev(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    prod_queues = prod.resources("AWS::SQS::Queue").values()
    dev_queues = dev_with_waf.resources("AWS::SQS::Queue").values()

    assert len(prod_queues) == 3  # webhooks, their DLQ, the outbox stream's failures
    # Kept on delete and replacement; removed only when the stack's own create rolls back
    assert {(q["DeletionPolicy"], q["UpdateReplacePolicy"]) for q in prod_queues} == {
        ("RetainExceptOnCreate", "Retain")
    }
    assert {q["DeletionPolicy"] for q in dev_queues} == {"Delete"}


def test_process_mapping_reports_partial_failures_with_batching_and_concurrency(
    prod: Synthesized,
) -> None:
    prod.template.has_resource_properties(
        "AWS::Lambda::EventSourceMapping",
        {
            "FunctionName": {"Ref": logical_id(prod, "AWS::Lambda::Function", "Process")},
            "BatchSize": 10,
            "MaximumBatchingWindowInSeconds": 1,
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "ScalingConfig": {"MaximumConcurrency": 5},
        },
    )


def test_outbox_mapping_filters_new_pending_items_and_is_fully_bounded(prod: Synthesized) -> None:
    failures = logical_id(prod, "AWS::SQS::Queue", "OutboxStreamFailures")
    mappings = prod.resources("AWS::Lambda::EventSourceMapping")
    [outbox] = [
        m["Properties"]
        for m in mappings.values()
        if m["Properties"]["FunctionName"]
        == {"Ref": logical_id(prod, "AWS::Lambda::Function", "Outbox")}
    ]

    [pattern] = [json.loads(f["Pattern"]) for f in outbox["FilterCriteria"]["Filters"]]
    assert pattern == {
        "eventName": ["INSERT"],
        "dynamodb": {"NewImage": {"status": {"S": ["pending"]}}},
    }
    assert outbox["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert outbox["BisectBatchOnFunctionError"] is True
    assert outbox["ParallelizationFactor"] == 4
    assert outbox["MaximumRetryAttempts"] == 3
    assert outbox["MaximumRecordAgeInSeconds"] == 3600
    assert outbox["DestinationConfig"] == {
        "OnFailure": {"Destination": {"Fn::GetAtt": [failures, "Arn"]}}
    }
    assert outbox["StartingPosition"] == "TRIM_HORIZON"


def test_tables_use_the_shared_key_names_on_demand_with_pitr_and_protection(
    prod: Synthesized,
) -> None:
    found = prod.resources("AWS::DynamoDB::GlobalTable")
    ledger = found[logical_id(prod, "AWS::DynamoDB::GlobalTable", "StorageLedger")]
    outbox = found[logical_id(prod, "AWS::DynamoDB::GlobalTable", "StorageOutbox")]

    assert [k["AttributeName"] for k in ledger["Properties"]["KeySchema"]] == [
        tables.PARTITION_KEY,
        tables.SORT_KEY,
    ]
    assert [k["AttributeName"] for k in outbox["Properties"]["KeySchema"]] == [tables.OUTBOX_KEY]
    assert outbox["Properties"]["StreamSpecification"] == {"StreamViewType": "NEW_IMAGE"}
    for table in (ledger, outbox):
        assert table["Properties"]["TimeToLiveSpecification"] == {
            "AttributeName": tables.EXPIRES_AT,
            "Enabled": True,
        }
        assert table["Properties"]["BillingMode"] == "PAY_PER_REQUEST"
        [replica] = table["Properties"]["Replicas"]
        assert replica["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
        assert replica["DeletionProtectionEnabled"] is True
        assert table["DeletionPolicy"] == "Retain"


def test_indexes_are_the_ones_the_local_and_test_tables_are_created_with(
    prod: Synthesized,
) -> None:
    # Given the CreateTable requests the functions' tests and the local stack use
    requests = {
        "StorageLedger": tables.create_table_requests(tables.TableNames())[0],
        "StorageOutbox": tables.create_table_requests(tables.TableNames())[1],
    }
    found = prod.resources("AWS::DynamoDB::GlobalTable")

    for name, request in requests.items():
        table = found[logical_id(prod, "AWS::DynamoDB::GlobalTable", name)]["Properties"]

        # Then the deployed table has the same indexes, keys, key types and projections
        assert sorted(map(index_shape, table["GlobalSecondaryIndexes"])) == sorted(
            map(index_shape, request["GlobalSecondaryIndexes"])
        )
        assert sorted(table["AttributeDefinitions"], key=str) == sorted(
            request["AttributeDefinitions"], key=str
        )
    ledger = found[logical_id(prod, "AWS::DynamoDB::GlobalTable", "StorageLedger")]
    [changes] = ledger["Properties"]["GlobalSecondaryIndexes"]
    assert changes["IndexName"] == tables.LEDGER_CHANGES_INDEX
    # No sort key: an order changed again within its hour writes nothing to the index
    assert changes["KeySchema"] == [{"AttributeName": tables.CHANGES_BUCKET, "KeyType": "HASH"}]
    assert changes["Projection"] == {"ProjectionType": "KEYS_ONLY"}


def index_shape(index: dict[str, Any]) -> tuple[str, str, str]:
    return (index["IndexName"], json.dumps(index["KeySchema"]), json.dumps(index["Projection"]))


def test_dev_stage_tables_can_be_deleted(dev_with_waf: Synthesized) -> None:
    for table in dev_with_waf.resources("AWS::DynamoDB::GlobalTable").values():
        assert table["DeletionPolicy"] == "Delete"
        assert table["Properties"]["Replicas"][0]["DeletionProtectionEnabled"] is False


def test_waf_is_attached_only_when_asked(prod: Synthesized, dev_with_waf: Synthesized) -> None:
    assert prod.resources("AWS::WAFv2::WebACL") == {}
    [acl] = dev_with_waf.resources("AWS::WAFv2::WebACL").values()
    rules = {r["Name"]: r["Statement"] for r in acl["Properties"]["Rules"]}
    assert set(rules) == {"rate-per-ip", "body-size"}
    assert len(dev_with_waf.resources("AWS::WAFv2::WebACLAssociation")) == 1


def test_each_provider_has_a_secret_and_ingest_knows_its_name(prod: Synthesized) -> None:
    secrets = prod.resources("AWS::SecretsManager::Secret")
    names = {s["Properties"]["Name"] for s in secrets.values()}
    configured = json.loads(
        function(prod, "Ingest")["Environment"]["Variables"]["PROVIDER_SECRETS"]
    )

    assert configured == {p: f"umavez/prod/{p}/webhook" for p in PROVIDERS}
    api_credentials = {
        "umavez/prod/mercadopago/access-token",
        "umavez/prod/stripe/api-key",
        "umavez/prod/asaas/api-key",
    }
    assert set(configured.values()) | api_credentials == names


def test_sweeper_and_reconciliation_run_on_schedules(prod: Synthesized) -> None:
    # (the reconciliation's schedule starts its state machine, which runs the function)
    schedules = {(every, function_id) for function_id, every in scheduled_targets(prod)}

    assert schedules == {
        ("rate(5 minutes)", logical_id(prod, "AWS::Lambda::Function", "Sweeper")),
        ("rate(1 hour)", logical_id(prod, "AWS::Lambda::Function", "Reconciliation")),
        ("rate(5 minutes)", logical_id(prod, "AWS::Lambda::Function", "Waiting")),
        ("rate(1 hour)", logical_id(prod, "AWS::Lambda::Function", "Statement")),
        ("cron(15 3 * * ? *)", logical_id(prod, "AWS::Lambda::Function", "Statement")),
    }


def statement_rules(synth: Synthesized) -> dict[str, list[dict[str, Any]]]:
    """The statement function's rules by schedule expression: each target's input, parsed."""
    statement = logical_id(synth, "AWS::Lambda::Function", "Statement")
    return {
        rule["Properties"]["ScheduleExpression"]: [
            json.loads(target["Input"]) for target in rule["Properties"]["Targets"]
        ]
        for rule in synth.resources("AWS::Events::Rule").values()
        if rule["Properties"]["Targets"][0]["Arn"] == {"Fn::GetAtt": [statement, "Arn"]}
    }


def test_stripe_and_mercado_pago_are_read_hourly_and_asaas_once_a_day_after_brazil_s_day(
    prod: Synthesized,
) -> None:
    rules = statement_rules(prod)

    # Then one hourly rule reads Stripe and Mercado Pago, a run each
    assert rules["rate(1 hour)"] == [{"provider": "stripe"}, {"provider": "mercadopago"}]
    # And Asaas is read by a daily rule of its own, at 03:15 UTC: Brazil's midnight (UTC-3)
    # plus Asaas's 5 minutes of settle lag, at the next quarter hour, so the run reads the day
    # that just ended whole
    assert rules["cron(15 3 * * ? *)"] == [{"provider": "asaas"}]
    assert set(rules) == {"rate(1 hour)", "cron(15 3 * * ? *)"}


def test_alarms_cover_what_the_runbook_lists_and_notify_sns(prod: Synthesized) -> None:
    alarms = prod.resources("AWS::CloudWatch::Alarm")
    [topic] = prod.resources("AWS::SNS::Topic")
    names = set(prod.stack.monitoring.alarms)
    assert len(alarms) == len(names)

    for expected in (
        "DeadLetters",
        "OutboxStreamFailures",
        "OutboxIteratorAge",
        "ProcessErrors",
        "IngestThrottles",
        "ProcessFailed",
        "DuplicateSurge",
        "StaleSurge",
        "AmountDisagreements",
        "PaymentConflicts",
        "WaitingOverAnHour",
        "UnroutablePayments",
        "UnmatchedPayments",
        "ProcessBatchesCutShort",
        "WebhookQueueAge",
        "SignatureFailures",
        "IngestUnavailable",
        "Api4xx",
        "Api5xx",
        "ReconciliationMismatches",
        "ReconciliationStopped",
        "StatementMismatches",
        "StatementBehind",
        "DeadOutboxItems",
    ):
        assert expected in names, expected
    assert all(a["Properties"]["AlarmActions"] == [{"Ref": topic}] for a in alarms.values())
    assert len(prod.resources("AWS::CloudWatch::Dashboard")) == 1


def test_outputs_name_each_webhook_url_table_and_queue(prod: Synthesized) -> None:
    outputs = prod.template.find_outputs("*")

    for name in (
        "WebhookUrlStripe",
        "WebhookUrlMercadopago",
        "WebhookUrlAsaas",
        "LedgerTable",
        "OutboxTable",
        "WebhookQueueUrl",
        "DeadLetterQueueUrl",
        "DeadLetterQueueArn",
        "OutboxFailureQueueUrl",
        "AlarmTopicArn",
    ):
        assert name in outputs, name
    # The operator commands read the provider APIs with these (replay, charge.refunded)
    assert outputs["SecretStripeApiKey"]["Value"] == "umavez/prod/stripe/api-key"
    assert outputs["SecretMercadopagoAccessToken"]["Value"] == (
        "umavez/prod/mercadopago/access-token"
    )
    assert outputs["SecretAsaasApiKey"]["Value"] == "umavez/prod/asaas/api-key"


def runbook_rows() -> dict[str, str]:
    """The runbook's table (docs/operations.md): each row by the alarm name(s) its first cell
    holds."""
    page = (ROOT / "docs" / "operations.md").read_text()
    runbook = page[page.index("## Runbook") :].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in runbook.splitlines():
        if line.startswith("| `"):
            first_cell = line.split(" | ", 1)[0]
            for name in first_cell.split("`")[1::2]:
                rows[name] = line
    return rows


def test_the_runbook_has_an_entry_per_alarm(prod: Synthesized) -> None:
    rows = runbook_rows()
    runbook_names = set(prod.stack.monitoring.alarms)
    generic = {n for n in runbook_names if n.endswith(("Errors", "Throttles"))}

    for name in runbook_names - generic:
        assert name in rows, name
    assert {"<Function>Errors", "<Function>Throttles"} <= set(rows)


# The operator command that repairs what the alarm reports, by the names the CLI gives them.
REPAIR_COMMANDS = {
    "DeadLetters": ["umavez dlq list", "umavez dlq redrive"],
    "ProcessBatchesCutShort": ["umavez dlq redrive"],
    "DeadOutboxItems": ["umavez outbox revive OUTBOX_ID", "--all-dead"],
    "IngestUnavailable": [r"umavez replay stripe\|mercadopago\|asaas --since ISO --until ISO"],
    "Api4xx": [r"umavez replay stripe\|mercadopago\|asaas --since ISO --until ISO"],
    "WaitingOverAnHour": ["umavez show waiting"],
    "UnmatchedPayments": ["umavez show unmatched", "umavez attach PROVIDER OBJECT ORDER_ID"],
    "UnroutablePayments": ["umavez attach PROVIDER OBJECT ORDER_ID", "umavez replay"],
}


@pytest.mark.parametrize("alarm", REPAIR_COMMANDS)
def test_runbook_names_the_command_that_repairs_what_the_alarm_reports(
    prod: Synthesized, alarm: str
) -> None:
    assert alarm in prod.stack.monitoring.alarms
    for command in REPAIR_COMMANDS[alarm]:
        assert command in runbook_rows()[alarm], command


def environment(synth: Synthesized, name: str) -> dict[str, Any]:
    return function(synth, name)["Environment"]["Variables"]  # type: ignore[no-any-return]


def test_ingest_and_process_apply_live_events_in_prod_and_test_events_elsewhere(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    for name in ("Ingest", "Process"):
        assert environment(prod, name)[settings.PAYMENT_MODE_ENV] == "live"
        assert environment(dev_with_waf, name)[settings.PAYMENT_MODE_ENV] == "test"
    # Nothing else decides which mode's events count
    others = set(FUNCTIONS) - {"Ingest", "Process"}
    assert not any(settings.PAYMENT_MODE_ENV in environment(prod, name) for name in others)


def test_one_trace_per_sampled_webhook_started_where_the_sampling_can_be_chosen(
    prod: Synthesized, dev_with_waf: Synthesized, synth_for: Callable[[StackConfig], Synthesized]
) -> None:
    # Given the HTTP API (which X-Ray does not trace), the REST API, and tracing turned off
    untraced = synth_for(
        StackConfig(stage="dev", xray_sampling=0.0, allow_no_alarm_subscription=True)
    )

    def modes(synth: Synthesized) -> dict[str, str]:
        return {name: function(synth, name)["TracingConfig"]["Mode"] for name in FUNCTIONS}

    # Then with the HTTP API ingest starts the trace (Lambda's fixed rate), with the REST API
    # the stage does, by the stack's rule (1% by default, no reservoir), and ingest continues;
    # process always continues ingest's trace (one trace per webhook); the stream and the
    # schedules start their own; with xraySampling=0 nothing starts a trace
    starters = {"Outbox": "Active", "Sweeper": "Active", "Waiting": "Active", "Statement": "Active"}
    assert modes(prod) == {
        "Ingest": "Active",
        "Process": "PassThrough",
        "Reconciliation": "Active",
        **starters,
    }
    assert modes(dev_with_waf)["Ingest"] == "PassThrough"
    assert modes(dev_with_waf)["Process"] == "PassThrough"
    dev_with_waf.template.has_resource_properties(
        "AWS::XRay::SamplingRule",
        {
            "SamplingRule": Match.object_like(
                {
                    "FixedRate": 0.01,
                    "ReservoirSize": 0,
                    "ServiceType": "AWS::ApiGateway::Stage",
                    "URLPath": "*",
                    "HTTPMethod": "POST",
                }
            )
        },
    )
    assert prod.resources("AWS::XRay::SamplingRule") == {}
    assert set(modes(untraced).values()) == {"PassThrough"}
    # Ingest never loads the X-Ray SDK (its cold start); the others do when traced
    assert environment(prod, "Ingest")["POWERTOOLS_TRACE_DISABLED"] == "true"
    others = set(FUNCTIONS) - {"Ingest"}
    assert not any("POWERTOOLS_TRACE_DISABLED" in environment(prod, name) for name in others)


@pytest.mark.parametrize("name", ["Process", "Outbox", "Sweeper", "Waiting", "Reconciliation"])
def test_functions_that_write_expiring_items_know_the_retention(
    prod: Synthesized, dev_with_waf: Synthesized, name: str
) -> None:
    assert environment(prod, name)[settings.RETENTION_DAYS_ENV] == str(
        settings.DEFAULT_RETENTION_DAYS
    )
    assert environment(dev_with_waf, name)[settings.RETENTION_DAYS_ENV] == "30"


def test_only_the_senders_know_when_to_give_a_notification_up(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    for name in ("Outbox", "Sweeper"):
        assert environment(prod, name)[settings.OUTBOX_GIVE_UP_HOURS_ENV] == str(
            settings.DEFAULT_OUTBOX_GIVE_UP_HOURS
        )
        assert environment(dev_with_waf, name)[settings.OUTBOX_GIVE_UP_HOURS_ENV] == "6"
    others = set(FUNCTIONS) - {"Outbox", "Sweeper"}
    assert not any(settings.OUTBOX_GIVE_UP_HOURS_ENV in environment(prod, n) for n in others)


def resources_allowed(statements: list[dict[str, Any]], action: str) -> list[Any]:
    """Every resource a role may use the action on, as CloudFormation renders it."""
    found: list[Any] = []
    for statement in statements:
        if action in actions_of([statement]):
            resources = statement["Resource"]
            found += resources if isinstance(resources, list) else [resources]
    return sorted(found, key=json.dumps)


@pytest.mark.parametrize("name", ["Outbox", "Sweeper"])
def test_senders_may_send_as_the_sender_address_and_as_its_domain(
    prod: Synthesized, name: str
) -> None:
    allowed = resources_allowed(role_statements(prod, name), "ses:SendEmail")

    # arn:<partition>:ses:<region>:<account>:identity/<identity>
    assert sorted(arn["Fn::Join"][1][-1] for arn in allowed) == [
        ":identity/example.com",
        ":identity/loja@example.com",
    ]
    assert all(arn["Fn::Join"][1][2] == ":ses:" for arn in allowed)


def test_reconciliation_queries_only_the_changes_and_due_indexes(prod: Synthesized) -> None:
    statements = role_statements(prod, "Reconciliation")
    ledger = logical_id(prod, "AWS::DynamoDB::GlobalTable", "StorageLedger")
    outbox = logical_id(prod, "AWS::DynamoDB::GlobalTable", "StorageOutbox")

    def on(table: str, index: str | None = None) -> Any:
        arn = {"Fn::GetAtt": [table, "Arn"]}
        return {"Fn::Join": ["", [arn, f"/index/{index}"]]} if index else arn

    assert resources_allowed(statements, "dynamodb:Query") == sorted(
        [on(ledger), on(ledger, tables.LEDGER_CHANGES_INDEX), on(outbox, tables.OUTBOX_DUE_INDEX)],
        key=json.dumps,
    )
    # The checkpoint (PutItem) and the runs' summary (UpdateItem): the ledger only
    for action in ("dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"):
        assert resources_allowed(statements, action) == [on(ledger)], action
    assert resources_allowed(statements, "dynamodb:BatchGetItem") == sorted(
        [on(ledger), on(outbox)], key=json.dumps
    )
