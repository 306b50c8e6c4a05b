"""`umavez status`: the pipeline's health on one screen, from the stack itself (the local one or
a deployed one), each reading with whether a person is needed now.

Read, never written: the webhook queue (its depth from SQS, its oldest message's age from
CloudWatch's `AWS/SQS` metric, as the `WebhookQueueAge` alarm reads it), the dead-letter queue,
the deliveries waiting for their order and the money nobody could route (the ledger), the
notifications given up on or overdue (the outbox's `due` index), the last reconciliation's
summary (beside its checkpoint), each provider's last statement pass, Asaas's webhooks (its
webhooks API, when an Asaas API key is configured: a paused queue delivers nothing) and the
stack's alarms now in ALARM.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from functions.process.waiting import RECHECK_STUCK_SECONDS
from functions.shared import tables
from functions.shared.dynamo import from_attributes
from functions.shared.errors import UmavezError
from functions.shared.failures import FailureRecords
from functions.shared.provider_api import ProviderApiRefusedError
from functions.store import queries
from infra.settings import MAX_RECEIVE_COUNT
from ops.asaas_webhooks import AsaasWebhooks, advice, no_webhook_to_umavez
from ops.dlq import DeadLetters, LastFailures
from ops.status_books import failed_runs, reconciliation, statement
from ops.status_reading import Reading, age_text

# A delivery waiting longer than this needs a person (the `WaitingOverAnHour` alarm).
WAITING_LIMIT_SECONDS: Final = 3600
# A notification due this long ago and still not taken: the sweeper is not running.
OVERDUE_AFTER_SECONDS: Final = 15 * 60
# The window CloudWatch is asked about for the queue's oldest message (the alarm's period).
QUEUE_AGE_WINDOW_SECONDS: Final = 5 * 60
# When the DLQ holds messages, this many are looked at (and released) for their reasons.
DLQ_REASONS_SHOWN: Final = 10
DLQ_LOOK_SECONDS: Final = 30

Clients = Callable[[str], Any]
# The account's Asaas webhooks, read when asked (ops/asaas_webhooks.py: read_webhooks).
AsaasWebhooksReader = Callable[[], AsaasWebhooks]


@dataclass(frozen=True)
class Pipeline:
    """Where the stack's parts are, and how often its reconciliation runs there."""

    ledger_table: str
    outbox_table: str
    queue_url: str
    dlq_url: str
    reconcile_every_seconds: float
    stack_name: str | None = None  # its alarms; None: alarms are not read (the local stack)
    # The reconciliation's state machine (deployed): its failed runs are read.
    state_machine_arn: str | None = None
    # When the stack was created (deployed): no run two periods after it needs a person.
    created_at: float | None = None
    # Asaas's webhooks API with the stack's key; None: not read.
    asaas_webhooks: AsaasWebhooksReader | None = None


@dataclass(frozen=True)
class Status:
    readings: list[Reading]

    @property
    def needs_person(self) -> bool:
        return any(r.needs_person for r in self.readings)

    def to_json(self) -> dict[str, Any]:
        return {
            "needs_person": self.needs_person,
            "readings": [asdict(r) for r in self.readings],
        }

    def render(self) -> str:
        verdict = "a person is needed" if self.needs_person else "healthy"
        lines = [f"umavez: {verdict}"]
        for r in self.readings:
            mark = "!!" if r.needs_person else "ok"
            lines.append(f"  {mark}  {r.name:<15} {r.summary}")
        return "\n".join(lines)


def read_status(pipeline: Pipeline, client: Clients, now: float) -> Status:
    sqs, dynamodb = client("sqs"), client("dynamodb")
    readings = [
        webhook_queue(sqs, client("cloudwatch"), pipeline.queue_url, now),
        dead_letters(
            sqs,
            pipeline.dlq_url,
            FailureRecords(dynamodb, pipeline.ledger_table, lambda: now).last_failures,
        ),
        parked(dynamodb, pipeline.ledger_table, tables.WAITING_PK, "waiting", now),
        parked(dynamodb, pipeline.ledger_table, tables.UNMATCHED_PK, "unmatched", now),
        rechecks(dynamodb, pipeline.ledger_table, now),
        notifications(dynamodb, pipeline.outbox_table, now),
        reconciliation(
            dynamodb,
            pipeline.ledger_table,
            pipeline.reconcile_every_seconds,
            now,
            failed_runs(
                client("stepfunctions"),
                pipeline.state_machine_arn,
                now - 2 * pipeline.reconcile_every_seconds,
            )
            if pipeline.state_machine_arn
            else (),
            pipeline.created_at,
        ),
        statement(dynamodb, pipeline.ledger_table, now),
        asaas_webhooks(pipeline.asaas_webhooks, now),
        alarms(client, pipeline.stack_name),
    ]
    return Status(readings)


