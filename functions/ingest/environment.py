"""Ingest's environment as one model, without pydantic: ingest answers on the provider's clock,
and pydantic's import would add ~170 ms to its cold start (docs/performance.md). Same shape as
the other functions' models (functions/shared/environment.py): read once by `from_env`, written
by the stacks through `variables`, each variable's name spelled here only."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import ClassVar

from functions.shared.errors import SettingsError
from functions.shared.settings import PAYMENT_MODE_ENV, WEBHOOK_QUEUE_URL_ENV, PaymentMode


@dataclass(frozen=True)
class IngestSettings:
    webhook_queue_url: str
    # Per provider, the secret holding its webhook secrets (a provider not named is refused).
    provider_secrets: dict[str, str]
    payment_mode: PaymentMode = PaymentMode.TEST
    # Addresses or CIDRs Asaas webhooks may come from; empty: from anywhere (the default).
    asaas_source_ips: tuple[str, ...] = ()

    VARIABLES: ClassVar[dict[str, str]] = {
        "webhook_queue_url": WEBHOOK_QUEUE_URL_ENV,
        "provider_secrets": "PROVIDER_SECRETS",
        "payment_mode": PAYMENT_MODE_ENV,
        "asaas_source_ips": "ASAAS_SOURCE_IPS",
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> IngestSettings:
        names = cls.VARIABLES
        missing = [
            names[f] for f in ("webhook_queue_url", "provider_secrets") if not environ.get(names[f])
        ]
        if missing:
            raise SettingsError(
                f"IngestSettings from the environment: {', '.join(missing)} not set"
            )
        try:
            secrets = json.loads(environ[names["provider_secrets"]])
            mode = PaymentMode(environ.get(names["payment_mode"], PaymentMode.TEST.value))
        except ValueError as exc:
            raise SettingsError(f"IngestSettings from the environment: {exc}") from exc
        if not isinstance(secrets, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in secrets.items()
        ):
            raise SettingsError("IngestSettings: PROVIDER_SECRETS is not an object of names")
        sources = tuple(environ.get(names["asaas_source_ips"], "").replace(",", " ").split())
        for source in sources:
            try:
                ipaddress.ip_network(source, strict=False)
            except ValueError as exc:
                raise SettingsError(f"IngestSettings: ASAAS_SOURCE_IPS: {exc}") from exc
        return cls(environ[names["webhook_queue_url"]], secrets, mode, sources)

    @classmethod
    def variables(cls, **values: object) -> dict[str, str]:
        """The environment that sets these fields (by field name), as a stack writes it."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"IngestSettings has no setting {', '.join(unknown)}")
        return {
            cls.VARIABLES[name]: _text(value)
            for name, value in values.items()
            if value is not None and value != ()
        }


def _text(value: object) -> str:
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)
