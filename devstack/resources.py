"""The stack's resources on the local moto server, from the same definitions the infra uses."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import boto3

from functions.ingest.environment import IngestSettings
from functions.process.eventbridge import STRIPE_EVENT_OBJECTS
from functions.shared.environment import (
    ProcessSettings,
    StatementSettings,
    SweeperSettings,
    WaitingSettings,
)
from functions.shared.tables import TableNames, create_table_requests
from infra.config import PROVIDERS
from infra.settings import MAX_RECEIVE_COUNT, WEBHOOK_MESSAGE_MAX_BYTES

REGION = "us-east-1"
# Documented development secrets: obviously fake, used only by the embedded stack and `send`.
DEVELOPMENT_SECRETS = {
    "stripe": "whsec_local_development_only_not_a_secret",
    "mercadopago": "mp_local_development_only_not_a_secret",
    "asaas": "asaas_local_development_only_not_a_token",
}
WEBHOOK_QUEUE_NAME = "umavez-webhooks"
DEAD_LETTER_QUEUE_NAME = "umavez-dead-letters"
OUTBOX_FAILURES_QUEUE_NAME = "umavez-outbox-stream-failures"
MERCADOPAGO_DEVELOPMENT_TOKEN = "APP_USR-local-development-only"
STRIPE_DEVELOPMENT_API_KEY = "rk_test_local_development_only"
ASAAS_DEVELOPMENT_API_KEY = "aact_local_development_only_not_a_key"
ASAAS_API_KEY_SECRET = "umavez/local/asaas/api-key"
EMAIL_SENDER = "loja@example.com"
# Stripe's EventBridge event destination, played locally: events from this partner source on
# a bus that stands for its partner event bus (moto routes no rule of a bus whose name has the
# source's slashes, so the stand-in has a plain name), ruled to the webhook queue as deployed.
LOCAL_STRIPE_EVENT_SOURCE = "aws.partner/stripe.com/ed_test_local_umavez"
LOCAL_STRIPE_BUS = "umavez-local-stripe-partner"
# Short on purpose: locally, a failed record is retried after seconds, not minutes.
LOCAL_VISIBILITY_TIMEOUT_SECONDS = 3

# Waiting ends (unmatched) after this many seconds locally, instead of 3 days.
LOCAL_WAIT_LIMIT_SECONDS = 120


@dataclass(frozen=True)
class LocalResources:
    endpoint_url: str
    tables: TableNames
    queue_url: str
    dead_letter_url: str
    outbox_failures_url: str
    sink_queue_url: str
    bus_name: str
    secret_names: dict[str, str]
    mercadopago_token_secret: str
    stripe_api_key_secret: str
    asaas_api_key_secret: str = ASAAS_API_KEY_SECRET

    def deployed_as(self) -> dict[str, str]:
        """Which resource of the deployed stack each local one plays (named as
        `devstack/calls.py` names what a call addresses): its construct's path under the
        stack's pipeline, of which CloudFormation makes its logical id. The SES identity is
        the same address in both (`emailSender`)."""
        return {
            f"table/{self.tables.ledger}": "Storage/Ledger",
            f"table/{self.tables.outbox}": "Storage/Outbox",
            f"queue/{WEBHOOK_QUEUE_NAME}": "Queues/Webhooks",
            f"queue/{DEAD_LETTER_QUEUE_NAME}": "Queues/DeadLetters",
            f"queue/{OUTBOX_FAILURES_QUEUE_NAME}": "OutboxStreamFailures",
            f"event-bus/{self.bus_name}": "Bus",
            **{
                f"secret/{name}": f"Secrets/{provider.capitalize()}Webhook"
                for provider, name in self.secret_names.items()
            },
            f"secret/{self.mercadopago_token_secret}": "Secrets/MercadopagoAccessToken",
            f"secret/{self.stripe_api_key_secret}": "Secrets/StripeApiKey",
            f"secret/{self.asaas_api_key_secret}": "Secrets/AsaasApiKey",
        }

    def environment(self) -> dict[str, str]:
        """What the stack gives each Lambda, pointed at the local server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            # boto3's per-service endpoints (`AWS_ENDPOINT_URL_<SERVICE ID>`): another process
            # for a split server, else this one (never a URL an earlier stack left behind)
            **{
                f"AWS_ENDPOINT_URL_{service_id}": _ROUTES.get(self.endpoint_url, {}).get(
                    service, self.endpoint_url
                )
                for service, service_id in SERVICE_IDS.items()
            },
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
            # One process runs every function: each one's settings, written from its model.
            **IngestSettings.variables(
                webhook_queue_url=self.queue_url, provider_secrets=self.secret_names
            ),
            **ProcessSettings.variables(
                ledger_table=self.tables.ledger,
                outbox_table=self.tables.outbox,
                mercadopago_access_token_secret=self.mercadopago_token_secret,
                stripe_api_key_secret=self.stripe_api_key_secret,
                asaas_api_key_secret=self.asaas_api_key_secret,
                # Waiting, in seconds instead of days: parked after 2 receives (3 s
                # visibility), unmatched after 120 s without a binding (the drill's late
                # payment comes after 18 s, and a loaded local server can take a minute more).
                park_after_receives=2,
            ),
            **WaitingSettings.variables(wait_limit_seconds=LOCAL_WAIT_LIMIT_SECONDS),
            # A drill's movements are a day old, and their last seconds ago: its first hourly
            # pass reads two days, up to now.
            **StatementSettings.variables(
                statement_settle_seconds=0,
                statement_window_seconds=2 * 86_400,
                # Each AWS call names its function by its thread (devstack/metering.py): the
                # calls the role is held to are then all the statement's.
                statement_booking_workers=1,
            ),
            **SweeperSettings.variables(
                outbox_failures_queue_url=self.outbox_failures_url,
                event_bus_name=self.bus_name,
                email_sender=EMAIL_SENDER,
                # Longer than a sweep's sends take on the busy local server, or the next sweep
                # sends them again.
                outbox_lease_seconds=5,
                # Retries 1 s, 2 s, then every 4 s: the product's minutes to an hour, in
                # seconds.
                outbox_backoff_base_seconds=1,
                outbox_backoff_cap_seconds=4,
                # A new item is in no index until its first try (it is the stream's); what is in
                # the index is the sweeper's once due: the grace only spaces a retry from the
                # last try.
                sweep_grace_seconds=1,
            ),
            "POWERTOOLS_TRACE_DISABLED": "true",
            # On: each function's EMF goes to its own file (devstack/metrics.py), not stdout.
            "POWERTOOLS_METRICS_DISABLED": "false",
            "POWERTOOLS_METRICS_NAMESPACE": "Umavez",
        }