# -- the readings -----------------------------------------------------------------------------


def webhook_queue(sqs: Any, cloudwatch: Any, queue_url: str, now: float) -> Reading:
    """Depth from SQS; the oldest message's age from CloudWatch (SQS publishes it once a
    minute). A person is needed once a message is older than a record can live unreceived:
    the visibility timeout times the receives allowed, as the `WebhookQueueAge` alarm says."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=queue_url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "VisibilityTimeout",
            "RedrivePolicy",
        ],
    )["Attributes"]
    visible = int(attributes.get("ApproximateNumberOfMessages", 0))
    in_flight = int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
    receives = int(
        json.loads(attributes.get("RedrivePolicy") or "{}").get("maxReceiveCount")
        or MAX_RECEIVE_COUNT
    )
    limit = int(attributes.get("VisibilityTimeout", 30)) * receives
    oldest = _oldest_message_age(cloudwatch, queue_url.rsplit("/", 1)[-1], now)
    age = "no datapoint in 5 min" if oldest is None else f"oldest {age_text(oldest)}"
    return Reading(
        "webhook queue",
        f"{visible} queued, {in_flight} in flight, {age} (limit {age_text(limit)})",
        oldest is not None and oldest > limit,
        {
            "queued": visible,
            "in_flight": in_flight,
            "oldest_seconds": oldest,
            "limit_seconds": limit,
        },
    )


def dead_letters(sqs: Any, dlq_url: str, last_failures: LastFailures | None = None) -> Reading:
    """How many, and when there are some, why the first few failed (their last failures,
    redacted): listed the way `umavez dlq list` lists them, left in the DLQ."""
    attributes = sqs.get_queue_attributes(
        QueueUrl=dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    count = int(attributes.get("ApproximateNumberOfMessages", 0)) + int(
        attributes.get("ApproximateNumberOfMessagesNotVisible", 0)
    )
    facts: dict[str, Any] = {"count": count}
    why = ""
    if count and last_failures is not None:
        letters = DeadLetters(
            sqs,
            dlq_url,
            "",
            look_seconds=DLQ_LOOK_SECONDS,
            wait_seconds=0,
            max_messages=DLQ_REASONS_SHOWN,
            last_failures=last_failures,
        ).letters()
        reasons = Counter(letter.reason for letter in letters if letter.reason)
        if reasons:
            facts["reasons"] = dict(reasons)
            why = f" (last failure: {reasons.most_common(1)[0][0]})"
    hint = "; `umavez dlq list`, then `dlq redrive`" if count else ""
    return Reading("dead letters", f"{count} in the DLQ{why}{hint}", count > 0, facts)


def parked(dynamodb: Any, ledger_table: str, partition: str, name: str, now: float) -> Reading:
    """Waiting deliveries need a person past an hour; unmatched money always does."""
    since = list(_partition(dynamodb, ledger_table, partition, "waiting_since", now))
    oldest = int(now - min(since)) if since else None
    if name == "waiting":
        needs = oldest is not None and oldest > WAITING_LIMIT_SECONDS
        hint = "; `umavez show waiting`" if needs else ""
    else:
        needs = bool(since)
        hint = "; `umavez show unmatched`, then `attach`" if needs else ""
    text = f"{len(since)}" + (f", oldest {age_text(oldest)}" if oldest is not None else "") + hint
    return Reading(name, text, needs, {"count": len(since), "oldest_seconds": oldest})


def rechecks(dynamodb: Any, ledger_table: str, now: float) -> Reading:
    """Charges read again while a refund of theirs is pending; a person is needed once one has
    been pending a week."""
    since = list(_partition(dynamodb, ledger_table, tables.RECHECK_PK, "watching_since", now))
    oldest = int(now - min(since)) if since else None
    needs = oldest is not None and oldest > RECHECK_STUCK_SECONDS
    text = f"{len(since)} charges with a refund pending" + (
        f", oldest {age_text(oldest)}" if oldest is not None else ""
    )
    hint = "; see its refunds in the provider's dashboard" if needs else ""
    return Reading("re-checks", text + hint, needs, {"count": len(since), "oldest_seconds": oldest})


def notifications(dynamodb: Any, outbox_table: str, now: float) -> Reading:
    """Dead items (the due index's `dead` bucket) and items due long ago that nobody took."""
    dead = sum(1 for _ in queries.due_index_ids(dynamodb, outbox_table, tables.OUTBOX_DEAD_BUCKET))
    overdue = sum(
        1
        for shard in range(tables.OUTBOX_DUE_SHARDS)
        for _ in queries.due_index_ids(
            dynamodb, outbox_table, f"due#{shard}", due_by=int(now - OVERDUE_AFTER_SECONDS)
        )
    )
    hints = (["`umavez outbox revive --all-dead`"] if dead else []) + (
        ["is the sweeper running?"] if overdue else []
    )
    return Reading(
        "notifications",
        f"{dead} dead, {overdue} overdue" + (f"; {', '.join(hints)}" if hints else ""),
        bool(dead or overdue),
        {"dead": dead, "overdue": overdue},
    )


def asaas_webhooks(read: AsaasWebhooksReader | None, now: float) -> Reading:
    """Umavez's Asaas webhook: a person is needed while it is interrupted (Asaas's queue paused:
    nothing is delivered, and what waits over 14 days is deleted) or disabled, or while Asaas
    refuses the key (process reads every Asaas payment with it). No key configured, or Asaas
    not answering, is said, not judged; so is an account with no webhook to umavez (preflight
    makes that a problem)."""
    name = "asaas webhooks"
    if read is None:
        return Reading(name, "not read", False, {"configured": None})
    try:
        state = read()
    except ProviderApiRefusedError as exc:
        return Reading(name, f"not read: {exc} (the key in asaas/api-key)", True, {})
    except UmavezError as exc:
        return Reading(name, f"not read: {exc}", False, {})
    if not state.configured:
        return Reading(name, "not configured (no Asaas API key in asaas/api-key)", False, {})
    facts: dict[str, Any] = {
        "configured": True,
        "webhooks": [w.model_dump() | {"umavez": w.umavez} for w in state.webhooks],
    }
    if not state.umavez:
        return Reading(name, no_webhook_to_umavez(state), False, facts)
    if state.stopped:
        return Reading(name, "; ".join(advice(w, now) for w in state.stopped), True, facts)
    shown = ", ".join(w.shown() for w in state.umavez)
    return Reading(name, f"{shown}: enabled, queue running", False, facts)


def alarms(client: Clients, stack_name: str | None) -> Reading:
    """The stack's alarms in ALARM: the stack names each `<stack>-<name>` (what the runbook and
    a pager call it). The local stack has no alarms: its readings above are what they watch."""
    if stack_name is None:
        return Reading("alarms", "not read (local stack, or no --stack-name)", False, {})
    pages = (
        client("cloudwatch")
        .get_paginator("describe_alarms")
        .paginate(AlarmNamePrefix=f"{stack_name}-", AlarmTypes=["MetricAlarm", "CompositeAlarm"])
    )
    states = {
        alarm["AlarmName"]: alarm["StateValue"]
        for page in pages
        for alarm in page.get("MetricAlarms", []) + page.get("CompositeAlarms", [])
    }
    firing = sorted(name for name, state in states.items() if state == "ALARM")
    text = f"{len(firing)} of {len(states)} in ALARM" + (
        f": {', '.join(firing[:5])}" if firing else ""
    )
    return Reading("alarms", text, bool(firing), {"in_alarm": firing, "alarms": len(states)})


# -- helpers ----------------------------------------------------------------------------------


def _oldest_message_age(cloudwatch: Any, queue_name: str, now: float) -> int | None:
    end = datetime.fromtimestamp(now, tz=UTC)
    points = cloudwatch.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName="ApproximateAgeOfOldestMessage",
        Dimensions=[{"Name": "QueueName", "Value": queue_name}],
        StartTime=end - timedelta(seconds=QUEUE_AGE_WINDOW_SECONDS),
        EndTime=end + timedelta(seconds=60),
        Period=60,
        Statistics=["Maximum"],
    )["Datapoints"]
    if not points:
        return None
    latest = max(points, key=lambda p: p["Timestamp"])
    return int(latest["Maximum"])


def _partition(dynamodb: Any, table: str, partition: str, since: str, now: float) -> Iterable[int]:
    """Each item's `since` time (epoch seconds; now when missing) in one partition."""
    pages = dynamodb.get_paginator("query").paginate(
        TableName=table,
        KeyConditionExpression="#pk = :pk",
        ExpressionAttributeNames={"#pk": tables.PARTITION_KEY, "#since": since},
        ExpressionAttributeValues={":pk": {"S": partition}},
        ProjectionExpression="#since",
    )
    for page in pages:
        for item in page["Items"]:
            yield int(from_attributes(item).get(since, now))
