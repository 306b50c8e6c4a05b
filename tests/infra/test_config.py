"""What `cdk deploy -c key=value` turns into: read the way app.py reads it, no synth needed."""

from __future__ import annotations

import re
from typing import Any

import pytest

from functions.shared.settings import PaymentMode
from infra.config import ApiType, ConfigError, StackConfig


def from_context(**context: Any) -> StackConfig:
    return StackConfig.from_context(context.get)


def test_prod_without_an_alarm_subscription_is_refused_with_the_fix_in_the_message() -> None:
    with pytest.raises(ConfigError, match=r"-c alarmEmail=.*-c allowNoAlarmSubscription=true"):
        from_context(stage="prod")
    with pytest.raises(ConfigError):
        from_context()  # prod is the default stage


def test_prod_deploys_with_an_alarm_email_or_an_explicit_opt_out() -> None:
    assert from_context(stage="prod", alarmEmail="oncall@example.com").alarm_email == (
        "oncall@example.com"
    )
    assert from_context(stage="prod", allowNoAlarmSubscription="true").alarm_email is None
    with pytest.raises(ConfigError):
        from_context(stage="prod", allowNoAlarmSubscription="false")


def test_other_stages_need_no_alarm_subscription() -> None:
    assert from_context(stage="dev").alarm_email is None


def test_payment_mode_is_live_in_prod_test_elsewhere_unless_chosen() -> None:
    assert from_context(alarmEmail="a@example.com").payment_mode is PaymentMode.LIVE
    assert from_context(stage="dev").payment_mode is PaymentMode.TEST
    assert from_context(stage="staging").payment_mode is PaymentMode.TEST
    assert from_context(stage="dev", stripeMode="live").payment_mode is PaymentMode.LIVE
    assert (
        from_context(stage="prod", alarmEmail="a@example.com", stripeMode="TEST").payment_mode
        is PaymentMode.TEST
    )
    with pytest.raises(ConfigError, match=re.escape("stripeMode must be live|test")):
        from_context(stage="dev", stripeMode="sandbox")


def test_retention_and_give_up_default_to_the_functions_defaults_and_must_be_positive() -> None:
    default = from_context(stage="dev")
    chosen = from_context(stage="dev", retentionDays="30", outboxGiveUpHours=6)

    assert (default.retention_days, default.outbox_give_up_hours) == (90, 24)
    assert (chosen.retention_days, chosen.outbox_give_up_hours) == (30, 6)
    with pytest.raises(ConfigError, match="retention_days"):
        from_context(stage="dev", retentionDays="0")


def test_provider_addresses_are_read_as_cidrs_from_a_string_or_a_list() -> None:
    listed = from_context(
        stage="dev", providerIpAllowList="3.18.12.63, 54.187.174.0/24 2600:1f18::1"
    )
    from_json = from_context(stage="dev", providerIpAllowList=["3.18.12.63"])

    assert listed.provider_ip_allow_list == ("3.18.12.63/32", "54.187.174.0/24", "2600:1f18::1/128")
    assert from_json.provider_ip_allow_list == ("3.18.12.63/32",)
    assert from_context(stage="dev").provider_ip_allow_list == ()
    with pytest.raises(ConfigError, match="providerIpAllowList"):
        from_context(stage="dev", providerIpAllowList="stripe.com")


def test_asaas_sources_are_off_unless_asked_for_published_or_listed() -> None:
    published = from_context(stage="dev", asaasSourceIps="published")
    listed = from_context(stage="dev", asaasSourceIps="203.0.113.0/24")

    assert from_context(stage="dev").asaas_source_ips == ()
    assert published.asaas_source_ips == (
        "52.67.12.206/32",
        "18.230.8.159/32",
        "54.94.136.112/32",
        "54.94.183.101/32",
    )
    assert listed.asaas_source_ips == ("203.0.113.0/24",)
    with pytest.raises(ConfigError, match="asaasSourceIps"):
        from_context(stage="dev", asaasSourceIps="asaas.com")


def test_the_retired_layer_version_option_is_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match=re.escape("pyproject.toml")):
        from_context(stage="dev", powertoolsLayerVersion="27")