SERVICE_IDS = {"dynamodb": "DYNAMODB", "dynamodbstreams": "DYNAMODB_STREAMS"}
# Per local server URL, the services another process serves (a split server: `LocalAws`).
_ROUTES: dict[str, dict[str, str]] = {}


def route_services(endpoint_url: str, elsewhere: dict[str, str]) -> None:
    """From now on, `client(service, endpoint_url)` goes to `elsewhere[service]` if named."""
    if elsewhere:
        _ROUTES[endpoint_url] = dict(elsewhere)
    else:
        _ROUTES.pop(endpoint_url, None)


def client(service: str, endpoint_url: str) -> Any:
    return boto3.client(  # type: ignore[call-overload]  # the service name is a variable
        service,
        endpoint_url=_ROUTES.get(endpoint_url, {}).get(service, endpoint_url),
        region_name=REGION,
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )


def provision(endpoint_url: str, names: TableNames | None = None) -> LocalResources:
    names = names or TableNames()
    dynamodb = client("dynamodb", endpoint_url)
    for request in create_table_requests(names):
        dynamodb.create_table(**request)
    sqs = client("sqs", endpoint_url)
    sized = {"MaximumMessageSize": str(WEBHOOK_MESSAGE_MAX_BYTES)}
    dead_letter_url = sqs.create_queue(QueueName=DEAD_LETTER_QUEUE_NAME, Attributes=sized)[
        "QueueUrl"
    ]
    dead_letter_arn = _arn(sqs, dead_letter_url)
    queue_url = sqs.create_queue(
        QueueName=WEBHOOK_QUEUE_NAME,
        Attributes={
            **sized,
            "VisibilityTimeout": str(LOCAL_VISIBILITY_TIMEOUT_SECONDS),
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dead_letter_arn, "maxReceiveCount": MAX_RECEIVE_COUNT}
            ),
        },
    )["QueueUrl"]
    outbox_failures_url = sqs.create_queue(QueueName=OUTBOX_FAILURES_QUEUE_NAME)["QueueUrl"]
    sink_queue_url = sqs.create_queue(QueueName="umavez-local-event-sink")["QueueUrl"]
    events = client("events", endpoint_url)
    bus_name = "umavez-local"
    events.create_event_bus(Name=bus_name)
    events.put_rule(
        Name="sink", EventBusName=bus_name, EventPattern=json.dumps({"source": ["umavez"]})
    )
    events.put_targets(
        Rule="sink", EventBusName=bus_name, Targets=[{"Id": "q", "Arn": _arn(sqs, sink_queue_url)}]
    )
    events.create_event_bus(Name=LOCAL_STRIPE_BUS)
    events.put_rule(
        Name="stripe-events",
        EventBusName=LOCAL_STRIPE_BUS,
        EventPattern=json.dumps({"source": [LOCAL_STRIPE_EVENT_SOURCE]}),
    )
    events.put_targets(
        Rule="stripe-events",
        EventBusName=LOCAL_STRIPE_BUS,
        Targets=[{"Id": "webhooks", "Arn": _arn(sqs, queue_url)}],
    )
    client("sesv2", endpoint_url).create_email_identity(EmailIdentity=EMAIL_SENDER)
    secrets = client("secretsmanager", endpoint_url)
    secret_names = {}
    for provider in PROVIDERS:
        name = f"umavez/local/{provider}/webhook"
        secrets.create_secret(
            Name=name, SecretString=json.dumps({"active": [DEVELOPMENT_SECRETS[provider]]})
        )
        secret_names[provider] = name
    token_secret = "umavez/local/mercadopago/access-token"
    secrets.create_secret(Name=token_secret, SecretString=MERCADOPAGO_DEVELOPMENT_TOKEN)
    stripe_key_secret = "umavez/local/stripe/api-key"
    secrets.create_secret(Name=stripe_key_secret, SecretString=STRIPE_DEVELOPMENT_API_KEY)
    secrets.create_secret(Name=ASAAS_API_KEY_SECRET, SecretString=ASAAS_DEVELOPMENT_API_KEY)
    return LocalResources(
        endpoint_url=endpoint_url,
        tables=names,
        queue_url=queue_url,
        dead_letter_url=dead_letter_url,
        outbox_failures_url=outbox_failures_url,
        sink_queue_url=sink_queue_url,
        bus_name=bus_name,
        secret_names=secret_names,
        mercadopago_token_secret=token_secret,
        stripe_api_key_secret=stripe_key_secret,
    )


