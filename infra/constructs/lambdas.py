"""A Lambda function the way every umavez function is built: arm64, JSON logs, X-Ray,
its own log group with retention, its own role (no managed policies), and an asset that holds
only the packages infra/settings.py lists for it (`functions/shared`, the providers' packages
it reads, the ledger store, its own), copied without Docker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aws_cdk as cdk
import jsii
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from functions.shared.observability import METRICS_NAMESPACE_ENV
from infra.assets import ROOT, copy_packages
from infra.removal import kept
from infra.settings import (
    LAMBDA_MEMORY_MB,
    LAMBDA_PACKAGES,
    pinned_powertools_version,
    powertools_layer_parameter,
)

RUNTIME = lambda_.Runtime.PYTHON_3_13
ARCHITECTURE = lambda_.Architecture.ARM_64


@jsii.implements(cdk.ILocalBundling)
class CopyPackages:
    """Bundles by copying Python packages: pure-Python code needs no build, hence no Docker."""

    def __init__(self, packages: Sequence[str]) -> None:
        self._packages = packages

    def try_bundle(self, output_dir: str, options: Any) -> bool:
        copy_packages(Path(output_dir), self._packages)
        return True


def function_code(packages: Sequence[str]) -> lambda_.Code:
    return lambda_.Code.from_asset(
        str(ROOT / "functions"),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            image=RUNTIME.bundling_image,
            # jsii calls try_bundle(output_dir, options) positionally.
            local=cast(cdk.ILocalBundling, CopyPackages(packages)),
            # CDK caches bundles by their options; the package list makes each function's own.
            environment={"UMAVEZ_PACKAGES": ",".join(packages)},
        ),
    )


def powertools_layer(scope: Construct) -> lambda_.ILayerVersion:
    """Powertools' public layer (it also brings pydantic and the X-Ray SDK), resolved by
    CloudFormation at deploy time, so the layer always matches the pinned release."""
    arn = ssm.StringParameter.value_for_string_parameter(
        scope, powertools_layer_parameter(pinned_powertools_version())
    )
    return lambda_.LayerVersion.from_layer_version_arn(scope, "PowertoolsLayer", arn)


@dataclass(frozen=True)
class FunctionSpec:
    name: str  # a key of infra.settings.LAMBDA_PACKAGES: it says the handler and the packages
    description: str
    timeout: cdk.Duration = field(default_factory=lambda: cdk.Duration.seconds(30))
    environment: Mapping[str, str] = field(default_factory=dict)
    # "Active": Lambda starts a trace for an invocation nobody upstream sampled (at AWS's
    # fixed 1 a second plus 5%); "PassThrough": only continues a trace its caller sampled.
    tracing: str = "Active"
    # A function run by a schedule: how often. Its failed or timed-out run is not retried by
    # Lambda (the async default is two more tries, which overlap the next scheduled run), and
    # a run Lambda could not start (throttled) is dropped once the next one is due.
    scheduled_every: cdk.Duration | None = None

    @property
    def handler(self) -> str:
        return LAMBDA_PACKAGES[self.name][0]

    @property
    def packages(self) -> tuple[str, ...]:
        return LAMBDA_PACKAGES[self.name][1]

    @property
    def memory_mb(self) -> int:
        return LAMBDA_MEMORY_MB[self.name]


def vended_log_group_name(scope: Construct, service: str, purpose: str) -> str:
    """A log group name under /aws/vendedlogs/, unique per stack creation.

    A service that delivers logs itself (API Gateway's access logs, Step Functions) adds each
    group it writes to to the account's regional CloudWatch Logs resource policy, which holds
    5,120 characters: in an account with a few such groups, the next create fails and the stack
    rolls back. Groups under /aws/vendedlogs/ are let in without it. The name ends with the
    stack id's UUID, so a group kept after a failed create never blocks the next create."""
    stack = cdk.Stack.of(scope)
    creation = cdk.Fn.select(2, cdk.Fn.split("/", stack.stack_id))
    return f"/aws/vendedlogs/{service}/{stack.stack_name}-{purpose}-{creation}"


def retained_log_group(
    scope: Construct, construct_id: str, retain: bool, name: str | None = None
) -> logs.LogGroup:
    return logs.LogGroup(
        scope,
        construct_id,
        log_group_name=name,
        retention=logs.RetentionDays.THREE_MONTHS,
        removal_policy=kept(retain),
    )


class UmavezFunction(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        spec: FunctionSpec,
        layer: lambda_.ILayerVersion,
        retain_logs: bool,
        metrics_namespace: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.log_group = retained_log_group(self, "Logs", retain_logs)
        self.role = iam.Role(
            self,
            "Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"umavez {spec.name}: only what this function does",
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=spec.description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=spec.handler,
            code=function_code(spec.packages),
            role=self.role,
            memory_size=spec.memory_mb,
            timeout=spec.timeout,
            logging_format=lambda_.LoggingFormat.JSON,
            # Lambda's own records (platform.start, platform.report: ~380 bytes an invocation,
            # more than the function's own line) are INFO; the WARN ones (timeouts, crashes)
            # stay. Duration and errors are CloudWatch metrics either way.
            system_log_level_v2=lambda_.SystemLogLevel.WARN,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            log_group=self.log_group,
            layers=[layer],
            retry_attempts=0 if spec.scheduled_every else None,
            max_event_age=spec.scheduled_every,
            environment={
                "POWERTOOLS_SERVICE_NAME": spec.name,
                METRICS_NAMESPACE_ENV: metrics_namespace,
                **spec.environment,
            },
        )
        # Tracing, with X-Ray's resource-less actions in a policy of their own: the cdk-nag
        # acknowledgment for that wildcard is scoped to this policy alone, so a wildcard added
        # to the role's default policy still fails synth.
        cfn_function = self.function.node.default_child
        if not isinstance(cfn_function, lambda_.CfnFunction):
            raise TypeError(f"{self.function.node.path} is not backed by an AWS::Lambda::Function")
        cfn_function.tracing_config = lambda_.CfnFunction.TracingConfigProperty(mode=spec.tracing)
        self.tracing_policy = iam.Policy(
            self,
            "Tracing",
            roles=[self.role],
            statements=[
                iam.PolicyStatement(
                    actions=["xray:PutTraceSegments", "xray:PutTelemetryRecords"], resources=["*"]
                )
            ],
        )
