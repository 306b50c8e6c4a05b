"""API Gateway in front of ingest: POST /webhooks/{provider} only, throttled, access-logged.

`apiType` chooses an HTTP API (v2, Lambda payload format 2.0: $1.00 per million requests, less
latency) or a REST API (v1, $3.50 per million, the only one AWS WAF attaches to). Ingest reads
both event shapes; the outputs, the stage name and the alarms are the same for both.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Sequence
from typing import Final

import aws_cdk as cdk
import jsii
from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2
from aws_cdk import aws_xray as xray
from aws_cdk.aws_apigatewayv2_integrations import HttpLambdaIntegration
from constructs import Construct

from functions.ingest.service import MAX_BODY_BYTES
from infra.config import WAF_NEEDS_REST, ApiType, ConfigError
from infra.constructs.lambdas import retained_log_group, vended_log_group_name
from infra.settings import (
    API_THROTTLE_BURST,
    API_THROTTLE_RATE,
    WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES,
)

STAGE: Final = "live"
WEBHOOK_PATH: Final = "/webhooks/{provider}"
# Requests per second for the whole stage, and the burst above it (either API type).
THROTTLE_RATE: Final = API_THROTTLE_RATE
THROTTLE_BURST: Final = API_THROTTLE_BURST
# One JSON line per request. The latencies tell a slow ingest (integration) from a slow API;
# error.responseType names why API Gateway answered itself (THROTTLED, WAF_FILTERED, ...).
ACCESS_LOG_FIELDS = {
    "requestId": apigateway.AccessLogField.context_request_id(),
    "ip": apigateway.AccessLogField.context_identity_source_ip(),
    "requestTime": apigateway.AccessLogField.context_request_time(),
    "httpMethod": apigateway.AccessLogField.context_http_method(),
    "resourcePath": apigateway.AccessLogField.context_resource_path(),
    "path": apigateway.AccessLogField.context_path(),
    "protocol": apigateway.AccessLogField.context_protocol(),
    "status": apigateway.AccessLogField.context_status(),
    "responseLength": apigateway.AccessLogField.context_response_length(),
    "responseLatency": apigateway.AccessLogField.context_response_latency(),
    "integrationLatency": apigateway.AccessLogField.context_integration_latency(),
    "integrationStatus": apigateway.AccessLogField.context_integration_status(),
    "errorResponseType": apigateway.AccessLogField.context_error_response_type(),
    "errorMessage": apigateway.AccessLogField.context_error_message(),
    "wafResponseCode": apigateway.AccessLogField.context_waf_response_code(),
}
# The same line for an HTTP API, in its own variables (http-api-logging-variables): routeKey for
# resourcePath, the integration's error message (a Lambda that failed or timed out), and the
# Lambda request id, which names the ingest invocation that answered. No WAF here.
HTTP_ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "httpMethod": "$context.httpMethod",
    "routeKey": "$context.routeKey",
    "path": "$context.path",
    "protocol": "$context.protocol",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "responseLatency": "$context.responseLatency",
    "integrationLatency": "$context.integrationLatency",
    "integrationStatus": "$context.integrationStatus",
    "integrationError": "$context.integrationErrorMessage",
    "integrationRequestId": "$context.integration.requestId",
    "errorResponseType": "$context.error.responseType",
    "errorMessage": "$context.error.message",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class _HttpAccessLogs:
    """Where and how an HTTP API stage writes its access log (CDK takes an interface here)."""

    def __init__(self, log_group: logs.ILogGroup, fields: dict[str, str]) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)
        self._format = apigateway.AccessLogFormat.custom(json.dumps(fields))

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigateway.AccessLogFormat:
        return self._format


class WebhookApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ingest: lambda_.IFunction,
        providers: Sequence[str],
        api_type: ApiType,
        waf: bool,
        provider_ip_allow_list: Sequence[str] = (),
        retain_logs: bool,
        xray_sampling: float = 0.0,
    ) -> None:
        super().__init__(scope, construct_id)
        if waf and api_type is ApiType.HTTP:
            raise ConfigError(WAF_NEEDS_REST)
        self.api_type = api_type
        # One log group whichever the type: switching keeps the earlier lines. API Gateway
        # delivers access logs itself, so the group is a vended one (see the function).
        access_logs = retained_log_group(
            self,
            "AccessLogs",
            retain_logs,
            name=vended_log_group_name(self, "apigateway", "webhooks-access"),
        )
        self.api: apigateway.RestApi | apigwv2.HttpApi
        # The stack's own name: the REST alarms read API Gateway's metrics by `ApiName`, so a
        # name shared with any other API of the account (the construct's default "Api") would
        # mix its requests and errors into this stack's alarms.
        self.name = f"{cdk.Stack.of(self).stack_name}-webhooks"
        if api_type is ApiType.REST:
            self.api = self._rest_api(ingest, access_logs, traced=xray_sampling > 0)
            base_url = self.api.url
            if xray_sampling > 0:
                self._sampling_rule(xray_sampling, self.api)
            if waf:
                self._add_waf(self.api, provider_ip_allow_list)
        else:
            self.api, stage = self._http_api(ingest, access_logs)
            base_url = f"{stage.url}/"  # a REST API's url ends with "/", an HTTP stage's not
        self.urls = {p: f"{base_url}webhooks/{p}" for p in providers}

    def _sampling_rule(self, rate: float, api: apigateway.RestApi) -> None:
        """The share of webhooks the REST stage traces (ingest and process continue its
        decision). No reservoir: a fixed share, not a trace a second on top of it.

        Sampling rules are the account's, not the stack's: the rule matches this stage alone
        (its service name `{api name}/{stage}` and its ARN), never another service's requests.
        The stage has one route, so any path of it is a webhook."""
        xray.CfnSamplingRule(
            self,
            "Sampling",
            sampling_rule=xray.CfnSamplingRule.SamplingRuleProperty(
                rule_name=sampling_rule_name(self.name),
                priority=100,
                fixed_rate=rate,
                reservoir_size=0,
                service_name=f"{self.name}/{STAGE}",
                service_type="AWS::ApiGateway::Stage",
                host="*",
                http_method="POST",
                url_path="*",
                resource_arn=api.deployment_stage.stage_arn,
                version=1,
            ),
        )

    def _rest_api(
        self, ingest: lambda_.IFunction, access_logs: logs.ILogGroup, *, traced: bool
    ) -> apigateway.RestApi:
        api = apigateway.RestApi(
            self,
            "Api",
            rest_api_name=self.name,
            description="umavez: payment-provider webhooks",
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            # Every body reaches ingest base64-encoded, byte for byte: signatures are over bytes.
            binary_media_types=["*/*"],
            # No AWS::ApiGateway::Account: the logging role is the region's setting, not the
            # stack's (every stack that set it would repoint it, the last deploy winning); the
            # stage's logs need it set once per region (docs/deploy.md).
            cloud_watch_role=False,
            deploy_options=apigateway.StageOptions(
                stage_name=STAGE,
                throttling_rate_limit=THROTTLE_RATE,
                throttling_burst_limit=THROTTLE_BURST,
                tracing_enabled=traced,
                metrics_enabled=True,
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.custom(json.dumps(ACCESS_LOG_FIELDS)),
            ),
        )
        validator = api.add_request_validator(
            # No body model is attached, so the body passes untouched: its signature is the check.
            "Validator",
            validate_request_parameters=True,
            validate_request_body=True,
        )
        webhooks = api.root.add_resource("webhooks").add_resource("{provider}")
        webhooks.add_method(
            "POST",
            apigateway.LambdaIntegration(ingest, proxy=True),
            request_parameters={"method.request.path.provider": True},
            request_validator=validator,
        )
        return api

    def _http_api(
        self, ingest: lambda_.IFunction, access_logs: logs.ILogGroup
    ) -> tuple[apigwv2.HttpApi, apigwv2.HttpStage]:
        """No default stage and no catch-all route: anything but POST /webhooks/{provider} is
        API Gateway's own 404 and never costs a Lambda. X-Ray does not trace HTTP APIs (ingest's
        own active tracing still does), and with one route the API-wide metrics are the route's:
        detailed (per-route, billed) metrics would add nothing."""
        api = apigwv2.HttpApi(
            self,
            "HttpApi",
            api_name=self.name,
            description="umavez: payment-provider webhooks",
            create_default_stage=False,
        )
        api.add_routes(
            path=WEBHOOK_PATH,
            methods=[apigwv2.HttpMethod.POST],
            # 2.0: lower-case headers, a text body for JSON (base64 otherwise); ingest reads both.
            integration=HttpLambdaIntegration(
                "Ingest", ingest, payload_format_version=apigwv2.PayloadFormatVersion.VERSION_2_0
            ),
        )
        stage = api.add_stage(
            "Stage",
            stage_name=STAGE,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=THROTTLE_RATE, burst_limit=THROTTLE_BURST),
            access_log_settings=_HttpAccessLogs(access_logs, HTTP_ACCESS_LOG_FIELDS),
        )
        return api, stage

    def _add_waf(self, api: apigateway.RestApi, provider_ip_allow_list: Sequence[str]) -> None:
        """Rate limit per source IP (never the providers' own addresses), and refuse declared
        oversized bodies before they cost a Lambda."""
        rate_per_ip = wafv2.CfnWebACL.RateBasedStatementProperty(
            limit=WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES,
            aggregate_key_type="IP",
            scope_down_statement=self._not_from(provider_ip_allow_list),
        )
        acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            visibility_config=_visibility("umavez-webhooks"),
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name="rate-per-ip",
                    priority=0,
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                    statement=wafv2.CfnWebACL.StatementProperty(rate_based_statement=rate_per_ip),
                    visibility_config=_visibility("rate-per-ip"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="body-size",
                    priority=1,
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                    # WAF reads only a body's first 16 KB, so the declared length is what is
                    # checked, as a number; ingest still refuses a longer body itself (413).
                    statement=wafv2.CfnWebACL.StatementProperty(
                        regex_match_statement=wafv2.CfnWebACL.RegexMatchStatementProperty(
                            regex_string=integer_greater_than(MAX_BODY_BYTES),
                            field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                                single_header={"Name": "content-length"}
                            ),
                            text_transformations=[
                                wafv2.CfnWebACL.TextTransformationProperty(priority=0, type="NONE")
                            ],
                        )
                    ),
                    visibility_config=_visibility("body-size"),
                ),
            ],
        )
        wafv2.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            resource_arn=api.deployment_stage.stage_arn,
            web_acl_arn=acl.attr_arn,
        )

    def _not_from(self, cidrs: Sequence[str]) -> wafv2.CfnWebACL.StatementProperty | None:
        """A statement matching requests from none of the CIDRs (one IP set per IP version)."""
        by_version: dict[int, list[str]] = {}
        for cidr in cidrs:
            by_version.setdefault(ipaddress.ip_network(cidr).version, []).append(cidr)
        from_listed = [
            wafv2.CfnWebACL.StatementProperty(
                ip_set_reference_statement=wafv2.CfnWebACL.IPSetReferenceStatementProperty(
                    arn=wafv2.CfnIPSet(
                        self,
                        f"ProviderAddressesV{version}",
                        scope="REGIONAL",
                        ip_address_version=f"IPV{version}",
                        addresses=addresses,
                        description="Provider webhook sources, never rate limited per IP",
                    ).attr_arn
                )
            )
            for version, addresses in sorted(by_version.items())
        ]
        if not from_listed:
            return None
        listed = (
            from_listed[0]
            if len(from_listed) == 1
            else wafv2.CfnWebACL.StatementProperty(
                or_statement=wafv2.CfnWebACL.OrStatementProperty(statements=from_listed)
            )
        )
        return wafv2.CfnWebACL.StatementProperty(
            not_statement=wafv2.CfnWebACL.NotStatementProperty(statement=listed)
        )


def sampling_rule_name(api_name: str) -> str:
    """X-Ray rule names are the account's and hold 32 characters: stacks whose names share
    their first 32 would collide, so a long name keeps its start and a hash of the whole."""
    if len(api_name) <= 32:
        return api_name
    digest = hashlib.sha256(api_name.encode()).hexdigest()[:8]
    return f"{api_name[:23]}-{digest}"


def integer_greater_than(limit: int) -> str:
    """A regex matching the decimal integers above `limit`: WAF cannot compare a header's value
    as a number (a size constraint measures its text: "262145" is 6 bytes). Above the limit
    means more digits, or as many and greater at the first digit that differs."""
    digits = str(limit)
    greater_at = [
        digits[:i]
        + f"[{int(d) + 1}-9]"
        + (rf"\d{{{len(digits) - i - 1}}}" if i + 1 < len(digits) else "")
        for i, d in enumerate(digits)
        if d != "9"
    ]
    longer = rf"[1-9]\d{{{len(digits)},}}"
    return "^0*(" + "|".join([*greater_at, longer]) + ")$"


def _visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
    )