def _arn(sqs: Any, queue_url: str) -> str:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])
    return str(attributes["Attributes"]["QueueArn"])


def put_stripe_event(endpoint_url: str, event: str) -> str:
    """Puts a Stripe event (snapshot or thin) on the local partner bus as Stripe's EventBridge
    destination does (source the partner event source, detail-type the event's type, detail
    the event); the
    entry's id. Raises ValueError if the body is no Stripe event, RuntimeError if the bus
    refused it."""
    detail = json.loads(event)
    if (
        not isinstance(detail, dict)
        or detail.get("object") not in STRIPE_EVENT_OBJECTS
        or not detail.get("type")
    ):
        raise ValueError(
            'not a Stripe event: it needs "object": "event" (or "v2.core.event", a thin one) '
            "and a type"
        )
    answer = client("events", endpoint_url).put_events(
        Entries=[
            {
                "Source": LOCAL_STRIPE_EVENT_SOURCE,
                "DetailType": str(detail["type"]),
                "Detail": event,
                "EventBusName": LOCAL_STRIPE_BUS,
            }
        ]
    )
    [entry] = answer["Entries"]
    if answer.get("FailedEntryCount") or "EventId" not in entry:
        raise RuntimeError(f"the local Stripe bus refused the event: {entry}")
    return str(entry["EventId"])
