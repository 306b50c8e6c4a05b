"""cdk-nag (AwsSolutions) findings we reviewed and accept, each with its reason.

cdk-nag 3.x runs as a CDK validation plugin (`Validations.of(app).add_plugins(...)`), not as
an Aspect; synth fails while any finding is unacknowledged. Acknowledgments are made with
CDK's own `Validations.of(scope).acknowledge(...)`.
"""

from __future__ import annotations

from collections.abc import Sequence

import aws_cdk as cdk
from constructs import Construct

PACK = "AwsSolutions::AwsSolutions-"
REVIEWED: dict[str, str] = {
    f"{PACK}APIG4": "authentication is the provider's HMAC signature, checked by ingest",
    f"{PACK}COG4": "providers cannot present Cognito tokens; ingest checks their signatures",
    f"{PACK}SMG4": (
        "provider-issued signing secrets are rotated in their dashboards (docs/deploy.md)"
    ),
    f"{PACK}L1": "Powertools' public layer is per runtime; 3.13 is the newest it ships",
    f"{PACK}SQS3": "the outbox stream's on-failure destination is itself a dead-letter queue",
}
WITHOUT_WAF = {
    f"{PACK}APIG3": (
        "WAF is off outside prod unless -c waf=true, and in prod only with"
        " -c allowUnprotectedProd=true; requests are authenticated by signature"
    ),
}
XRAY_WILDCARD = f"{PACK}IAM5[Resource::*]"


def acknowledge(scope: Construct, finding: str, reason: str) -> None:
    cdk.Validations.of(scope).acknowledge(cdk.Acknowledgment(id=finding, reason=reason))


def acknowledge_reviewed_findings(
    stack: Construct, *, waf: bool, tracing_policies: Sequence[Construct], api: Construct
) -> None:
    for finding, reason in (REVIEWED if waf else {**REVIEWED, **WITHOUT_WAF}).items():
        acknowledge(stack, finding, reason)
    # Scoped to where they arise, so a new wildcard elsewhere still fails synth.
    for policy in tracing_policies:
        acknowledge(
            policy, XRAY_WILDCARD, "X-Ray PutTraceSegments/PutTelemetryRecords take no resource"
        )


def acknowledge_state_machine_findings(state_machine: Construct, function: Construct) -> None:
    """The reconciliation's state machine: its role's policy, and nothing else, may name the
    function's versions and the actions that take no resource."""
    acknowledge(
        state_machine,
        XRAY_WILDCARD,
        "Step Functions' log delivery (logs:CreateLogDelivery and the rest) and X-Ray actions "
        "take no resource",
    )
    cfn_function = function.node.default_child
    if not isinstance(cfn_function, cdk.CfnElement):
        raise TypeError(f"{function.node.path} is not backed by a CloudFormation resource")
    logical_id = cdk.Stack.of(function).get_logical_id(cfn_function)
    acknowledge(
        state_machine,
        f"{PACK}IAM5[Resource::<{logical_id}.Arn>:*]",
        "the one reconciliation function, any version of it (what LambdaInvoke grants)",
    )
