"""`umavez serve` in a process of its own, as a person runs it in one shell while typing the
other commands in another."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devstack.resources import MERCADOPAGO_DEVELOPMENT_TOKEN
from devstack.server import STATS_PATH

REPOSITORY = Path(__file__).parents[2]
START_SECONDS = 90


@dataclass(frozen=True)
class Served:
    banner: str
    port: int

    @property
    def aws(self) -> str:
        return f"http://127.0.0.1:{self.port + 1}"

    @property
    def mercadopago_api(self) -> str:
        return f"http://127.0.0.1:{self.port + 2}"

    def options(self, provider: str = "mercadopago") -> list[str]:
        """What `send` needs to find a stack served on a port of its own."""
        front = f"http://127.0.0.1:{self.port}/webhooks/{provider}"
        return ["--endpoint-url", self.aws, "--url", front, "--api-url", self.mercadopago_api]

    def sqs_sends(self) -> int:
        with urllib.request.urlopen(self.aws + STATS_PATH, timeout=5) as response:  # noqa: S310
            return int(json.load(response)["requests"].get("SendMessage", 0))

    def fake_payment(self, payment_id: str) -> int:
        """The fake Mercado Pago API's status for GET /v1/payments/{id}."""
        request = urllib.request.Request(  # noqa: S310 - loopback
            f"{self.mercadopago_api}/v1/payments/{payment_id}",
            headers={"Authorization": f"Bearer {MERCADOPAGO_DEVELOPMENT_TOKEN}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return exc.code


def _three_free_ports() -> int:
    """A port P with P+1 and P+2 free too: serve's front, AWS and provider APIs."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        if port + 2 < 65536 and all(_free(port + n) for n in (1, 2)):
            return port
    raise RuntimeError("no three consecutive free ports")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@contextmanager
def serving() -> Iterator[Served]:
    port = _three_free_ports()
    # A session of its own: serve and the moto server it starts are stopped together.
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "ops.cli", "serve", "--port", str(port)],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        banner, deadline = "", time.monotonic() + START_SECONDS
        while "show order" not in banner and time.monotonic() < deadline:
            line = process.stdout.readline()
            if not line:
                break
            banner += line
        assert "show order" in banner, f"serve did not start: {banner!r}"
        yield Served(banner, port)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
