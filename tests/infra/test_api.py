"""The API in front of ingest, for each `apiType`: an HTTP API (the default) or a REST API.

Whichever it is, providers reach one route, POST /webhooks/{provider}, on the stage `live`, with
the same limits, an access log line saying who answered how fast and why, the same output names
and the same alarms.
"""

from __future__ import annotations

import json
from typing import Any

from aws_cdk.assertions import Match

from infra.config import PROVIDERS, ApiType
from tests.infra.conftest import Synthesized

# The HTTP API access-log variables AWS documents (http-api-logging-variables), those a webhook
# API could use. REST-only ones ($context.resourcePath, $context.wafResponseCode, ...) are not.
HTTP_API_LOG_VARIABLES = {
    f"$context.{name}"
    for name in [
        "accountId",
        "apiId",
        "awsEndpointRequestId",
        "dataProcessed",
        "domainName",
        "domainPrefix",
        "error.message",
        "error.messageString",
        "error.responseType",
        "extendedRequestId",
        "httpMethod",
        "identity.sourceIp",
        "identity.userAgent",
        "integration.error",
        "integration.integrationStatus",
        "integration.latency",
        "integration.requestId",
        "integration.status",
        "integrationErrorMessage",
        "integrationLatency",
        "integrationStatus",
        "path",
        "protocol",
        "requestId",
        "requestTime",
        "requestTimeEpoch",
        "responseLatency",
        "responseLength",
        "routeKey",
        "stage",
        "status",
    ]
}
# What an operator reads in an access log line, whichever the API type (docs/operations.md, Api4xx).
COMMON_LOG_FIELDS = {
    "requestId",
    "ip",
    "requestTime",
    "httpMethod",
    "path",
    "protocol",
    "status",
    "responseLength",
    "responseLatency",
    "integrationLatency",
    "integrationStatus",
    "errorResponseType",
    "errorMessage",
}


def only(synth: Synthesized, kind: str) -> tuple[str, dict[str, Any]]:
    [(logical_id, resource)] = synth.resources(kind).items()
    return logical_id, resource["Properties"]


def ingest_arn(synth: Synthesized) -> dict[str, Any]:
    [ingest] = [
        k for k in synth.resources("AWS::Lambda::Function") if k.startswith("PipelineIngest")
    ]
    return {"Fn::GetAtt": [ingest, "Arn"]}


def stage_of(api_type: ApiType, synth: Synthesized) -> dict[str, Any]:
    kind = "AWS::ApiGateway::Stage" if api_type is ApiType.REST else "AWS::ApiGatewayV2::Stage"
    return only(synth, kind)[1]


def access_log_of(api_type: ApiType, synth: Synthesized) -> dict[str, Any]:
    stage = stage_of(api_type, synth)
    return stage["AccessLogSetting" if api_type is ApiType.REST else "AccessLogSettings"]  # type: ignore[no-any-return]


def test_rest_api_posts_webhooks_to_ingest_throttled_logged_and_traced(
    dev_with_waf: Synthesized,
) -> None:
    dev_with_waf.template.has_resource_properties(
        "AWS::ApiGateway::Method",
        {
            "HttpMethod": "POST",
            "Integration": Match.object_like({"Type": "AWS_PROXY"}),
            "RequestParameters": {"method.request.path.provider": True},
        },
    )
    dev_with_waf.template.has_resource_properties(
        "AWS::ApiGateway::RestApi", {"BinaryMediaTypes": ["*/*"]}
    )
    dev_with_waf.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "TracingEnabled": True,
            "AccessLogSetting": Match.object_like({"DestinationArn": Match.any_value()}),
            "MethodSettings": Match.array_with(
                [Match.object_like({"ThrottlingRateLimit": 200, "ThrottlingBurstLimit": 400})]
            ),
        },
    )
    assert dev_with_waf.resources("AWS::ApiGatewayV2::Api") == {}


