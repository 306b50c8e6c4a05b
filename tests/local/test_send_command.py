"""`umavez serve` as a person runs it: its banner says what a person needs."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_stack.resources import MERCADOPAGO_DEVELOPMENT_TOKEN

REPOSITORY = Path(__file__).parents[2]
START_SECONDS = 90


@dataclass(frozen=True)
class Served:
    banner: str
    port: int

    @property
    def mercadopago_api(self) -> str:
        return f"http://127.0.0.1:{self.port + 2}"


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


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    port = _three_free_ports()
    # A session of its own: serve and the moto server it starts are stopped together.
    process = subprocess.Popen(  # noqa: S603 - our own CLI
        [sys.executable, "-m", "local_stack.cli", "serve", "--port", str(port)],
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


def test_serve_prints_the_fake_mercadopago_api_and_its_token(served: Served) -> None:
    # Given serve's stack, Then its banner says where the fake Mercado Pago API is, and its token
    assert f"{served.mercadopago_api}/v1/payments/ID" in served.banner
    assert MERCADOPAGO_DEVELOPMENT_TOKEN in served.banner
