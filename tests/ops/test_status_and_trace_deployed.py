"""`umavez status` and `umavez trace` on a deployed stack found by its name (moto's
CloudFormation): status reads each part from AWS and needs a person exactly when one part is
wrong; trace reads the functions' log groups with Logs Insights and the stack's tables."""

from __future__ import annotations

import io
import json
import logging
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter

from devstack.provider_apis import FakeProviderApis
from devstack.resources import ASAAS_DEVELOPMENT_API_KEY
from functions.reconcile.checkpoint import CHECKPOINT_PK, LAST_RUN_SK
from functions.shared import tables
from functions.shared.dynamo import to_attributes
from functions.shared.outbox import outbox_id_for
from functions.statement.service import LAST_RUN_PK as STATEMENT_RUNS_PK
from ops.cli import main
from ops.cli.mistakes import MISTAKE, explained
from ops.trace import InsightsLogs, LogsQueryError
from tests.ops.conftest import ACCESS_LOGS, ALARMS, LOG_GROUPS, NAMES, STACK
from tests.support.asaas import asaas_webhook
from tests.support.clock import FakeClock

BY_NAME = ("--stack-name", STACK, "--region", "us-east-1")
HOUR = 3600


def status(capsys: pytest.CaptureFixture[str], *more: str) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["status", "--json", *BY_NAME, *more])
    return code, json.loads(capsys.readouterr().out)


def put_ledger(item: dict[str, Any]) -> None:
    boto3.client("dynamodb").put_item(TableName=NAMES.ledger, Item=to_attributes(item))


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=UTC).isoformat(timespec="milliseconds")


def last_run(ran_at: float, mismatches: dict[str, int], caught_up: bool = True) -> None:
    put_ledger(
        {
            tables.PARTITION_KEY: CHECKPOINT_PK,
            tables.SORT_KEY: LAST_RUN_SK,
            "ran_at": iso(ran_at),
            "checked_from": iso(ran_at - HOUR),
            "checked_until": iso(ran_at - 5),
            "orders_checked": 12,
            "mismatches": mismatches,
            "caught_up": caught_up,
        }
    )


def statement_ran(ran_at: float, mismatches: dict[str, int]) -> None:
    """Stripe's last statement pass, as `umavez statement` records it."""
    put_ledger(
        {
            tables.PARTITION_KEY: STATEMENT_RUNS_PK,
            tables.SORT_KEY: "stripe",
            "ran_at": iso(ran_at),
            "booked": 1,
            "mismatches": mismatches,
            "details": [],
        }
    )


def parked(partition: str, waiting_since: float) -> None:
    event_id = f"evt_{uuid.uuid4().hex[:12]}"
    put_ledger(
        {
            tables.PARTITION_KEY: partition,
            tables.SORT_KEY: tables.parked_sk("stripe", event_id),
            "event_id": event_id,
            "waiting_since": int(waiting_since),
        }
    )


def watched(since: float) -> None:
    charge = f"ch_{uuid.uuid4().hex[:12]}"
    put_ledger(
        {
            tables.PARTITION_KEY: tables.RECHECK_PK,
            tables.SORT_KEY: tables.parked_sk("stripe", charge),
            "object": charge,
            "watching_since": int(since),
        }
    )


def outbox_in(bucket: str, due_at: float) -> None:
    boto3.client("dynamodb").put_item(
        TableName=NAMES.outbox,
        Item=to_attributes(
            {
                tables.OUTBOX_KEY: outbox_id_for(uuid.uuid4().hex * 2),
                tables.OUTBOX_DUE_BUCKET: bucket,
                tables.OUTBOX_DUE_AT: int(due_at),
                "status": "dead" if bucket == tables.OUTBOX_DEAD_BUCKET else "pending",
            }
        ),
    )


def queue_age(seconds: float) -> None:
    boto3.client("cloudwatch").put_metric_data(
        Namespace="AWS/SQS",
        MetricData=[
            {
                "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": "Umavez-prod-Webhooks-5E6F"}],
                "Value": seconds,
                "Unit": "Seconds",
            }
        ],
    )


def run_failed(outputs: dict[str, str]) -> None:
    sfn = boto3.client("stepfunctions")
    run = sfn.start_execution(stateMachineArn=outputs["ReconciliationStateMachineArn"])
    sfn.stop_execution(executionArn=run["executionArn"], error="ReconciliationUnitFailed")


