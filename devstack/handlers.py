"""The real handlers, loaded as the embedded stack's functions: their logs to the stack's own
file, their metrics to its files (one per function), their cached wiring built anew for the
stack, the outbox's channels through the stack's faults, the waiting re-drive on the stack's
clock, and process (with the statement's booking) a broken variant when the drill asks. Each
change is undone when the stack stops (`devstack/process_changes.py`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from devstack.metering import Metering
from devstack.metrics import MetricFiles
from devstack.process_changes import ProcessChanges
from devstack.resources import client
from functions.process.service import EffectProcessor
from functions.shared.tables import TableNames

if TYPE_CHECKING:
    from functions.process.waiting import Waiting

# The log of the stack that stopped last: what to read once no stack runs.
LAST_STACK_LOG: Final = Path(".local/lambda-logs.jsonl")


def stack_log_path(aws_endpoint_url: str) -> Path:
    """The handlers' log of the stack whose AWS answers at that URL, while it runs: one file
    per stack, so that `umavez trace` reads that stack's lines only, whatever else runs."""
    port = urlsplit(aws_endpoint_url).port
    return Path(".local/logs") / f"aws-{port}.jsonl"


def _keep_as_last(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.replace(path, LAST_STACK_LOG)


def open_stack_log(
    changes: ProcessChanges, given: Path | None, aws_endpoint_url: str, metering: Metering | None
) -> tuple[Path, Any]:
    """The handlers' log file: `given`, appended to, or the stack's own (see `stack_log_path`),
    kept as LAST_STACK_LOG once it stops; through the meter when metered."""
    log_path = given or stack_log_path(aws_endpoint_url)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # A fresh stack, a fresh log: its lines are this stack's, as its tables are.
    log_file: Any = log_path.open("w" if given is None else "a", buffering=1)
    if given is None:
        changes.on_undo(lambda: _keep_as_last(log_path))
    changes.on_undo(log_file.close)
    if metering is not None:
        log_file = metering.log_stream(log_file)
    return log_path, log_file


@dataclass(frozen=True)
class HandlerWiring:
    """What the handlers are wired to on this stack."""

    log_file: Any
    metrics: MetricFiles
    # The outbox's channels as built from the environment -> the channels the stack sends on.
    faulty_channels: Callable[[Any], Any]
    # The waiting re-drive's room, on the stack's clock and wait limit.
    waiting_room: Callable[[], Waiting]
    aws_endpoint_url: str
    tables: TableNames
    # Process runs this (a broken design, for the drill to catch) instead; None: the real one.
    variant: type[EffectProcessor] | None = None


def load_handlers(changes: ProcessChanges, wiring: HandlerWiring) -> dict[str, Any]:
    """Each function's `lambda_handler`, by the name the stack gives the function."""
    from functions.ingest import handler as ingest
    from functions.outbox import handler as outbox
    from functions.outbox import sweeper_handler
    from functions.outbox import wiring as outbox_wiring
    from functions.process import handler as process
    from functions.process import waiting_handler
    from functions.process import wiring as process_wiring
    from functions.reconcile import handler as reconcile
    from functions.statement import handler as statement

    modules = (ingest, process, outbox, sweeper_handler, reconcile, waiting_handler, statement)
    for module in modules:
        changes.redirect_logs(module.logger, wiring.log_file)
        changes.on_undo(wiring.metrics.route(module.metrics))
    changes.clear_caches(
        ingest.webhook_ingest,
        process_wiring.effect_processor,
        process_wiring.failure_records,
        outbox.outbox_sender,
        sweeper_handler.sweeper,
        sweeper_handler.stranded_items,
        reconcile.reconciler,
        process_wiring.waiting_room,
        waiting_handler.waiting_room,
        statement.statement_schedule,
        statement.statement_source,
    )
    changes.patch(
        outbox_wiring, "channels_from_env", wiring.faulty_channels(outbox_wiring.channels_from_env)
    )
    changes.patch(waiting_handler, "waiting_room", functools.cache(wiring.waiting_room))
    if wiring.variant is not None:
        _patch_variant(changes, wiring, wiring.variant, process_wiring, statement)
    return {
        "statement": statement.lambda_handler,
        "ingest": ingest.lambda_handler,
        "process": process.lambda_handler,
        "outbox": outbox.lambda_handler,
        "sweeper": sweeper_handler.lambda_handler,
        "reconciliation": reconcile.lambda_handler,
        "waiting": waiting_handler.lambda_handler,
    }


def _patch_variant(
    changes: ProcessChanges,
    wiring: HandlerWiring,
    variant: type[EffectProcessor],
    process_wiring: Any,
    statement: Any,
) -> None:
    """Process runs `variant` (a broken design, for the drill to catch) instead."""
    changes.patch(
        process_wiring,
        "effect_processor",
        functools.cache(
            lambda: variant(
                client("dynamodb", wiring.aws_endpoint_url),
                wiring.tables,
                time.time,
                process_wiring.interpreters_from_env(),
            )
        ),
    )
    # The statement books through the same broken processor.
    changes.patch(
        statement,
        "statement_schedule",
        functools.cache(lambda: statement.statement_schedule_with(variant)),
    )
