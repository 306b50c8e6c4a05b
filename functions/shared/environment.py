"""Each function's configuration as one model, read from its environment and validated once.

A field's alias is the environment variable's name, and this is the one place it is spelled:
the functions read their model (`from_env`), the CDK stack and the embedded stack write the
environment from the same model (`variables`), so a variable renamed or mistyped on either side
fails a test instead of a deployment. A value that does not parse is refused at the first
read with the variable's name, not used as a default. (Ingest keeps a model of its own without
pydantic: its cold start is on the provider's clock; functions/ingest/environment.py.)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from functions.shared.errors import SettingsError
from functions.shared.settings import (
    DEFAULT_OUTBOX_GIVE_UP_HOURS,
    DEFAULT_RETENTION_DAYS,
    OUTBOX_GIVE_UP_HOURS_ENV,
    PAYMENT_MODE_ENV,
    RETENTION_DAYS_ENV,
    WEBHOOK_QUEUE_URL_ENV,
    PaymentMode,
)
from functions.shared.tables import (
    DEFAULT_LEDGER_TABLE,
    DEFAULT_OUTBOX_TABLE,
    LEDGER_TABLE_ENV,
    OUTBOX_TABLE_ENV,
    TableNames,
)


class FunctionSettings(BaseModel):
    # Read by alias only: the variable's name, never the field's.
    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Self:
        try:
            return cls.model_validate(dict(environ))
        except ValidationError as exc:
            wrong = "; ".join(
                f"{'.'.join(str(p) for p in error['loc'])}: {error['msg']}"
                for error in exc.errors()
            )
            raise SettingsError(f"{cls.__name__} from the environment: {wrong}") from exc

    @classmethod
    def variables(cls, **values: object) -> dict[str, str]:
        """The environment that sets these fields (given by field name), as a stack writes it;
        a value of None is left out (the function's default applies)."""
        unknown = sorted(set(values) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no setting {', '.join(unknown)}")
        return {
            cls.model_fields[name].alias or name: str(value)
            for name, value in values.items()
            if value is not None
        }


class TablesSettings(FunctionSettings):
    """The tables every function but ingest reads, and how long what changed nothing is kept."""

    ledger_table: str = Field(DEFAULT_LEDGER_TABLE, alias=LEDGER_TABLE_ENV, min_length=1)
    outbox_table: str = Field(DEFAULT_OUTBOX_TABLE, alias=OUTBOX_TABLE_ENV, min_length=1)
    # DELIVERY audit records and sent outbox items expire (TTL) after this many days.
    retention_days: int = Field(DEFAULT_RETENTION_DAYS, alias=RETENTION_DAYS_ENV, ge=1)

    @property
    def tables(self) -> TableNames:
        return TableNames(self.ledger_table, self.outbox_table)

    @property
    def retention_seconds(self) -> int:
        return self.retention_days * 86_400


class SenderSettings(TablesSettings):
    """The outbox sender (stream handler and sweeper): its sinks and its send policy."""

    event_bus_name: str = Field("default", alias="EVENT_BUS_NAME")
    # SES from-address: e-mail is sent when set and the item has a recipient.
    email_sender: str | None = Field(None, alias="EMAIL_SENDER")
    email_configuration_set: str | None = Field(None, alias="EMAIL_CONFIGURATION_SET")
    notify_url: str | None = Field(None, alias="NOTIFY_URL")
    # The Secrets Manager secret holding the HTTP sink's signing secrets,
    # {"active": ["whsec_...", ...]}: every active one signs (several while rotating).
    notify_signing_secret: str | None = Field(None, alias="NOTIFY_SIGNING_SECRET")
    # Plain http to a loopback address: the embedded stack's own sink, nothing deployed.
    notify_allow_loopback_http: bool = Field(False, alias="NOTIFY_ALLOW_LOOPBACK_HTTP")
    # An item is dead when a send fails past this age, not after a number of attempts.
    outbox_give_up_hours: int = Field(
        DEFAULT_OUTBOX_GIVE_UP_HOURS, alias=OUTBOX_GIVE_UP_HOURS_ENV, ge=1
    )
    # Overrides of the send policy (the embedded stack shortens them to fit a drill).
    outbox_lease_seconds: int | None = Field(None, alias="OUTBOX_LEASE_SECONDS", ge=1)
    outbox_backoff_base_seconds: int | None = Field(None, alias="OUTBOX_BACKOFF_BASE_SECONDS", ge=1)
    outbox_backoff_cap_seconds: int | None = Field(None, alias="OUTBOX_BACKOFF_CAP_SECONDS", ge=1)


class SweeperSettings(SenderSettings):
    """The sweeper: the sender's, plus what it re-drives and where stranded records wait."""

    sweep_grace_seconds: int = Field(120, alias="SWEEP_GRACE_SECONDS", ge=0)
    outbox_failures_queue_url: str | None = Field(None, alias="OUTBOX_FAILURES_QUEUE_URL")


class ProviderApiSettings(TablesSettings):
    """The provider APIs a function may read: each is enabled when its secret is named."""

    # Secrets holding a Mercado Pago access token and a read-only Stripe key.
    mercadopago_access_token_secret: str | None = Field(
        None, alias="MERCADOPAGO_ACCESS_TOKEN_SECRET"
    )
    stripe_api_key_secret: str | None = Field(None, alias="STRIPE_API_KEY_SECRET")
    # The secret holding an Asaas API key: Asaas events are booked as its API answers them,
    # and refused (DLQ) without it.
    asaas_api_key_secret: str | None = Field(None, alias="ASAAS_API_KEY_SECRET")
    mercadopago_api_url: str | None = Field(None, alias="MERCADOPAGO_API_URL")
    stripe_api_url: str | None = Field(None, alias="STRIPE_API_URL")
    asaas_api_url: str | None = Field(None, alias="ASAAS_API_URL")

    def api_of(self, provider: str) -> tuple[str | None, str | None]:
        """The secret naming `provider`'s credential, and its API's address (None: the
        provider's own)."""
        return {
            "stripe": (self.stripe_api_key_secret, self.stripe_api_url),
            "mercadopago": (self.mercadopago_access_token_secret, self.mercadopago_api_url),
            "asaas": (self.asaas_api_key_secret, self.asaas_api_url),
        }[provider]


class ProcessSettings(ProviderApiSettings):
    """The process Lambda: which payment mode it applies and the provider APIs it may read."""

    payment_mode: PaymentMode = Field(PaymentMode.TEST, alias=PAYMENT_MODE_ENV)
    park_after_receives: int | None = Field(None, alias="PARK_AFTER_RECEIVES", ge=1)


class StatementSettings(ProviderApiSettings):
    """The scheduled statement pass: the ledger it books into, the provider APIs it reads."""

    # How long a window's end must be past before it is read (None: each provider's own lag);
    # the embedded stack reads up to now, its movements being seconds old.
    statement_settle_seconds: int | None = Field(None, alias="STATEMENT_SETTLE_SECONDS", ge=0)
    # The longest window a pass reads, and the first one's (None: an hour); the embedded
    # stack's first pass reads its whole drill, whose events are a day old.
    statement_window_seconds: int | None = Field(None, alias="STATEMENT_WINDOW_SECONDS", ge=60)
    # Payments booked at once (None: BOOKING_WORKERS); the embedded stack names each AWS call's
    # function by its thread, and books one at a time.
    statement_booking_workers: int | None = Field(None, alias="STATEMENT_BOOKING_WORKERS", ge=1)


class WaitingSettings(TablesSettings):
    """The waiting room (the scheduled re-drive, and process when it parks or watches)."""

    webhook_queue_url: str = Field("", alias=WEBHOOK_QUEUE_URL_ENV)
    wait_limit_seconds: int | None = Field(None, alias="WAIT_LIMIT_SECONDS", ge=1)
    recheck_after_seconds: int | None = Field(None, alias="RECHECK_AFTER_SECONDS", ge=1)


class ReconcileSettings(TablesSettings):
    """The scheduled reconciliation reads the tables only."""

    # How far behind now a run reads (None: SETTLE_SECONDS, for the index's eventual
    # consistency); `umavez cost`'s stack reads its own writes and waits out no margin.
    reconcile_settle_seconds: float | None = Field(None, alias="RECONCILE_SETTLE_SECONDS", ge=0)
