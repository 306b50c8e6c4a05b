"""Powertools objects shared by a function's modules; created once per cold start."""

from __future__ import annotations

from typing import Final

from aws_lambda_powertools import Logger, Metrics, Tracer

METRICS_NAMESPACE: Final = "Umavez"


def powertools(service: str) -> tuple[Logger, Tracer, Metrics]:
    return (
        Logger(service=service),
        Tracer(service=service),
        Metrics(namespace=METRICS_NAMESPACE, service=service),
    )
