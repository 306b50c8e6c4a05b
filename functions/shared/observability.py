"""Powertools objects shared by a function's modules; created once per cold start.

The X-Ray SDK is a third of a cold import (~170 ms; NOTES.md), and Powertools' `Tracer()`
imports it even when tracing is disabled. So a function gets a real `Tracer` only when tracing
is on by Powertools' own rule (inside Lambda, not SAM local or Chalice, and
`POWERTOOLS_TRACE_DISABLED` not true); otherwise a `NoTracer`, whose decorators return the
function unchanged, exactly what a disabled `Tracer` amounts to, without the import. With
tracing off, Lambda's active tracing still records each invocation's segment; the SDK only
adds the subsegments (the handler, the AWS calls).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, Final, TypeVar, overload

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.formatter import LambdaPowertoolsFormatter
from aws_lambda_powertools.logging.types import PowertoolsLogRecord
from aws_lambda_powertools.shared.functions import resolve_truthy_env_var_choice

from functions.shared.redaction import redacted

# The embedded stack's and the tests' namespace. A deployed stack publishes under its stage's
# own (`Umavez/<stage>`, POWERTOOLS_METRICS_NAMESPACE), so a dev stack in the same account and
# region never feeds prod's alarms.
METRICS_NAMESPACE: Final = "Umavez"
METRICS_NAMESPACE_ENV: Final = "POWERTOOLS_METRICS_NAMESPACE"
TRACE_DISABLED_ENV: Final = "POWERTOOLS_TRACE_DISABLED"

F = TypeVar("F", bound=Callable[..., Any])


class NoTracer:
    """The decorators and calls the functions use, doing nothing: tracing is off."""

    disabled: Final = True

    def __init__(self, service: str) -> None:
        self.service = service

    def capture_lambda_handler(
        self,
        lambda_handler: Callable[..., Any] | None = None,
        capture_response: bool | None = None,
        capture_error: bool | None = None,
    ) -> Callable[..., Any]:
        """Typed as Powertools' own: the handler, or (called with options) a decorator."""
        return lambda_handler if lambda_handler is not None else _unchanged

    @overload
    def capture_method(self, method: F) -> F: ...

    @overload
    def capture_method(
        self,
        method: None = None,
        capture_response: bool | None = None,
        capture_error: bool | None = None,
    ) -> Callable[[F], F]: ...

    def capture_method(
        self,
        method: F | None = None,
        capture_response: bool | None = None,
        capture_error: bool | None = None,
    ) -> F | Callable[[F], F]:
        return method if method is not None else _unchanged

    def put_annotation(self, key: str, value: str | float | bool) -> None:
        return

    def put_metadata(self, key: str, value: Any, namespace: str | None = None) -> None:
        return


def _unchanged(function: F) -> F:
    return function


def tracing_enabled() -> bool:
    """Powertools' rule (`Tracer._is_tracer_disabled`): off when `POWERTOOLS_TRACE_DISABLED`
    is true, outside Lambda (no `LAMBDA_TASK_ROOT`) and under SAM local or Chalice."""
    if resolve_truthy_env_var_choice(env=os.getenv(TRACE_DISABLED_ENV, "false")):
        return False
    in_lambda = bool(os.getenv("LAMBDA_TASK_ROOT"))
    emulated = bool(os.getenv("AWS_SAM_LOCAL") or os.getenv("AWS_CHALICE_CLI_MODE"))
    return in_lambda and not emulated


def make_tracer(service: str) -> Tracer | NoTracer:
    """A Powertools Tracer (and the X-Ray SDK) only when tracing is on."""
    return Tracer(service=service) if tracing_enabled() else NoTracer(service)


def stage_metrics_namespace(stage: str) -> str:
    """Where a deployed stage's functions publish and its alarms read."""
    return f"{METRICS_NAMESPACE}/{stage}"


def metrics_namespace() -> str:
    """The namespace the stack gave the function, else the embedded stack's."""
    return os.getenv(METRICS_NAMESPACE_ENV) or METRICS_NAMESPACE


class RedactingFormatter(LambdaPowertoolsFormatter):
    """Powertools' JSON lines, each redacted whole (message, extra keys, traceback): no
    customer address or URL credential reaches a log, whichever error carried it."""

    def serialize(self, log: dict[str, Any] | PowertoolsLogRecord) -> str:
        return redacted(super().serialize(log))


def powertools(service: str) -> tuple[Logger, Tracer | NoTracer, Metrics]:
    return (
        Logger(service=service, logger_formatter=RedactingFormatter()),
        make_tracer(service),
        Metrics(namespace=metrics_namespace(), service=service),
    )


def with_request_id(logger: Logger) -> Callable[[F], F]:
    """Each line of an invocation carries its request id, and only that of the Lambda context.

    Powertools' `inject_lambda_context` adds the function's name, ARN, memory size and cold
    start to every line: ~230 bytes a line that the log group already says, about a third of
    the log bytes an event costs (CloudWatch Logs bills ingestion by the byte).

    The key is the invocation's thread's own (Powertools' thread-safe keys): Lambda runs one
    invocation at a time, the local stack many side by side in one process, where keys shared
    by every thread named another invocation's request, and a line formatted while another
    invocation removed its key failed to log at all.
    """

    def decorate(handler: F) -> F:
        @functools.wraps(handler)
        def invoke(event: Any, context: Any, *args: Any, **kwargs: Any) -> Any:
            logger.thread_safe_append_keys(request_id=getattr(context, "aws_request_id", None))
            try:
                return handler(event, context, *args, **kwargs)
            finally:
                logger.thread_safe_remove_keys(["request_id"])

        return invoke  # type: ignore[return-value]

    return decorate
