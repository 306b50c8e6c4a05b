"""Synthesis the way a user runs it, and proof that cdk-nag really gates it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_iam as iam
from cdk_nag import AwsSolutionsChecks

from infra.config import StackConfig
from infra.settings import LAMBDA_PACKAGES
from infra.stack import UmavezStack

ROOT = Path(__file__).resolve().parents[2]


def cdk_synth(outdir: Path, *context: str) -> subprocess.CompletedProcess[str]:
    """`cdk synth` as a user runs it: cdk.json, app.py, the context given with -c."""
    npx = shutil.which("npx")
    assert npx, "node and npm are needed: `make test` installs the pinned CDK CLI"
    assert (ROOT / "node_modules" / ".bin" / "cdk").exists(), "run `make test` (it runs npm ci)"
    options = [option for pair in context for option in ("-c", pair)]
    command = [npx, "--no-install", "cdk", "synth", "--quiet", "--no-notices", "-o", str(outdir)]
    return subprocess.run(  # noqa: S603 - fixed command, our own CLI
        [*command, *options],
        cwd=ROOT,
        env={
            **os.environ,
            "CDK_DISABLE_VERSION_CHECK": "1",
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_cdk_cli_synthesizes_through_cdk_json_and_app_py(tmp_path: Path) -> None:
    # Given prod (cdk.json's stage) with its alarm subscription explicitly left to the operator
    result = cdk_synth(tmp_path, "allowNoAlarmSubscription=true")

    assert result.returncode == 0, result.stderr[-3000:]
    template = json.loads((tmp_path / "Umavez-prod.template.json").read_text())
    kinds = [r["Type"] for r in template["Resources"].values()]
    assert kinds.count("AWS::Lambda::Function") == len(LAMBDA_PACKAGES)
    assert kinds.count("AWS::SNS::Topic") == 1
    assert "AWS::SNS::Subscription" not in kinds
    # And prod, no API type chosen, is a REST API behind WAF, leaving the region's API
    # Gateway account (its logging role) alone
    assert {"AWS::ApiGateway::RestApi", "AWS::WAFv2::WebACLAssociation"} <= set(kinds)
    assert "AWS::ApiGateway::Account" not in kinds


def test_cdk_cli_refuses_prod_without_waf_naming_the_opt_out(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path, "allowNoAlarmSubscription=true", "apiType=http")

    assert result.returncode != 0
    assert "umavez: stage prod takes webhooks behind AWS WAF" in result.stderr
    assert "-c allowUnprotectedProd=true" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_cdk_cli_refuses_prod_whose_alarms_would_reach_nobody(tmp_path: Path) -> None:
    result = cdk_synth(tmp_path)

    assert result.returncode != 0
    assert "umavez: stage prod needs someone to receive its alarms" in result.stderr
    assert "-c alarmEmail=" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_cdk_cli_refuses_waf_on_an_http_api_with_the_fix_in_the_message(tmp_path: Path) -> None:
    # apiType defaults to http; WAF can only be attached to a REST API
    result = cdk_synth(tmp_path, "stage=dev", "waf=true")

    assert result.returncode != 0
    assert "umavez: waf=true needs apiType=rest" in result.stderr
    assert "-c apiType=rest -c waf=true" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.template.json"))


def test_a_new_wildcard_permission_fails_synth(tmp_path: Path) -> None:
    # Given the stack with one careless statement added to a function's role
    app = cdk.App(outdir=str(tmp_path))
    stack = UmavezStack(
        app,
        "Umavez-nag",
        config=StackConfig(alarm_email="oncall@example.com", allow_unprotected_prod=True),
    )
    stack.pipeline.process.add_to_role_policy(
        iam.PolicyStatement(actions=["s3:GetObject"], resources=["*"])
    )
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))

    # When it is synthesized, Then cdk-nag refuses it
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        app.synth()
