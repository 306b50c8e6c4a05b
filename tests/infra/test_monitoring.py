"""Alarms that reach a person and read what they claim to, asserted on the synthesized stack."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from functions.outbox.wiring import SINK_GONE_METRIC
from functions.shared.observability import stage_metrics_namespace
from infra.config import ApiType
from infra.settings import MAX_RECEIVE_COUNT
from tests.infra.conftest import Synthesized

# The prod fixture's stage: its functions publish, and its alarms read, under its own namespace.
METRICS_NAMESPACE = stage_metrics_namespace("prod")


def resource(synth: Synthesized, kind: str, name: str) -> dict[str, Any]:
    """The one resource of `kind` whose logical id is the construct path plus CDK's hash."""
    [found] = [
        r for k, r in synth.resources(kind).items() if re.fullmatch(f"{name}[0-9A-F]{{8}}", k)
    ]
    return found  # type: ignore[no-any-return]


def metric_stats(props: dict[str, Any]) -> dict[str, tuple[Any, Any, Any]]:
    """A metric-math alarm's metrics by id: (namespace, name, dimensions) of each it reads."""
    return {
        m["Id"]: (
            m["MetricStat"]["Metric"]["Namespace"],
            m["MetricStat"]["Metric"]["MetricName"],
            m["MetricStat"]["Metric"]["Dimensions"],
        )
        for m in props["Metrics"]
        if "MetricStat" in m
    }


def alarm(synth: Synthesized, name: str) -> dict[str, Any]:
    return resource(synth, "AWS::CloudWatch::Alarm", f"Monitoring{name}")["Properties"]  # type: ignore[no-any-return]


def returned_expression(props: dict[str, Any]) -> str:
    [returned] = [m for m in props["Metrics"] if m.get("ReturnData", True)]
    return returned["Expression"]  # type: ignore[no-any-return]


