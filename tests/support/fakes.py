"""In-memory stand-ins for ingest's adapters, for tests that need thousands of requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from functions.outbox.channels import Channel, ChannelError
from functions.shared.outbox import OutboxItem


@dataclass
class RecordingQueue:
    sent: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def send(self, body: str, attributes: Mapping[str, str]) -> str:
        self.sent.append((body, dict(attributes)))
        return f"msg-{len(self.sent)}"


@dataclass
class StaticSecrets:
    by_provider: dict[str, tuple[str, ...]]

    def active_secrets(self, provider: str) -> tuple[str, ...]:
        return self.by_provider[provider]


@dataclass
class FlakyChannel:
    """A real channel that fails its first `failures` sends, like a sink having a bad minute."""

    inner: Channel
    failures: int

    @property
    def name(self) -> str:
        return self.inner.name

    def applies_to(self, item: OutboxItem) -> bool:
        return self.inner.applies_to(item)

    def send(self, item: OutboxItem) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ChannelError(f"{self.inner.name} unavailable (injected)")
        self.inner.send(item)