def mismatches_found_earlier(_: dict[str, str], hours_ago: float = 3) -> None:
    """A clean last run; the one `hours_ago` before it found an unbalanced order."""
    last_run(time.time() - 60, {})
    boto3.client("dynamodb").update_item(
        TableName=NAMES.ledger,
        Key=to_attributes({tables.PARTITION_KEY: CHECKPOINT_PK, tables.SORT_KEY: LAST_RUN_SK}),
        UpdateExpression="SET last_mismatch_at = :at, last_mismatches = :found",
        ExpressionAttributeValues=to_attributes(
            {":at": iso(time.time() - hours_ago * HOUR), ":found": {"unbalanced_total": 1}}
        ),
    )


def dead_letter(outputs: dict[str, str]) -> None:
    boto3.client("sqs").send_message(QueueUrl=outputs["DeadLetterQueueUrl"], MessageBody="{}")


def alarm_fires() -> None:
    boto3.client("cloudwatch").set_alarm_state(
        AlarmName=ALARMS[1], StateValue="ALARM", StateReason="a record failed"
    )


# Each harm, and the one reading that must then need a person.
HARMS: dict[str, tuple[str, Callable[[dict[str, str]], None]]] = {
    "a dead letter": ("dead letters", dead_letter),
    "a delivery waiting two hours": (
        "waiting",
        lambda _: parked(tables.WAITING_PK, time.time() - 2 * HOUR),
    ),
    "money nobody could route": (
        "unmatched",
        lambda _: parked(tables.UNMATCHED_PK, time.time() - 4 * 86_400),
    ),
    # at once, however short the wait before it was declared unmatched (the local stack's)
    "money nobody could route, parked a minute ago": (
        "unmatched",
        lambda _: parked(tables.UNMATCHED_PK, time.time() - 60),
    ),
    "a dead notification": (
        "notifications",
        lambda _: outbox_in(tables.OUTBOX_DEAD_BUCKET, time.time() - HOUR),
    ),
    "a refund pending for eight days": (
        "re-checks",
        lambda _: watched(time.time() - 8 * 86_400),
    ),
    "a notification overdue by an hour": (
        "notifications",
        lambda _: outbox_in("due#3", time.time() - HOUR),
    ),
    "books that do not balance": (
        "reconciliation",
        lambda _: last_run(time.time() - 60, {"unbalanced_total": 1}),
    ),
    "a reconciliation behind its window": (
        "reconciliation",
        lambda _: last_run(time.time() - 60, {}, caught_up=False),
    ),
    "a reconciliation run that failed": ("reconciliation", run_failed),
    "mismatches an earlier run found": ("reconciliation", mismatches_found_earlier),
    "no reconciliation for three hours": (
        "reconciliation",
        lambda _: last_run(time.time() - 3 * HOUR, {}),
    ),
    "money Stripe never moved, found by its statement": (
        "statement",
        lambda _: statement_ran(time.time() - 60, {"entry_unknown_to_provider": 1}),
    ),
    "a webhook older than a record can live": ("webhook queue", lambda _: queue_age(1000)),
    "an alarm in ALARM": ("alarms", lambda _: alarm_fires()),
}


@pytest.fixture
def healthy(deployed: dict[str, str]) -> dict[str, str]:
    """The deployed stack at rest: a clean reconciliation a minute ago, a young waiting
    delivery, a notification due now, the queue's oldest message a few seconds old."""
    last_run(time.time() - 60, {})
    parked(tables.WAITING_PK, time.time() - 120)
    watched(time.time() - 3 * 86_400)
    outbox_in("due#1", time.time())
    queue_age(4)
    return deployed


