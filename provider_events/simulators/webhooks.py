"""What a provider simulator emits: one webhook, as the provider would post it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Webhook:
    provider: str
    event_type: str
    body: str
    created: int  # provider time, Unix seconds
