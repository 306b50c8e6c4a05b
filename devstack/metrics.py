"""Each function's metrics, locally, where CloudWatch would get them: its EMF documents, one a
line, in a file of its own (`.local/metrics/<function>.jsonl`), never on the console.

On Lambda, Powertools prints one EMF document per invocation to the function's log stream, and
CloudWatch turns it into metrics. The embedded stack runs every handler in one process, where
that goes wrong twice: Powertools' `Metrics` keeps its metrics and dimensions in class
attributes shared by every instance, so all functions fill one set under whichever `service`
was serialized first; and with metrics disabled nothing is ever flushed, so each metric grows
until its 100th value, which Powertools prints regardless (`add_metric`), followed by a
"No application metrics to publish" warning on the next empty flush.

`MetricFiles.route(metrics)` gives one module's `Metrics` a set of its own per thread (one
invocation at a time per thread, like a Lambda execution environment), flushed at the end of
the invocation by `@metrics.log_metrics` as one EMF line into the function's file. Local stack
only: the deployed code path is untouched.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
    AmazonCloudWatchEMFProvider,
)
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.constants import MAX_METRICS

from devstack.metrics_report import METRICS_DIR, Totals, add_document

# What a handler's code calls on its metrics object; each goes to the invocation's own set.
ROUTED = (
    "add_metric",
    "add_dimension",
    "add_dimensions",
    "add_metadata",
    "set_timestamp",
    "set_default_dimensions",
    "serialize_metric_set",
    "flush_metrics",
    "clear_metrics",
)


class EmfFile:
    """One function's metrics file: EMF documents appended one a line, and their running sums."""

    def __init__(self, path: Path, function: str) -> None:
        self.path = path
        self.function = function
        self.totals: Totals = Counter()
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")  # the metrics of this run of the stack

    def write(self, document: Mapping[str, Any]) -> None:
        line = json.dumps(document, separators=(",", ":")) + "\n"
        with self._lock:
            with self.path.open("a") as file:
                file.write(line)
            add_document(self.totals, self.function, document)


class InvocationMetrics(AmazonCloudWatchEMFProvider):
    """One invocation's metrics, with sets of their own, flushed as one EMF line to a file."""

    def __init__(self, namespace: str | None, service: str | None, sink: EmfFile) -> None:
        super().__init__(
            metric_set={},
            dimension_set={},
            metadata_set={},
            default_dimensions={},
            namespace=namespace,
            service=service,
        )
        self._sink = sink

    def add_metric(self, name: str, unit: Any, value: float, resolution: Any = 60) -> None:
        # Powertools prints a full set (100 metrics, or 100 values of one): write it instead.
        values = self.metric_set.get(name.strip(), {}).get("Value", [])
        if len(values) >= MAX_METRICS - 1 or (
            name.strip() not in self.metric_set and len(self.metric_set) >= MAX_METRICS - 1
        ):
            self.flush_metrics()
        super().add_metric(name=name, unit=unit, value=value, resolution=resolution)

    def flush_metrics(self, raise_on_empty_metrics: bool = False) -> None:
        # An invocation that counted nothing writes nothing: no document, and no warning.
        if not self.metric_set and not raise_on_empty_metrics:
            return
        self._sink.write(self.serialize_metric_set())  # raises on an empty set, as Powertools
        self.clear_metrics()


class FunctionMetrics:
    """Stands in for one function's provider: each thread gets its own `InvocationMetrics`."""

    def __init__(self, namespace: str | None, service: str | None, sink: EmfFile) -> None:
        self._namespace = namespace
        self._service = service
        self._sink = sink
        self._local = threading.local()

    def current(self) -> InvocationMetrics:
        own: InvocationMetrics | None = getattr(self._local, "metrics", None)
        if own is None:
            own = InvocationMetrics(self._namespace, self._service, self._sink)
            self._local.metrics = own
        return own

    def delegate(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            return getattr(self.current(), name)(*args, **kwargs)

        return call


class MetricFiles:
    """The embedded stack's metrics: a file per function under `directory`."""

    def __init__(self, directory: Path = METRICS_DIR) -> None:
        self.directory = directory
        self.files: dict[str, EmfFile] = {}

    def route(self, metrics: Metrics) -> Callable[[], None]:
        """Send this module's metrics to its function's file; returns what undoes it.

        The module's provider keeps its identity (`@metrics.log_metrics` was bound to it at
        import); its methods are replaced on the instance, and removed again by the undo.
        """
        provider = metrics.provider
        function = str(getattr(provider, "service", None) or "service_undefined")
        sink = self.files.get(function) or EmfFile(self.directory / f"{function}.jsonl", function)
        self.files[function] = sink
        own = FunctionMetrics(getattr(provider, "namespace", None), function, sink)
        for name in ROUTED:
            setattr(provider, name, own.delegate(name))

        def undo() -> None:
            for name in ROUTED:
                provider.__dict__.pop(name, None)

        return undo

    def totals(self) -> Totals:
        return sum((f.totals for f in self.files.values()), start=Counter())
