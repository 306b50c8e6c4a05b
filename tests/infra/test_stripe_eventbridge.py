"""`-c stripeIngress=webhook|eventbridge|both`: Stripe's EventBridge event destination, its
partner event bus and the rule to the webhook queue, on the template."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from aws_cdk.assertions import Match

from infra.config import ConfigError, StackConfig, StripeIngress
from tests.infra.conftest import LEAN_PROD, Synthesized

SOURCE = "aws.partner/stripe.com/ed_61RM0xAHcFZJ2wBNN16RLfH3kxSJ2rGQCAgh"


def with_ingress(ingress: StripeIngress) -> StackConfig:
    return replace(LEAN_PROD, stripe_ingress=ingress, stripe_event_source=SOURCE)


def webhook_urls(synthesized: Synthesized) -> set[str]:
    return {
        name for name in synthesized.template.to_json()["Outputs"] if name.startswith("WebhookUrl")
    }


@pytest.mark.parametrize("ingress", [StripeIngress.EVENTBRIDGE, StripeIngress.BOTH])
def test_the_partner_bus_takes_its_source_to_the_webhook_queue_with_its_dlq(
    synth_for: Callable[[StackConfig], Synthesized], ingress: StripeIngress
) -> None:
    # Given a stack whose Stripe events come through an EventBridge destination
    synthesized = synth_for(with_ingress(ingress))
    template = synthesized.template

    # Then the partner event bus is named after the partner source it associates
    template.has_resource_properties(
        "AWS::Events::EventBus", {"Name": SOURCE, "EventSourceName": SOURCE}
    )
    # And one rule on it takes that source's events to the webhook queue, failures to its DLQ
    [rule] = [
        r["Properties"]
        for r in synthesized.resources("AWS::Events::Rule").values()
        if r["Properties"].get("EventPattern", {}).get("source") == [SOURCE]
    ]
    [target] = rule["Targets"]
    queue_ids = {
        name: r
        for name, r in synthesized.resources("AWS::SQS::Queue").items()
        if "Webhooks" in name or "DeadLetters" in name
    }
    assert _ref(target["Arn"]) in queue_ids
    assert "DeadLetters" not in _ref(target["Arn"])
    assert "DeadLetters" in _ref(target["DeadLetterConfig"]["Arn"])
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
    # And only that rule may send to the queue from EventBridge
    template.has_resource_properties(
        "AWS::SQS::QueuePolicy",
        {
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": Match.array_with(["sqs:SendMessage"]),
                                "Principal": {"Service": "events.amazonaws.com"},
                                "Condition": {"ArnEquals": {"aws:SourceArn": Match.any_value()}},
                            }
                        )
                    ]
                )
            }
        },
    )
    outputs = template.find_outputs("StripeEventSource")
    assert [o["Value"] for o in outputs.values()] == [SOURCE]


def _ref(value: Any) -> str:
    """The logical id an `Fn::GetAtt` names."""
    return str(value["Fn::GetAtt"][0])


def test_by_eventbridge_alone_no_stripe_endpoint_is_named_and_both_keeps_it(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    alone = webhook_urls(synth_for(with_ingress(StripeIngress.EVENTBRIDGE)))
    both = webhook_urls(synth_for(with_ingress(StripeIngress.BOTH)))

    assert alone == {"WebhookUrlMercadopago", "WebhookUrlAsaas"}
    assert both == alone | {"WebhookUrlStripe"}


def test_the_webhook_default_has_no_partner_bus(prod: Synthesized) -> None:
    buses = prod.resources("AWS::Events::EventBus").values()
    assert all("EventSourceName" not in bus["Properties"] for bus in buses)


@pytest.mark.parametrize("source", [None, "", "aws.partner/other.com/x", "ed_61RM0x"])
def test_eventbridge_without_the_partner_source_is_refused_at_synth(source: str | None) -> None:
    context = {"stripeIngress": "eventbridge", "stage": "dev", "stripeEventSource": source}

    with pytest.raises(ConfigError, match="stripeEventSource"):
        StackConfig.from_context(context.get)


def test_an_unknown_ingress_is_refused_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="webhook\\|eventbridge\\|both"):
        StackConfig.from_context({"stripeIngress": "sns", "stage": "dev"}.get)


def test_the_read_policy_may_describe_the_stripe_event_source_it_checks(
    synth_for: Callable[[StackConfig], Synthesized],
) -> None:
    template = synth_for(with_ingress(StripeIngress.BOTH)).template

    template.has_resource_properties(
        "AWS::IAM::ManagedPolicy",
        {
            "Description": Match.string_like_regexp("preflight"),
            "PolicyDocument": {
                "Statement": Match.array_with(
                    [
                        Match.object_like(
                            {
                                "Action": "events:DescribeEventSource",
                                "Resource": Match.any_value(),
                            }
                        )
                    ]
                )
            },
        },
    )
