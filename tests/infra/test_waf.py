"""The optional WAF (`-c waf=true`): what it refuses, and whom it never rate limits."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template

from functions.ingest.service import MAX_BODY_BYTES
from infra.config import PROVIDERS, ApiType, ConfigError, cidrs
from infra.constructs.api import WebhookApi, integer_greater_than
from tests.infra.conftest import Synthesized


def rules(template: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    [acl] = [r for r in template["Resources"].values() if r["Type"] == "AWS::WAFv2::WebACL"]
    return {r["Name"]: r["Statement"] for r in acl["Properties"]["Rules"]}


def api_alone(allow_list: Sequence[str], api_type: ApiType = ApiType.REST) -> Mapping[str, Any]:
    """The API construct in a stack of its own: seconds, where the whole stack takes a minute."""
    stack = cdk.Stack(cdk.App(), "Api")
    ingest = lambda_.Function(
        stack,
        "Ingest",
        runtime=lambda_.Runtime.PYTHON_3_13,
        handler="index.handler",
        code=lambda_.Code.from_inline("def handler(event, context): pass"),
    )
    WebhookApi(
        stack,
        "Webhooks",
        ingest=ingest,
        providers=PROVIDERS,
        api_type=api_type,
        waf=True,
        provider_ip_allow_list=cidrs(",".join(allow_list)),
        retain_logs=False,
    )
    return Template.from_stack(stack).to_json()


def test_waf_on_an_http_api_is_refused_with_the_fix_in_the_message() -> None:
    # AWS WAF attaches to REST API stages only: an HTTP API would deploy unprotected
    with pytest.raises(ConfigError, match="-c apiType=rest"):
        api_alone([], api_type=ApiType.HTTP)


def test_bodies_are_refused_by_their_declared_length_above_ingests_limit(
    dev_with_waf: Synthesized,
) -> None:
    statement = rules(dev_with_waf.template.to_json())["body-size"]["RegexMatchStatement"]
    assert statement["FieldToMatch"] == {"SingleHeader": {"Name": "content-length"}}

    # WAF searches the header's value with the regex: it must match exactly the numbers above
    regex = re.compile(statement["RegexString"])
    around_the_limit = range(MAX_BODY_BYTES - 2_000, MAX_BODY_BYTES + 2_000)
    for length in [0, 1, 16 * 1024, 16 * 1024 + 1, *around_the_limit, 10**6, 10**9]:
        assert bool(regex.search(str(length))) is (length > MAX_BODY_BYTES), length
    assert regex.search(f"00{MAX_BODY_BYTES + 1}")
    assert not regex.search(f"00{MAX_BODY_BYTES}")


def test_the_rate_rule_never_counts_the_providers_addresses(dev_with_waf: Synthesized) -> None:
    template = dev_with_waf.template.to_json()
    ip_sets = dev_with_waf.resources("AWS::WAFv2::IPSet")
    rate = rules(template)["rate-per-ip"]["RateBasedStatement"]

    # The rate rule applies only to requests from none of the IP sets: a scope-down
    referenced = [
        s["IPSetReferenceStatement"]["Arn"]["Fn::GetAtt"]
        for s in rate["ScopeDownStatement"]["NotStatement"]["Statement"]["OrStatement"][
            "Statements"
        ]
    ]
    assert sorted(referenced) == sorted([ip_set_id, "Arn"] for ip_set_id in ip_sets)
    assert rate["AggregateKeyType"] == "IP"
    # And the sets hold the listed addresses, one set per IP version
    assert {
        s["Properties"]["IPAddressVersion"]: s["Properties"]["Addresses"] for s in ip_sets.values()
    } == {
        "IPV4": ["3.18.12.63/32", "54.187.174.0/24"],
        "IPV6": ["2600:1f18::1/128", "2600:1f14::/56"],
    }


def test_the_allow_list_is_never_a_rule_that_blocks_or_allows_by_itself(
    dev_with_waf: Synthesized,
) -> None:
    # A matching IP set rule would let the providers' addresses skip the body-size rule
    assert set(rules(dev_with_waf.template.to_json())) == {"rate-per-ip", "body-size"}


def test_one_ip_version_needs_no_or_and_no_list_needs_no_scope_down() -> None:
    only_v4 = api_alone(["3.18.12.63"])
    none = api_alone([])

    [(ip_set_id, ip_set)] = [
        (k, r) for k, r in only_v4["Resources"].items() if r["Type"] == "AWS::WAFv2::IPSet"
    ]
    assert ip_set["Properties"]["Addresses"] == ["3.18.12.63/32"]
    assert rules(only_v4)["rate-per-ip"]["RateBasedStatement"]["ScopeDownStatement"] == {
        "NotStatement": {
            "Statement": {"IPSetReferenceStatement": {"Arn": {"Fn::GetAtt": [ip_set_id, "Arn"]}}}
        }
    }
    assert "ScopeDownStatement" not in rules(none)["rate-per-ip"]["RateBasedStatement"]
    assert not [r for r in none["Resources"].values() if r["Type"] == "AWS::WAFv2::IPSet"]


@pytest.mark.parametrize("limit", [1, 9, 10, 99, 262_144, 999_999, 1_000_000])
def test_the_length_regex_holds_for_any_limit(limit: int) -> None:
    regex = re.compile(integer_greater_than(limit))

    for n in [*range(0, min(3 * limit, limit + 5_000) + 20), 10 * limit, 10 * limit + 1]:
        assert bool(regex.search(str(n))) is (n > limit), (limit, n)
