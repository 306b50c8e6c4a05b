"""What a deployment can choose, read from CDK context (`cdk deploy -c key=value`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

PROVIDERS: Final = ("stripe", "mercadopago", "asaas")


class ConfigError(ValueError):
    """A deployment asked for something that cannot work; the message says how to fix it."""


@dataclass(frozen=True)
class StackConfig:
    stage: str = "prod"
    alarm_email: str | None = None
    email_sender: str | None = None
    notify_url: str | None = None
    waf: bool = False
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

        if get("powertoolsLayerVersion") is not None:
            raise ConfigError(
                "powertoolsLayerVersion is gone: the layer is the one AWS publishes for the"
                " Powertools release pinned in pyproject.toml"
            )
        return cls(
            stage=str(get("stage") or "prod"),
            alarm_email=get("alarmEmail"),
            email_sender=get("emailSender"),
            notify_url=get("notifyUrl"),
            waf=flag("waf"),
            process_max_concurrency=int(get("processMaxConcurrency") or 5),
        )
