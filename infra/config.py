"""What a deployment can choose, read from CDK context (`cdk deploy -c key=value`)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from email.utils import getaddresses
from enum import StrEnum
from typing import Any, Final, TypeVar

from functions.asaas.signature import PUBLISHED_SOURCE_IPS
from functions.shared import settings
from functions.shared.settings import PaymentMode
from infra.mappings import DEFAULT_PROCESS_MAX_CONCURRENCY

PROVIDERS: Final = ("stripe", "mercadopago", "asaas")
PRODUCTION: Final = "prod"


class StripeIngress(StrEnum):
    WEBHOOK = "webhook"
    EVENTBRIDGE = "eventbridge"
    BOTH = "both"

    @property
    def by_webhook(self) -> bool:
        return self is not StripeIngress.EVENTBRIDGE

    @property
    def by_eventbridge(self) -> bool:
        return self is not StripeIngress.WEBHOOK


# The name of the partner event source Stripe's event destination creates.
STRIPE_EVENT_SOURCE: Final = re.compile(r"aws\.partner/stripe\.com/[A-Za-z0-9_.-]{1,200}")


class ConfigError(ValueError):
    """A deployment asked for something that cannot work; the message says how to fix it."""


class ApiType(StrEnum):
    """Which API Gateway fronts ingest (docs/deploy.md): an HTTP API (v2, payload format 2.0,
    the cheaper and faster one) or a REST API (v1), the only one AWS WAF can attach to."""

    HTTP = "http"
    REST = "rest"


# The lean choice: $1.00 per million requests instead of $3.50, and less latency before ingest.
DEFAULT_API_TYPE: Final = ApiType.HTTP
WAF_NEEDS_REST: Final = (
    "waf=true needs apiType=rest: AWS WAF cannot be attached to an HTTP API. Pass"
    " -c apiType=rest -c waf=true (apiType defaults to http outside prod), or drop waf"
)
# Production is protected per client by default: an HTTP API is throttled as a whole and WAF
# cannot attach to it, so one sender of unsigned POSTs would get the providers' deliveries
# answered 429. Prod synthesizes a REST API behind WAF (its per-IP rate rule) unless this flag
# says the operator accepts that.
ALLOW_UNPROTECTED_PROD: Final = "allowUnprotectedProd"
UNPROTECTED_PROD: Final = (
    "stage prod takes webhooks behind AWS WAF's per-IP rate limit: without it the whole API is"
    " throttled as one, and one sender of unsigned POSTs gets the providers' deliveries"
    " answered 429. Prod defaults to -c apiType=rest -c waf=true (list the providers' webhook"
    " addresses with -c providerIpAllowList=...); pass -c "
    f"{ALLOW_UNPROTECTED_PROD}=true to deploy prod without WAF (an HTTP API by default)"
)


# What AWS accepts as an SQS event source mapping's MaximumConcurrency.
PROCESS_MAX_CONCURRENCY_RANGE: Final = (2, 1000)

# 1% of webhooks: a trace a second at 100 webhooks/s, $0.05 per million events recorded.
DEFAULT_XRAY_SAMPLING: Final = 0.01


@dataclass(frozen=True)
class StackConfig:
    stage: str = PRODUCTION
    alarm_email: str | None = None
    # Production alarms must reach a person: without a subscription, synth fails unless this
    # says the operator subscribes the topic some other way.
    allow_no_alarm_subscription: bool = False
    email_sender: str | None = None
    # The SES configuration set the sender's identity uses (its default one, or one to name on
    # each send): SES checks ses:SendEmail on it too, so the senders must be granted it.
    email_configuration_set: str | None = None
    notify_url: str | None = None
    api_type: ApiType = DEFAULT_API_TYPE
    waf: bool = False
    # Prod without WAF (UNPROTECTED_PROD says what that costs): only when this says so.
    allow_unprotected_prod: bool = False
    # CIDRs the WAF's per-IP rate rule never counts: the providers' published webhook sources.
    provider_ip_allow_list: tuple[str, ...] = ()
    # Ingest accepts Asaas webhooks from these sources only (empty: from anywhere).
    asaas_source_ips: tuple[str, ...] = ()
    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    # None: live in prod, test elsewhere (a test stack never applies live money by default).
    stripe_mode: PaymentMode | None = None
    retention_days: int = settings.DEFAULT_RETENTION_DAYS
    outbox_give_up_hours: int = settings.DEFAULT_OUTBOX_GIVE_UP_HOURS
    # Share of webhooks traced where X-Ray lets it be chosen (the REST stage's sampling rule);
    # 0 turns tracing off. Traces Lambda starts itself are sampled at AWS's fixed rate.
    xray_sampling: float = DEFAULT_XRAY_SAMPLING
    # How Stripe's events reach the stack: its webhook endpoint, an EventBridge event
    # destination (the partner event source `stripe_event_source`), or both at once.
    stripe_ingress: StripeIngress = StripeIngress.WEBHOOK
    stripe_event_source: str | None = None

    def __post_init__(self) -> None:
        if self.stripe_ingress is not StripeIngress.WEBHOOK and not (
            self.stripe_event_source and STRIPE_EVENT_SOURCE.fullmatch(self.stripe_event_source)
        ):
            raise ConfigError(
                f"stripeIngress={self.stripe_ingress.value} needs -c stripeEventSource="
                "aws.partner/stripe.com/<the event destination's id>, the partner event source"
                " Stripe created in this account (EventBridge > Partner event sources), not "
                f"{self.stripe_event_source!r}"
            )
        if self.stage == PRODUCTION and not (self.alarm_email or self.allow_no_alarm_subscription):
            raise ConfigError(
                "stage prod needs someone to receive its alarms: pass"
                " -c alarmEmail=you@example.com, or -c allowNoAlarmSubscription=true if you"
                " subscribe the AlarmTopicArn output yourself"
            )
        if self.email_sender:
            sender_identities(self.email_sender)  # a malformed one fails synth, not every send
        if self.email_configuration_set and not self.email_sender:
            raise ConfigError(
                "emailConfigurationSet needs emailSender: the configuration set is the one"
                " the sender's SES identity sends with"
            )
        if self.notify_url and not self.notify_url.startswith("https://"):
            # Notifications carry money and customers, and are signed but not encrypted.
            raise ConfigError(
                "notifyUrl must be an https:// URL: notifications are never sent in the clear"
            )
        if self.waf and self.api_type is ApiType.HTTP:
            raise ConfigError(WAF_NEEDS_REST)
        if self.stage == PRODUCTION and not (self.waf or self.allow_unprotected_prod):
            raise ConfigError(UNPROTECTED_PROD)
        if not 0 <= self.xray_sampling <= 1:
            raise ConfigError(f"xraySampling must be between 0 and 1, not {self.xray_sampling}")
        for name in ("retention_days", "outbox_give_up_hours"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be positive, not {getattr(self, name)}")
        low, high = PROCESS_MAX_CONCURRENCY_RANGE
        if not low <= self.process_max_concurrency <= high:
            raise ConfigError(
                f"processMaxConcurrency must be from {low} to {high} (the range AWS accepts for"
                f" an SQS event source's maximum concurrency), not {self.process_max_concurrency}"
            )

    @property
    def retain_data(self) -> bool:
        """Anything but an explicit dev stage keeps its tables, queues and secrets on delete."""
        return self.stage != "dev"

    @property
    def payment_mode(self) -> PaymentMode:
        if self.stripe_mode is not None:
            return self.stripe_mode
        return PaymentMode.LIVE if self.stage == PRODUCTION else PaymentMode.TEST

    @classmethod
    def from_context(cls, get: Any) -> StackConfig:
        """`get` is `app.node.try_get_context`."""

        def flag(name: str) -> bool:
            return str(get(name) or "false").lower() in {"1", "true", "yes"}

        def number(name: str, default: int) -> int:
            value = get(name)
            if value is None:
                return default
            try:
                return int(value)
            except ValueError as exc:
                raise ConfigError(f"{name} must be a whole number, not {value!r}") from exc

        if get("powertoolsLayerVersion") is not None:
            raise ConfigError(
                "powertoolsLayerVersion is gone: the layer is the one AWS publishes for the"
                " Powertools release pinned in pyproject.toml"
            )
        stage = str(get("stage") or PRODUCTION)
        # Prod is a REST API behind WAF unless the operator opts out; elsewhere the lean one.
        protected = stage == PRODUCTION and not flag(ALLOW_UNPROTECTED_PROD)
        api_type = _api_type(get("apiType"), ApiType.REST if protected else DEFAULT_API_TYPE)
        waf = flag("waf") if get("waf") is not None else protected and api_type is ApiType.REST
        return cls(
            stage=stage,
            alarm_email=get("alarmEmail"),
            allow_no_alarm_subscription=flag("allowNoAlarmSubscription"),
            email_sender=get("emailSender"),
            email_configuration_set=get("emailConfigurationSet"),
            notify_url=get("notifyUrl"),
            api_type=api_type,
            waf=waf,
            allow_unprotected_prod=flag(ALLOW_UNPROTECTED_PROD),
            provider_ip_allow_list=cidrs(get("providerIpAllowList")),
            asaas_source_ips=_asaas_sources(get("asaasSourceIps")),
            process_max_concurrency=number(
                "processMaxConcurrency", DEFAULT_PROCESS_MAX_CONCURRENCY
            ),
            stripe_mode=_payment_mode(get("stripeMode")),
            retention_days=number("retentionDays", settings.DEFAULT_RETENTION_DAYS),
            outbox_give_up_hours=number("outboxGiveUpHours", settings.DEFAULT_OUTBOX_GIVE_UP_HOURS),
            xray_sampling=_share("xraySampling", get("xraySampling"), DEFAULT_XRAY_SAMPLING),
            stripe_ingress=_choice("stripeIngress", get("stripeIngress"), StripeIngress)
            or StripeIngress.WEBHOOK,
            stripe_event_source=get("stripeEventSource"),
        )


# What SES takes as a sender's domain identity: dot-separated labels of letters, digits and
# hyphens. The local part only needs to be there: SES checks the rest when it verifies it.
_DOMAIN = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))+$")


def sender_identities(sender: str) -> tuple[str, str]:
    """The SES identities a sender sends as: its address, and the address's domain.

    `emailSender` is what the senders pass SES as FromEmailAddress, so it may carry a display
    name (`Loja <loja@example.com>`); SES authorizes the send as the bare address when that is
    verified, else as its domain, never as the display name. One address, or a ConfigError that
    says what was expected."""
    parsed = getaddresses([sender])
    address = parsed[0][1] if len(parsed) == 1 else ""
    local, _, domain = address.rpartition("@")
    # The address as written, not as the parser mended it (an unclosed <, a space dropped).
    written = sender.rstrip().endswith(f"<{address}>") if "<" in sender else sender.strip()
    malformed = not local or "@" in local or any(c.isspace() for c in local)
    if written not in (True, address) or malformed or not _DOMAIN.match(domain):
        raise ConfigError(
            "emailSender must be one e-mail address, bare or with a display name"
            f" (loja@example.com or 'Loja <loja@example.com>'), not {sender!r}"
        )
    return address, domain


def cidrs(value: str | list[str] | None, name: str = "providerIpAllowList") -> tuple[str, ...]:
    """Addresses or CIDRs, comma- or space-separated (or a JSON list in cdk.json), as CIDRs."""
    if not value:
        return ()
    entries = value.replace(",", " ").split() if isinstance(value, str) else value
    try:
        return tuple(str(ipaddress.ip_network(entry.strip(), strict=False)) for entry in entries)
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from exc


def _asaas_sources(value: str | list[str] | None) -> tuple[str, ...]:
    """`published`: the addresses Asaas publishes for its production webhooks; else CIDRs."""
    if isinstance(value, str) and value.strip().lower() == "published":
        return cidrs(list(PUBLISHED_SOURCE_IPS), "asaasSourceIps")
    return cidrs(value, "asaasSourceIps")


def _share(name: str, value: object, default: float) -> float:
    if value is None:
        return default
    try:
        return float(str(value))
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number between 0 and 1, not {value!r}") from exc


E = TypeVar("E", ApiType, PaymentMode, StripeIngress)


def _choice(name: str, value: str | None, choices: type[E]) -> E | None:
    """One of an enum's values, case-insensitive; None when not given; else a clear error."""
    if value is None:
        return None
    try:
        return choices(str(value).lower())
    except ValueError as exc:
        allowed = "|".join(c.value for c in choices)
        raise ConfigError(f"{name} must be {allowed}, not {value!r}") from exc


def _api_type(value: str | None, default: ApiType) -> ApiType:
    return _choice("apiType", value, ApiType) or default


def _payment_mode(value: str | None) -> PaymentMode | None:
    return _choice("stripeMode", value, PaymentMode)
