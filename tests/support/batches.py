"""The process Lambda given one SQS batch, seen as an operator sees it: which records went back
to the queue, what each record logged, and whether the tables hold any money that is not money.
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fixtures.lambda_events import FakeLambdaContext, sqs_event
from functions.process import handler
from functions.shared import tables
from functions.shared.dynamo import scan_items
from functions.shared.money import CURRENCY_EXPONENTS, max_minor
from tests.support.world import World

# What a currency in the ledger must look like: the canonical form is lower case (what Stripe
# sends and every entry so far holds), and the code is an ISO 4217 one with an exponent.
CANONICAL_CURRENCY = re.compile(r"[a-z]{3}")


@dataclass(frozen=True)
class BatchRun:
    """One invocation: the records handed back to SQS and the JSON lines it logged."""

    failed: frozenset[str]
    lines: tuple[dict[str, Any], ...]

    def outcomes(self, message_id: str) -> list[dict[str, Any]]:
        """The lines that say what became of one record (one per entry it announced)."""
        return [
            line
            for line in self.lines
            if line.get("message_id") == message_id and line.get("outcome")
        ]

    def failure(self, message_id: str) -> dict[str, Any]:
        [line] = [line for line in self.outcomes(message_id) if line["outcome"] == "failed"]
        return line


@contextmanager
def captured_logs() -> Iterator[io.StringIO]:
    """What the process Logger writes, as the Lambda runtime would ship it to CloudWatch."""
    stream = io.StringIO()
    log_handler = handler.logger.registered_handler
    assert isinstance(log_handler, logging.StreamHandler)
    previous = log_handler.setStream(stream)
    try:
        yield stream
    finally:
        log_handler.setStream(previous)


def run_batch(*records: dict[str, Any]) -> BatchRun:
    with captured_logs() as stream:
        response = handler.lambda_handler(sqs_event(*records), FakeLambdaContext())
    # One JSON document a line; split on "\n" alone: values may hold U+0085 or U+2028, which
    # splitlines() would also break at
    lines = tuple(
        json.loads(line) for line in stream.getvalue().split("\n") if line.startswith("{")
    )
    return BatchRun(frozenset(f["itemIdentifier"] for f in response["batchItemFailures"]), lines)


def invalid_money(world: World) -> list[str]:
    """Every entry, order and outbox item whose money is not money: a currency outside
    ISO 4217 or not in its canonical case, an amount that is not a positive integer within
    the bound. Empty when the books hold only money."""
    found: list[str] = []
    for item in scan_items(world.dynamodb, world.tables.ledger):
        sort_key = str(item[tables.SORT_KEY])
        if sort_key.startswith(tables.EFFECT_SORT_PREFIX):
            found += _money_problems(f"entry {item[tables.PARTITION_KEY]}", item)
        elif sort_key == tables.ORDER_SORT and "currency" in item:
            found += _currency_problems(f"order {item[tables.PARTITION_KEY]}", item["currency"])
    for item in scan_items(world.dynamodb, world.tables.outbox):
        found += _money_problems(f"outbox item {item[tables.OUTBOX_KEY]}", item)
    return found


def _money_problems(what: str, item: dict[str, Any]) -> list[str]:
    problems = _currency_problems(what, item.get("currency"))
    amount = item.get("amount")
    if type(amount) is not int:
        return [*problems, f"{what}: amount {amount!r} is not an integer"]
    bound = max_minor(str(item.get("currency")))
    if not 0 < amount <= bound:
        problems.append(f"{what}: amount {amount} is not within 1..{bound}")
    return problems


def _currency_problems(what: str, currency: object) -> list[str]:
    if not isinstance(currency, str) or not CANONICAL_CURRENCY.fullmatch(currency):
        return [f"{what}: currency {currency!r} is not a lower-case three-letter code"]
    if currency not in CURRENCY_EXPONENTS:
        return [f"{what}: currency {currency!r} is not in ISO 4217"]
    return []