def test_the_api_is_an_http_api_unless_rest_is_chosen() -> None:
    assert from_context(stage="dev").api_type is ApiType.HTTP
    assert from_context(stage="dev", apiType="rest").api_type is ApiType.REST
    assert from_context(stage="dev", apiType="HTTP").api_type is ApiType.HTTP
    with pytest.raises(ConfigError, match=re.escape("apiType must be http|rest, not 'graphql'")):
        from_context(stage="dev", apiType="graphql")


def test_waf_needs_a_rest_api_and_says_so_rather_than_switching_silently() -> None:
    # WAF attaches to REST API stages only; an HTTP API chosen by default is not replaced by a
    # REST API behind the operator's back (that would change every webhook URL)
    assert from_context(stage="dev", waf="true", apiType="rest").waf is True
    for context in ({"waf": "true"}, {"waf": "true", "apiType": "http"}):
        with pytest.raises(ConfigError, match=re.escape("-c apiType=rest -c waf=true")):
            from_context(stage="dev", **context)


def test_xray_sampling_is_a_share_of_one_percent_unless_chosen() -> None:
    assert from_context(stage="dev").xray_sampling == 0.01
    assert from_context(stage="dev", xraySampling="0.2").xray_sampling == 0.2
    assert from_context(stage="dev", xraySampling=0).xray_sampling == 0.0
    with pytest.raises(ConfigError, match="xraySampling must be between 0 and 1"):
        from_context(stage="dev", xraySampling="5")
    with pytest.raises(ConfigError, match="xraySampling must be a number"):
        from_context(stage="dev", xraySampling="often")


def test_a_notify_url_that_is_not_https_is_refused_at_synth() -> None:
    assert from_context(stage="dev", notifyUrl="https://hooks.example.com/umavez").notify_url
    for url in ("http://hooks.example.com/umavez", "hooks.example.com/umavez"):
        with pytest.raises(ConfigError, match="notifyUrl must be an https:// URL"):
            from_context(stage="dev", notifyUrl=url)


def test_prod_defaults_to_a_rest_api_behind_waf_and_opts_out_only_by_name() -> None:
    # Given prod with nothing chosen about its API, Then it is a REST API behind WAF
    protected = from_context(stage="prod", alarmEmail="a@example.com")
    assert (protected.api_type, protected.waf) == (ApiType.REST, True)
    # And the providers' addresses still reach its per-IP rule's exemption
    listed = from_context(stage="prod", alarmEmail="a@b.com", providerIpAllowList="3.18.12.63")
    assert listed.provider_ip_allow_list == ("3.18.12.63/32",)
    # And with the opt-out it is the lean HTTP API, without WAF
    lean = from_context(stage="prod", alarmEmail="a@example.com", allowUnprotectedProd="true")
    assert (lean.api_type, lean.waf) == (ApiType.HTTP, False)
    # And other stages keep the HTTP API unless asked
    assert from_context(stage="dev").api_type is ApiType.HTTP


@pytest.mark.parametrize(
    "chosen", [{"apiType": "http"}, {"apiType": "rest", "waf": "false"}, {"waf": "false"}]
)
def test_prod_without_waf_is_refused_with_the_opt_out_in_the_message(
    chosen: dict[str, str],
) -> None:
    with pytest.raises(ConfigError, match=r"-c allowUnprotectedProd=true") as refused:
        from_context(stage="prod", alarmEmail="a@example.com", **chosen)
    assert "429" in str(refused.value)
    assert "-c apiType=rest -c waf=true" in str(refused.value)


@pytest.mark.parametrize(
    "sender",
    [
        "loja",
        "Loja <loja>",
        "loja@example",
        "loja@@example.com",
        "Loja <loja@example.com",
        "loja@exa mple.com",
        "a@example.com, b@example.com",
    ],
)
def test_a_sender_that_is_not_one_address_fails_synth_saying_what_is_expected(
    sender: str,
) -> None:
    with pytest.raises(ConfigError, match=re.escape("'Loja <loja@example.com>'")):
        from_context(stage="dev", emailSender=sender)


def test_a_sender_with_a_display_name_is_taken_as_given() -> None:
    config = from_context(stage="dev", emailSender='"Loja, SP" <loja@example.com>')
    assert config.email_sender == '"Loja, SP" <loja@example.com>'
