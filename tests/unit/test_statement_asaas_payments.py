"""The payments Asaas's statement names, read side by side and once each
(functions/statement/asaas.py `payments_read`)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from functions.statement.asaas import PAYMENT_READERS, FinancialTransaction, payments_read


def lines_naming(*payment_ids: str) -> list[FinancialTransaction]:
    """A receipt and its fee for each payment: two lines naming it."""
    return [
        FinancialTransaction(
            id=f"ftn_{kind}_{p}", value=1, type=kind, date="2026-11-29", paymentId=p
        )
        for p in payment_ids
        for kind in ("PAYMENT_RECEIVED", "PAYMENT_FEE")
    ]


def test_the_payments_a_day_names_are_read_side_by_side_and_once_each() -> None:
    # Given a day naming as many payments as the read asks for at once, and an API whose every
    # answer waits until that many requests are in flight together
    ids = [f"pay_{n:012d}" for n in range(PAYMENT_READERS)]
    together = threading.Barrier(PAYMENT_READERS, timeout=5)
    asked: list[str] = []

    def payment(payment_id: str) -> Mapping[str, Any] | None:
        asked.append(payment_id)
        together.wait()  # raises BrokenBarrierError unless the reads overlap
        return {"id": payment_id}

    # When the day's payments are read, and the lines and the match ask for them again
    read = payments_read(payment, lambda _: None, lines_naming(*ids))
    answers = [read(p) for p in ids + ids]

    # Then every payment was asked for once, all at once, and answered from that read after
    assert sorted(asked) == ids
    assert answers == [{"id": p} for p in ids + ids]