def test_a_healthy_stack_needs_nobody(
    healthy: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the deployed stack at rest

    # When the operator asks for its status by the stack's name
    code, report = status(capsys)

    # Then every part is read from the stack's own resources, and nobody is needed
    assert (code, report["needs_person"]) == (0, False)
    readings = {r["name"]: r["facts"] for r in report["readings"]}
    assert readings["webhook queue"]["oldest_seconds"] == 4
    assert readings["webhook queue"]["limit_seconds"] == 180 * 5  # visibility x receives
    assert readings["waiting"]["count"] == 1
    assert readings["re-checks"]["count"] == 1
    assert readings["notifications"] == {"dead": 0, "overdue": 0}
    assert readings["reconciliation"]["mismatches"] == {}
    assert readings["alarms"] == {"in_alarm": [], "alarms": len(ALARMS)}
    # And Asaas's webhooks are not read without the stack's Asaas key, and that is said
    [asaas] = [r for r in report["readings"] if r["name"] == "asaas webhooks"]
    assert (asaas["summary"], asaas["needs_person"]) == (
        "not configured (no Asaas API key in asaas/api-key)",
        False,
    )


@pytest.mark.parametrize("harm", list(HARMS))
def test_each_harm_needs_a_person_and_names_its_part(
    harm: str, healthy: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack at rest, then one thing wrong with it
    part, inflict = HARMS[harm]
    inflict(healthy)

    # When the operator asks for its status
    code, report = status(capsys)

    # Then a person is needed (exit 1), and that part, only that part, says so
    assert (code, report["needs_person"]) == (1, True)
    assert [r["name"] for r in report["readings"] if r["needs_person"]] == [part]


def test_an_earlier_runs_mismatches_need_a_person_for_a_day_not_forever(
    healthy: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack at rest, whose clean last run follows one that found an unbalanced
    # order a day and an hour ago
    mismatches_found_earlier(healthy, hours_ago=25)

    # When the operator asks for its status
    code, report = status(capsys)

    # Then nobody is needed any more, and the finding is still among the facts
    assert (code, report["needs_person"]) == (0, False)
    [reading] = [r for r in report["readings"] if r["name"] == "reconciliation"]
    assert reading["facts"]["last_mismatches"] == {"unbalanced_total": 1}


def test_a_young_stack_without_a_run_is_healthy_and_an_old_one_is_not(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the stack just created, no reconciliation run recorded yet
    code, young = status(capsys)

    # When the same stack is read three hours later, still without a run
    later = time.time() + 3 * HOUR
    monkeypatch.setattr(time, "time", lambda: later)
    code_later, old = status(capsys)

    # Then the young one needs nobody, and the old one needs a person for the reconciliation
    assert (code, young["needs_person"]) == (0, False)
    assert code_later == 1
    [reading] = [r for r in old["readings"] if r["needs_person"]]
    assert reading["name"] == "reconciliation"
    assert "since the stack was created" in reading["summary"]


def test_status_by_physical_names_without_the_dlq_is_refused_in_one_line(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the deployed stack named by its physical names, the DLQ forgotten
    argv = ["status", "--endpoint-url", "aws", "--ledger-table", NAMES.ledger]
    argv += ["--outbox-table", NAMES.outbox, "--queue-url", deployed["WebhookQueueUrl"]]

    # When status runs, Then one line says what is missing, and exit 2
    assert main(argv) == MISTAKE
    [line] = capsys.readouterr().err.splitlines()
    assert "--dlq-url" in line
    assert "--stack-name" in line


def powertools_lines(service: str, lines: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Lines as the function's Powertools Logger writes them to CloudWatch Logs."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(LambdaPowertoolsFormatter(service=service))
    # A logger of its own: the functions' Powertools Loggers are shared by service name.
    logger = logging.getLogger(f"umavez-test-{uuid.uuid4().hex}")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    for message, keys in lines:
        logger.info(message, extra=keys)
    return stream.getvalue().splitlines()


def put_logs(group: str, lines: list[str]) -> None:
    logs = boto3.client("logs")
    stream = f"2026/12/01/[$LATEST]{uuid.uuid4().hex}"
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    now = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName=group,
        logStreamName=stream,
        logEvents=[{"timestamp": now + i, "message": line} for i, line in enumerate(lines)],
    )


def test_trace_by_stack_name_reads_the_functions_log_groups_and_the_tables(
    deployed: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a payment taken by ingest, applied by process and notified, as the deployed
    # functions logged it (and another event's lines beside it), with its entry in the ledger
    event, order, key = "evt_deployed_1", "ord_deployed_1", "ab" * 32
    put_logs(
        LOG_GROUPS["IngestLogs"],
        powertools_lines(
            "ingest",
            [
                ("enqueued", {"provider": "stripe", "event_id": event, "message_id": "m-1"}),
                ("enqueued", {"provider": "stripe", "event_id": "evt_other", "message_id": "m-2"}),
            ],
        ),
    )
    put_logs(
        LOG_GROUPS["ProcessLogs"],
        powertools_lines(
            "process",
            [
                (
                    "applied",
                    {
                        "event_id": event,
                        "receive_count": "1",
                        "effect_key": key,
                        "order_id": order,
                        "outcome": "applied",
                    },
                )
            ],
        ),
    )
    # (and the API's access log, whose lines name the request's event too: not a function's)
    put_logs(ACCESS_LOGS, powertools_lines("api", [("POST /webhooks/stripe", {"event_id": event})]))
    put_ledger(
        {
            tables.PARTITION_KEY: tables.order_pk(order),
            tables.SORT_KEY: tables.effect_sk(key),
            "effect_key": key,
            "event_id": event,
            "outcome": "applied",
            "transition": "order.paid",
            "amount": 5000,
            "currency": "brl",
        }
    )

    # When the operator traces the event by the stack's name
    capsys.readouterr()
    code = main(["trace", event, "--json", "--since", "1h", *BY_NAME])
    journey = json.loads(capsys.readouterr().out)

    # Then its lines, and only its, make the timeline; its entry is read from the ledger
    assert code == 0
    assert [(s["stage"], s["outcome"], s["event_id"]) for s in journey["timeline"]] == [
        ("ingest", "enqueued", event),
        ("process", "applied", event),
    ]
    [entry] = [f for f in journey["now"] if f["kind"] == "entry"]
    assert (entry["order_id"], entry["amount"], entry["counted_by"]) == (
        order,
        "BRL 50.00",
        event,
    )


class NeverComplete:
    """A Logs Insights that keeps a query running, and notes the queries stopped."""

    def __init__(self) -> None:
        self.stopped: list[str] = []

    def start_query(self, **_: Any) -> dict[str, str]:
        return {"queryId": "q-1"}

    def get_query_results(self, queryId: str) -> dict[str, Any]:
        return {"status": "Running", "results": []}

    def stop_query(self, queryId: str) -> dict[str, bool]:
        self.stopped.append(queryId)
        return {"success": True}


def test_a_logs_query_that_never_completes_is_one_line_to_try_again() -> None:
    # Given Logs Insights that never completes a query, and a clock that moves a second a poll
    clock = FakeClock(1_764_460_800)
    insights = NeverComplete()
    logs = InsightsLogs(insights, ["/aws/lambda/x"], HOUR, clock=clock, sleep=clock.advance)

    # When the trace reads the logs, Then it gives up after its limit, with a line to act on
    with pytest.raises(LogsQueryError) as raised:
        logs.lines({"evt_1"})
    assert clock.now - 1_764_460_800 == pytest.approx(61, abs=1)
    assert insights.stopped == ["q-1"]  # not left running (and billed)
    line = explained(raised.value)
    assert line is not None
    assert "try again" in line


def test_an_interrupted_asaas_webhook_needs_a_person_told_how_to_resume_it_and_what_to_replay(
    healthy: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the stack's Asaas key, and Asaas's account sending to umavez with its queue running
    # and to another system whose queue is paused
    boto3.client("secretsmanager").create_secret(
        Name="umavez/prod/asaas/api-key", SecretString=ASAAS_DEVELOPMENT_API_KEY
    )
    ours = asaas_webhook("wh_umavez01", "https://hooks.example.com/live/webhooks/asaas")
    apis = FakeProviderApis().start()
    try:
        apis.asaas_webhooks["wh_umavez01"] = ours
        apis.asaas_webhooks["wh_erp00001"] = asaas_webhook(
            "wh_erp00001", "https://erp.example.com/asaas", interrupted=True
        )

        # When the operator asks for the status, then again once umavez's queue is paused
        running_code, running = status(capsys, "--api-url", apis.url)
        apis.asaas_webhooks["wh_umavez01"] = {**ours, "interrupted": True}
        paused_code, paused = status(capsys, "--api-url", apis.url)
    finally:
        apis.stop()

    # Then a running queue is healthy (the other system's pause is not umavez's)
    [before] = [r for r in running["readings"] if r["name"] == "asaas webhooks"]
    assert (running_code, before["needs_person"]) == (0, False)
    assert before["summary"] == "umavez (wh_umavez01): enabled, queue running"
    # And a paused one needs a person, that reading only, told how to resume it and what to
    # replay
    assert (paused_code, paused["needs_person"]) == (1, True)
    assert [r["name"] for r in paused["readings"] if r["needs_person"]] == ["asaas webhooks"]
    [after] = [r for r in paused["readings"] if r["name"] == "asaas webhooks"]
    assert "umavez (wh_umavez01) is interrupted" in after["summary"]
    assert 'PUT /v3/webhooks/wh_umavez01 {"interrupted": false}' in after["summary"]
    assert "`umavez replay asaas --since" in after["summary"]
    assert [(w["id"], w["interrupted"], w["umavez"]) for w in after["facts"]["webhooks"]] == [
        ("wh_umavez01", True, True),
        ("wh_erp00001", True, False),
    ]


def test_asaas_refusing_the_stacks_key_needs_a_person(
    healthy: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a key in the stack's secret that Asaas does not know
    boto3.client("secretsmanager").create_secret(
        Name="umavez/prod/asaas/api-key", SecretString="$aact_not_this_account"
    )
    apis = FakeProviderApis().start()
    try:
        # When the operator asks for the status
        code, report = status(capsys, "--api-url", apis.url)
    finally:
        apis.stop()

    # Then a person is needed: every Asaas payment is read with that key
    [asaas] = [r for r in report["readings"] if r["name"] == "asaas webhooks"]
    assert (code, asaas["needs_person"]) == (1, True)
    assert "refused us: 401" in asaas["summary"]