def metrics_read(props: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    """Each metric of a metric-math alarm by its id: (namespace, name, first dimension value)."""
    return {
        metric_id: (namespace, name, dimensions[0]["Value"])
        for metric_id, (namespace, name, dimensions) in metric_stats(props).items()
    }


def test_the_alarm_topic_is_encrypted_with_a_rotated_key_cloudwatch_may_use(
    prod: Synthesized,
) -> None:
    [topic] = prod.resources("AWS::SNS::Topic").values()
    [(key_id, key)] = prod.resources("AWS::KMS::Key").items()

    assert topic["Properties"]["KmsMasterKeyId"] == {"Fn::GetAtt": [key_id, "Arn"]}
    assert key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "RetainExceptOnCreate"
    [cloudwatch] = [
        s
        for s in key["Properties"]["KeyPolicy"]["Statement"]
        if s["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    ]
    assert cloudwatch["Effect"] == "Allow"
    assert sorted(cloudwatch["Action"]) == ["kms:Decrypt", "kms:GenerateDataKey*"]
    # Only on behalf of alarms of this account, in this region
    assert cloudwatch["Condition"]["StringEquals"] == {
        "aws:SourceAccount": {"Ref": "AWS::AccountId"}
    }
    source_arn = cloudwatch["Condition"]["ArnLike"]["aws:SourceArn"]["Fn::Join"][1]
    assert source_arn == [
        "arn:",
        {"Ref": "AWS::Partition"},
        ":cloudwatch:",
        {"Ref": "AWS::Region"},
        ":",
        {"Ref": "AWS::AccountId"},
        ":alarm:*",
    ]


def test_the_alarm_email_is_subscribed_to_the_topic(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    [(topic_id, _)] = prod.resources("AWS::SNS::Topic").items()
    [subscription] = prod.resources("AWS::SNS::Subscription").values()

    assert subscription["Properties"] == {
        "Endpoint": "oncall@example.com",
        "Protocol": "email",
        "TopicArn": {"Ref": topic_id},
    }
    assert dev_with_waf.resources("AWS::SNS::Subscription") == {}


SPARSE_APP_METRIC_ALARMS = (
    "ProcessFailed",
    "ProcessBatchesCutShort",
    "UnroutablePayments",
    "UnmatchedPayments",
    "WaitingOverAnHour",
    "RefundPendingOverAWeek",
    "PaymentConflicts",
    "AmountDisagreements",
    "StaleSurge",
    "SignatureFailures",
    "IngestUnavailable",
    "DuplicateSurge",
    "DeadOutboxItems",
    "NotificationSinkGone",
)


def test_every_alarm_on_an_app_metric_reads_it_filled_with_zero(prod: Synthesized) -> None:
    # Given every alarm reading a metric the functions publish (missing data means "none")
    on_app_metrics = {
        name
        for name in prod.stack.monitoring.alarms
        if METRICS_NAMESPACE in json.dumps(alarm(prod, name))
    }
    # The hourly books checks are the exception: every run publishes, and no data means it did
    # not run (ReconciliationStopped; for the statement, StatementErrors)
    books = {
        "ReconciliationMismatches",
        "ReconciliationStopped",
        "StatementMismatches",
        "StatementBehind",
    }
    assert on_app_metrics - books == set(SPARSE_APP_METRIC_ALARMS)

    for name in SPARSE_APP_METRIC_ALARMS:
        props = alarm(prod, name)
        expression = returned_expression(props)
        # Then each of its app metrics is read through FILL(id, 0), never bare
        for metric_id, (namespace, _, _) in metrics_read(props).items():
            assert namespace == METRICS_NAMESPACE
            bare = re.sub(rf"FILL\({metric_id}, 0\)", "", expression)
            assert f"FILL({metric_id}, 0)" in expression, (name, expression)
            assert not re.search(rf"\b{metric_id}\b", bare), (name, expression)


@pytest.mark.parametrize(
    ("name", "service", "metric"),
    [
        ("UnroutablePayments", "process", "unroutable"),
        ("UnmatchedPayments", "waiting", "unmatched_open"),
        ("WaitingOverAnHour", "waiting", "waiting_over_an_hour"),
        # the stuck ones only: every pending refund is open while its charge is read again
        ("RefundPendingOverAWeek", "waiting", "rechecks_over_a_week"),
        ("ProcessBatchesCutShort", "process", "batch_cut_short"),
        ("ProcessFailed", "process", "failed"),
        ("PaymentConflicts", "process", "conflict"),
    ],
)
def test_each_app_alarm_reads_the_metric_its_service_publishes(
    prod: Synthesized, name: str, service: str, metric: str
) -> None:
    props = alarm(prod, name)

    assert list(metrics_read(props).values()) == [(METRICS_NAMESPACE, metric, service)]
    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"


def test_a_sink_gone_pages_from_either_sender(prod: Synthesized) -> None:
    # Given the alarm on the HTTP sink answering 410 Gone, Then it reads the metric both
    # senders publish (the stream's first try and the sweeper) and pages on the first one
    props = alarm(prod, "NotificationSinkGone")
    assert metrics_read(props) == {
        "stream": (METRICS_NAMESPACE, SINK_GONE_METRIC, "outbox"),
        "sweep": (METRICS_NAMESPACE, SINK_GONE_METRIC, "sweeper"),
    }
    assert props["Threshold"] == 0
    assert props["ComparisonOperator"] == "GreaterThanThreshold"


def test_duplicate_surge_is_a_ratio_to_applied_effects_not_a_count(prod: Synthesized) -> None:
    props = alarm(prod, "DuplicateSurge")
    metrics = metrics_read(props)

    assert metrics == {
        "duplicates": (METRICS_NAMESPACE, "duplicate", "process"),
        "applied": (METRICS_NAMESPACE, "applied", "process"),
    }
    assert returned_expression(props) == (
        "IF(FILL(duplicates, 0) > 20, FILL(duplicates, 0) / (FILL(applied, 0) + 1), 0)"
    )
    assert {m["MetricStat"]["Period"] for m in props["Metrics"] if "MetricStat" in m} == {900}
    assert props["Threshold"] == 5


def api_dimension(api_type: ApiType, synth: Synthesized) -> dict[str, Any]:
    """The dimension API Gateway publishes each type's metrics under."""
    if api_type is ApiType.REST:
        [api] = synth.resources("AWS::ApiGateway::RestApi").values()
        return {"Name": "ApiName", "Value": api["Properties"]["Name"]}
    [api_id] = synth.resources("AWS::ApiGatewayV2::Api")
    return {"Name": "ApiId", "Value": {"Ref": api_id}}


# Each type's own names: a REST metric name on an HTTP API would never have data (and its
# alarm, treating missing data as fine, would never fire).
API_METRICS = {
    ApiType.REST: {"4xx": "4XXError", "5xx": "5XXError", "count": "Count"},
    ApiType.HTTP: {"4xx": "4xx", "5xx": "5xx", "count": "Count"},
}


def test_api_4xx_is_a_share_of_all_requests_for_both_types(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    api_type, synth = each_api_type
    props = alarm(synth, "Api4xx")
    names = API_METRICS[api_type]

    read = metric_stats(props)

    dimensions = [api_dimension(api_type, synth)]
    assert read == {
        "refused": ("AWS/ApiGateway", names["4xx"], dimensions),
        "requests": ("AWS/ApiGateway", names["count"], dimensions),
    }
    assert returned_expression(props) == (
        "IF(FILL(refused, 0) >= 10, 100 * FILL(refused, 0) / FILL(requests, 1), 0)"
    )
    assert props["Threshold"] == 5  # percent


def test_api_5xx_reads_the_apis_own_server_errors_for_both_types(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    api_type, synth = each_api_type
    props = alarm(synth, "Api5xx")

    assert (props["Namespace"], props["MetricName"], props["Dimensions"]) == (
        "AWS/ApiGateway",
        API_METRICS[api_type]["5xx"],
        [api_dimension(api_type, synth)],
    )
    assert (props["Statistic"], props["Threshold"]) == ("Sum", 0)


def test_every_alarm_exists_whichever_api_type(
    prod: Synthesized, dev_with_waf: Synthesized
) -> None:
    assert set(prod.stack.monitoring.alarms) == set(dev_with_waf.stack.monitoring.alarms)


def test_webhook_queue_age_alarms_past_the_longest_a_received_record_can_live(
    prod: Synthesized,
) -> None:
    props = alarm(prod, "WebhookQueueAge")
    queue_id = next(k for k in prod.resources("AWS::SQS::Queue") if "QueuesWebhooks" in k)
    queue = prod.resources("AWS::SQS::Queue")[queue_id]["Properties"]

    assert props["Namespace"] == "AWS/SQS"
    assert props["MetricName"] == "ApproximateAgeOfOldestMessage"
    assert props["Dimensions"] == [
        {"Name": "QueueName", "Value": {"Fn::GetAtt": [queue_id, "QueueName"]}}
    ]
    assert props["Statistic"] == "Maximum"
    assert props["Threshold"] == MAX_RECEIVE_COUNT * queue["VisibilityTimeout"]


def test_the_dashboard_shows_what_is_not_alarmed(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    api_type, synth = each_api_type
    [dashboard] = synth.resources("AWS::CloudWatch::Dashboard").values()
    body = json.dumps(dashboard["Properties"]["DashboardBody"])

    for metric in (
        "ignored_test_mode",
        "batch_cut_short",
        "unroutable",
        API_METRICS[api_type]["4xx"],
    ):
        assert f'\\"{metric}\\"' in body, metric


def test_the_statement_alarms_read_what_every_pass_publishes(prod: Synthesized) -> None:
    # Given the two alarms on the hourly statement passes
    mismatches, behind = alarm(prod, "StatementMismatches"), alarm(prod, "StatementBehind")

    # Then any mismatch of an hour's passes pages, an hour without a pass does not (a stack
    # using no provider publishes nothing); and a checkpoint over 3 hours behind pages
    assert (mismatches["MetricName"], mismatches["Statistic"]) == ("statement_mismatches", "Sum")
    assert (mismatches["Threshold"], mismatches["Period"]) == (0, 3600)
    assert mismatches["TreatMissingData"] == "notBreaching"
    assert (behind["MetricName"], behind["Statistic"]) == ("statement_lag_seconds", "Maximum")
    assert behind["Threshold"] == 3 * 3600
    assert {d["Value"] for d in mismatches["Dimensions"]} == {"statement"}