def test_http_api_routes_only_post_webhooks_to_ingest_in_payload_format_2_0(
    prod: Synthesized,
) -> None:
    # One route, no $default catch-all: anything else is API Gateway's own 404, never a Lambda
    _, route = only(prod, "AWS::ApiGatewayV2::Route")
    integration_id, integration = only(prod, "AWS::ApiGatewayV2::Integration")

    assert route["RouteKey"] == "POST /webhooks/{provider}"
    assert route["Target"] == {"Fn::Join": ["", ["integrations/", {"Ref": integration_id}]]}
    assert (integration["IntegrationType"], integration["PayloadFormatVersion"]) == (
        "AWS_PROXY",
        "2.0",
    )
    assert integration["IntegrationUri"] == ingest_arn(prod)
    assert prod.resources("AWS::ApiGateway::RestApi") == {}
    # And API Gateway may invoke ingest for that route only
    [permission] = [
        p["Properties"]
        for p in prod.resources("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    ]
    assert permission["FunctionName"] == ingest_arn(prod)
    assert permission["SourceArn"]["Fn::Join"][1][-1] == "/*/*/webhooks/{provider}"


def test_the_live_stage_is_throttled_alike_for_both_types(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    api_type, synth = each_api_type
    stage = stage_of(api_type, synth)

    limits = (
        stage["MethodSettings"][0] if api_type is ApiType.REST else stage["DefaultRouteSettings"]
    )

    assert stage["StageName"] == "live"
    assert (limits["ThrottlingRateLimit"], limits["ThrottlingBurstLimit"]) == (200, 400)


def test_access_logs_say_who_answered_how_fast_and_why_for_both_types(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    api_type, synth = each_api_type
    setting = access_log_of(api_type, synth)
    [(log_group_id, _)] = [
        (k, r) for k, r in synth.resources("AWS::Logs::LogGroup").items() if "AccessLogs" in k
    ]

    fields = json.loads(setting["Format"])

    assert setting["DestinationArn"] == {"Fn::GetAtt": [log_group_id, "Arn"]}
    assert set(fields) >= COMMON_LOG_FIELDS, COMMON_LOG_FIELDS - set(fields)
    assert fields["requestId"] == "$context.requestId"
    assert fields["status"] == "$context.status"
    assert fields["integrationLatency"] == "$context.integrationLatency"
    assert fields["errorResponseType"] == "$context.error.responseType"
    if api_type is ApiType.REST:
        assert fields["resourcePath"] == "$context.resourcePath"
        assert fields["wafResponseCode"] == "$context.wafResponseCode"
    else:
        assert fields["routeKey"] == "$context.routeKey"
        # A failed or timed-out ingest says why, and which invocation it was
        assert fields["integrationError"] == "$context.integrationErrorMessage"
        assert fields["integrationRequestId"] == "$context.integration.requestId"
        # Every value is a variable HTTP APIs have, not a REST API's copied over
        assert set(fields.values()) <= HTTP_API_LOG_VARIABLES, (
            set(fields.values()) - HTTP_API_LOG_VARIABLES
        )


def rendered(value: Any, synth: Synthesized) -> str:
    """A URL output as CloudFormation resolves it: the API id as API, a stage by its name."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(rendered(part, synth) for part in parts)
    ref = value["Ref"]
    pseudo = {"AWS::Region": "REGION", "AWS::URLSuffix": "amazonaws.com"}
    if ref in pseudo:
        return pseudo[ref]
    resource = synth.template.to_json()["Resources"][ref]
    if resource["Type"] in {"AWS::ApiGateway::RestApi", "AWS::ApiGatewayV2::Api"}:
        return "API"
    assert resource["Type"] == "AWS::ApiGateway::Stage", resource["Type"]
    return str(resource["Properties"]["StageName"])


def test_each_providers_url_output_is_the_live_stages_webhook_route_for_both_types(
    each_api_type: tuple[ApiType, Synthesized],
) -> None:
    _, synth = each_api_type
    outputs = synth.template.find_outputs("*")

    urls = {p: rendered(outputs[f"WebhookUrl{p.capitalize()}"]["Value"], synth) for p in PROVIDERS}

    assert urls == {
        p: f"https://API.execute-api.REGION.amazonaws.com/live/webhooks/{p}" for p in PROVIDERS
    }
