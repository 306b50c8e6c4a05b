"""What becomes of a record that raised, decided without a queue: an unbound entry is
redelivered, then parked; a transient error is redelivered; anything else fails towards the
DLQ. Only the failures record their reason."""

from __future__ import annotations

import pytest

from functions.asaas.api import AsaasApiNotConfiguredError
from functions.process.disposition import Disposition, disposition
from functions.shared.domain import Outcome
from functions.shared.errors import MalformedEventError, OrderNotYetKnownError
from functions.shared.provider_api import ProviderApiUnavailableError

UNBOUND = OrderNotYetKnownError("pi_1 names no order yet")


@pytest.mark.parametrize(
    ("receives", "expected"),
    [(1, Disposition.AWAIT_BINDING), (2, Disposition.AWAIT_BINDING), (3, Disposition.PARK)],
)
def test_an_unbound_entry_is_redelivered_until_its_park_receive_then_parked(
    receives: int, expected: Disposition
) -> None:
    # Given an entry whose order is not bound, on a stack that parks from the third receive
    # When it is received the n-th time
    decided = disposition(UNBOUND, receives, park_after=3)

    # Then SQS redelivers it until then, and from then on it waits in the waiting room,
    # counted as waiting: never a failure, never a reason recorded
    assert decided is expected
    assert decided.outcome is (Outcome.WAITING if expected is Disposition.PARK else Outcome.RETRIED)
    assert not decided.is_failure


def test_without_a_waiting_room_an_unbound_entry_is_only_ever_redelivered() -> None:
    # Given no waiting room (park_after None), When received many times
    # Then it is redelivered every time
    assert {disposition(UNBOUND, n, None) for n in range(1, 50)} == {Disposition.AWAIT_BINDING}


def test_a_transient_error_is_retried_and_anything_else_fails_both_with_their_reason() -> None:
    # Given a provider API that cannot answer now, a malformed payload, a missing key, a bug
    errors = {
        "transient": ProviderApiUnavailableError("answered 503", status=503),
        "malformed": MalformedEventError("not JSON"),
        "unconfigured": AsaasApiNotConfiguredError("no key"),
        "bug": KeyError("x"),
    }

    # When each raises on its fifth receive
    decided = {name: disposition(error, 5, park_after=3) for name, error in errors.items()}

    # Then only the transient one is a retry; all four record their reason for the dead letter
    assert decided == {
        "transient": Disposition.RETRY,
        "malformed": Disposition.FAIL,
        "unconfigured": Disposition.FAIL,
        "bug": Disposition.FAIL,
    }
    assert all(d.is_failure for d in decided.values())
    assert decided["bug"].outcome is Outcome.FAILED
