"""In-memory stand-ins for ingest's adapters, for tests that need thousands of requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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
