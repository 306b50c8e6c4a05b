"""API Gateway REST API: POST /webhooks/{provider} -> ingest, throttled, logged, optionally WAF."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_apigateway as apigateway
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from functions.ingest.service import MAX_BODY_BYTES
from infra.constructs.lambdas import retained_log_group

STAGE = "live"


class WebhookApi(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        ingest: lambda_.IFunction,
        providers: Sequence[str],
        waf: bool,
        retain_logs: bool,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = retained_log_group(self, "AccessLogs", retain_logs)
        self.api = apigateway.RestApi(
            self,
            "Api",
            description="umavez: payment-provider webhooks",
            endpoint_types=[apigateway.EndpointType.REGIONAL],
            # Every body reaches ingest base64-encoded, byte for byte: signatures are over bytes.
            binary_media_types=["*/*"],
            cloud_watch_role=True,
            deploy_options=apigateway.StageOptions(
                stage_name=STAGE,
                throttling_rate_limit=200,
                throttling_burst_limit=400,
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigateway.MethodLoggingLevel.ERROR,
                access_log_destination=apigateway.LogGroupLogDestination(access_logs),
                access_log_format=apigateway.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        validator = self.api.add_request_validator(
            # No body model is attached, so the body passes untouched: its signature is the check.
            "Validator",
            validate_request_parameters=True,
            validate_request_body=True,
        )
        webhooks = self.api.root.add_resource("webhooks").add_resource("{provider}")
        webhooks.add_method(
            "POST",
            apigateway.LambdaIntegration(ingest, proxy=True),
            request_parameters={"method.request.path.provider": True},
            request_validator=validator,
        )
        self.urls = {p: f"{self.api.url}webhooks/{p}" for p in providers}
        if waf:
            self._add_waf()

    def _add_waf(self) -> None:
        """Rate limit per source IP, and refuse oversized bodies before they cost a Lambda."""
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
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            limit=3000, aggregate_key_type="IP"
                        )
                    ),
                    visibility_config=_visibility("rate-per-ip"),
                ),
                wafv2.CfnWebACL.RuleProperty(
                    name="body-size",
                    priority=1,
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        size_constraint_statement=wafv2.CfnWebACL.SizeConstraintStatementProperty(
                            comparison_operator="GT",
                            size=MAX_BODY_BYTES,
                            field_to_match=wafv2.CfnWebACL.FieldToMatchProperty(
                                body=wafv2.CfnWebACL.BodyProperty(oversize_handling="MATCH")
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
            resource_arn=self.api.deployment_stage.stage_arn,
            web_acl_arn=acl.attr_arn,
        )


def _visibility(name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=name, sampled_requests_enabled=True
    )
