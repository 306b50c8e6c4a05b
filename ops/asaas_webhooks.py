"""Whether Asaas is delivering to umavez: the account's webhooks, as its webhooks API tells them
(what `umavez status` and `umavez preflight` read when an Asaas API key is configured).

Asaas pauses a webhook's queue ("fila de sincronização interrompida": `interrupted: true`)
after 15 consecutive failed deliveries; its events keep being generated and wait, and those
waiting more than 14 days are deleted for good
(https://docs.asaas.com/docs/webhooks-queue-paused, https://docs.asaas.com/docs/about-webhooks).
`GET /v3/webhooks` lists the account's webhooks (`offset`/`limit`, `hasMore`), each with its
`id`, `name`, `url`, `enabled` and `interrupted`
(https://docs.asaas.com/docs/create-new-webhook-via-api); it is resumed with `PUT
/v3/webhooks/{id}` and `{"interrupted": false}`, or from the dashboard (Integrations >
Webhooks), once its deliveries would succeed
(https://docs.asaas.com/docs/how-to-reactivate-an-interrupted-queue): Asaas then sends what it
holds, in order. What it deleted, only `umavez replay asaas` brings back.

Umavez's webhook is the one whose URL ends in `/webhooks/asaas` (ingest's route); the account's
other webhooks are listed, not judged.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError
from pydantic import BaseModel, ConfigDict, ValidationError

from functions.asaas.api import BASE_URL, PLACEHOLDER, AsaasApi
from functions.asaas.models import BRAZIL
from functions.shared.errors import UmavezError
from functions.shared.provider_api import ProviderApiUnavailableError

UMAVEZ_PATH: Final = "/webhooks/asaas"
HELD_FOR: Final = timedelta(days=14)  # how long Asaas keeps the events of a paused queue
PAGE_SIZE: Final = 100  # Asaas's most per page
SECRET: Final = "asaas/api-key"  # noqa: S105 - the secret's name, not its value


class SecretUnreadableError(UmavezError):
    """The stack's Asaas key could not be read (not allowed, AWS unreachable)."""


def stack_key(secretsmanager: Any, secret_id: str) -> Callable[[], str]:
    """The key in the secret, read when called; empty when the secret does not exist (not
    configured, as its placeholder is)."""

    def read() -> str:
        try:
            return str(secretsmanager.get_secret_value(SecretId=secret_id)["SecretString"])
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ResourceNotFoundException":
                return ""
            raise SecretUnreadableError(f"cannot read the secret {secret_id}: {exc}") from exc
        except BotoCoreError as exc:
            raise SecretUnreadableError(f"cannot read the secret {secret_id}: {exc}") from exc

    return read


class AsaasWebhook(BaseModel):
    """One of the account's webhooks, as `GET /v3/webhooks` answers it."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    id: str
    name: str | None = None
    url: str = ""
    enabled: bool = True
    interrupted: bool = False
    penalizedRequestsCount: int | None = None

    @property
    def umavez(self) -> bool:
        return urllib.parse.urlsplit(self.url).path.rstrip("/").endswith(UMAVEZ_PATH)

    @property
    def stopped(self) -> bool:
        return self.interrupted or not self.enabled

    def shown(self) -> str:
        return f"{self.name or 'webhook'} ({self.id})"


@dataclass(frozen=True)
class AsaasWebhooks:
    """The account's webhooks; `configured` False when no Asaas API key is set (nothing read)."""

    configured: bool
    webhooks: tuple[AsaasWebhook, ...] = ()

    @property
    def umavez(self) -> tuple[AsaasWebhook, ...]:
        return tuple(w for w in self.webhooks if w.umavez)

    @property
    def stopped(self) -> tuple[AsaasWebhook, ...]:
        return tuple(w for w in self.umavez if w.stopped)


def read_webhooks(
    api_key: Callable[[], str], base_url: str = BASE_URL, timeout_seconds: float = 10.0
) -> AsaasWebhooks:
    """Every page of `GET /v3/webhooks`. Raises what the API client raises (refused: the key is
    wrong; unavailable: Asaas did not answer, or answered no list)."""
    key = api_key()
    if not key or key == PLACEHOLDER:
        return AsaasWebhooks(configured=False)
    api = AsaasApi(lambda: key, base_url, timeout_seconds)
    webhooks: list[AsaasWebhook] = []
    while True:
        query = urllib.parse.urlencode({"offset": len(webhooks), "limit": PAGE_SIZE})
        page: Any = api.get(f"/v3/webhooks?{query}", "listing Asaas's webhooks") or {}
        data = page.get("data")
        try:
            webhooks += [AsaasWebhook.model_validate(w) for w in data or []]
        except (ValidationError, TypeError) as exc:
            raise ProviderApiUnavailableError("Asaas's webhooks API answered no webhooks") from exc
        if not page.get("hasMore") or not data:
            return AsaasWebhooks(configured=True, webhooks=tuple(webhooks))


def advice(webhook: AsaasWebhook, now: float) -> str:
    """What to do about a stopped webhook: resume it, then replay what Asaas will not send."""
    held_since = (datetime.fromtimestamp(now, BRAZIL) - HELD_FOR).date().isoformat()
    if webhook.interrupted:
        return (
            f"{webhook.shown()} is interrupted (Asaas's queue paused after 15 failed deliveries):"
            f" once deliveries succeed, resume it with PUT /v3/webhooks/{webhook.id}"
            ' {"interrupted": false} or the dashboard (Integrations > Webhooks); then'
            " `umavez replay asaas --since <the day it stopped: Asaas e-mailed then>` books what"
            f" Asaas deleted (events held over 14 days: before {held_since}) and what it still"
            " holds, without waiting for the queue"
        )
    return (
        f"{webhook.shown()} is disabled (Asaas sends it nothing): enable it with PUT"
        f' /v3/webhooks/{webhook.id} {{"enabled": true}} or the dashboard (Integrations >'
        " Webhooks); then `umavez replay asaas --since <the day it was disabled>`"
    )


def no_webhook_to_umavez(state: AsaasWebhooks) -> str:
    return (
        f"none of the account's {len(state.webhooks)} webhooks sends to …{UMAVEZ_PATH}: Asaas"
        " delivers nothing to umavez (POST /v3/webhooks, or the dashboard: docs/deploy.md)"
    )
