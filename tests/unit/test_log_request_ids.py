"""Each log line of an invocation names that invocation's request, also when the local stack
runs invocations of one handler side by side in one process."""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools import Logger

from functions.shared.observability import with_request_id

LINES_PER_INVOCATION = 50


@dataclass
class Context:
    aws_request_id: str


def test_invocations_side_by_side_each_log_their_own_request_id() -> None:
    # Given a handler that logs many lines, its logger writing to a buffer
    stream = io.StringIO()
    logger = Logger(service="side-by-side", stream=stream)
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    @with_request_id(logger)
    def handler(event: dict[str, Any], context: Any) -> None:
        start.wait()
        for n in range(LINES_PER_INVOCATION):
            logger.info("line", extra={"invocation": event["n"], "line": n})

    def invoke(n: int) -> None:
        try:
            handler({"n": n}, Context(f"req-{n}"))
        except BaseException as exc:  # noqa: BLE001 - the test reports it
            errors.append(exc)

    # When eight invocations run at the same time in threads of one process
    threads = [threading.Thread(target=invoke, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # Then every line was logged, each with its own invocation's request id, and the key is
    # gone once the invocation is over
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert not errors
    assert len(lines) == 8 * LINES_PER_INVOCATION
    assert all(line["request_id"] == f"req-{line['invocation']}" for line in lines)
    with_request_id(logger)(lambda event, context: logger.info("inside"))({}, Context("req-main"))
    logger.info("after")
    *_, inside, after = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert inside["request_id"] == "req-main"
    assert "request_id" not in after
