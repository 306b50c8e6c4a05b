"""How a replay's messages are grouped into SendMessageBatch requests."""

from __future__ import annotations

from functions.ingest.adapters import BATCH_BYTES, BATCH_ENTRIES, _batches

ATTRIBUTES = {"provider": "stripe", "event_id": "evt_1", "event_type": "charge.refunded"}


def test_small_messages_go_ten_a_request_in_their_order() -> None:
    # Given 23 small messages
    messages = [(f"body-{n}", ATTRIBUTES) for n in range(23)]

    # When they are grouped
    batches = list(_batches(messages))

    # Then 10, 10 and 3, in the order given
    assert [len(b) for b in batches] == [BATCH_ENTRIES, BATCH_ENTRIES, 3]
    assert [m for b in batches for m in b] == messages


def test_large_messages_go_as_many_a_request_as_fit_in_256_kib() -> None:
    # Given five messages of 100 KiB, and one over the limit on its own
    large = "x" * (100 * 1024)
    messages = [(large, ATTRIBUTES)] * 5 + [("y" * (BATCH_BYTES + 1), ATTRIBUTES)]

    # When they are grouped
    batches = list(_batches(messages))

    # Then two a request (three would pass 256 KiB), and the oversized one alone: SQS refuses
    # that request, and no other
    assert [len(b) for b in batches] == [2, 2, 1, 1]
    assert batches[-1] == [messages[-1]]
