"""What a deployment can choose, read from CDK context (`cdk deploy -c key=value`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

PROVIDERS: Final = ("stripe", "mercadopago", "asaas")
# Powertools' public layer (it also brings pydantic and the X-Ray SDK). Match its version to
# the release pinned in pyproject.toml; see docs.powertools.aws.dev for the current number.
DEFAULT_POWERTOOLS_LAYER_VERSION: Final = 27


@dataclass(frozen=True)
class StackConfig:
    stage: str = "prod"
    alarm_email: str | None = None
    email_sender: str | None = None
    notify_url: str | None = None
    waf: bool = False
    powertools_layer_version: int = DEFAULT_POWERTOOLS_LAYER_VERSION
    process_max_concurrency: int = 5

    @property
    def retain_data(self) -> bool:
        """Anything but an explicit dev stage keeps its tables and secrets on delete."""
        return self.stage != "dev"

    @classmethod
    def from_context(cls, get: Any) -> StackConfig:
        """`get` is `app.node.try_get_context`."""

        def flag(name: str) -> bool:
            return str(get(name) or "false").lower() in {"1", "true", "yes"}

        return cls(
            stage=str(get("stage") or "prod"),
            alarm_email=get("alarmEmail"),
            email_sender=get("emailSender"),
            notify_url=get("notifyUrl"),
            waf=flag("waf"),
            powertools_layer_version=int(
                get("powertoolsLayerVersion") or DEFAULT_POWERTOOLS_LAYER_VERSION
            ),
            process_max_concurrency=int(get("processMaxConcurrency") or 5),
        )
