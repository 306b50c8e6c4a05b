"""Injected sink faults: a channel wrapper that fails before a send or crashes after one."""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from functions.outbox.channels import Channel, ChannelError
from functions.shared.outbox import EMAIL_CHANNEL, OutboxItem

Decision = Callable[[], bool]


class SimulatedCrashError(Exception):
    """The sender process died here (injected): nothing after this point ran."""


def never() -> bool:
    return False


def first(count: int) -> Decision:
    """True for the first `count` calls, then False: a sink having a bad minute."""
    remaining = count

    def decide() -> bool:
        nonlocal remaining
        remaining -= 1
        return remaining >= 0

    return decide


def every(nth: int) -> Decision:
    """True on every `nth` call (never for 0): a fault a short run still meets, whatever the
    threads' order."""
    calls = 0
    lock = threading.Lock()

    def decide() -> bool:
        nonlocal calls
        with lock:
            calls += 1
            return nth > 0 and calls % nth == 0

    return decide


@dataclass
class Chance:
    """True with probability `share`, from a seeded generator shared by threads."""

    share: float
    rng: random.Random
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self) -> bool:
        with self.lock:
            return self.rng.random() < self.share


@dataclass
class FaultyChannel:
    inner: Channel
    fails: Decision = never
    crashes_after_send: Decision = never

    @property
    def name(self) -> str:
        return self.inner.name

    def applies_to(self, item: OutboxItem) -> bool:
        return self.inner.applies_to(item)

    def send(self, item: OutboxItem) -> None:
        if self.fails():
            if item.recipient and self.inner.name == EMAIL_CHANNEL:
                # As SES's sandbox refuses a recipient: the message names the address, which
                # must reach no log line and no stored error (the drill checks the logs).
                raise ChannelError(
                    "SES: MessageRejected: Email address is not verified. The following"
                    f" identities failed the check in region us-east-1: {item.recipient}"
                    " (injected)"
                )
            raise ChannelError(f"{self.inner.name} unavailable (injected)")
        self.inner.send(item)
        if self.crashes_after_send():
            raise SimulatedCrashError(f"crashed after the {self.inner.name} send (injected)")
