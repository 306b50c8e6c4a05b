"""Ingest's cost next to a bare boto3 handler: cold import time and warm latency.

Run with `make bench`. SQS is answered by botocore's Stubber (no network, no moto), so both
handlers pay the same client-side cost and the ratio isolates what ingest adds: signature
check, envelope read, Powertools logging/metrics. Cold import is measured in fresh
interpreters (median of runs); warm latency as the median of many in-process calls.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ENV = {
    **os.environ,
    "AWS_ACCESS_KEY_ID": "bench",
    "AWS_SECRET_ACCESS_KEY": "bench",
    "AWS_DEFAULT_REGION": "us-east-1",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_NAMESPACE": "Umavez",
    "WEBHOOK_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/bench",
    "PROVIDER_SECRETS": json.dumps({"stripe": "bench/stripe"}),
}
COLD_RUNS = 7
WARM_CALLS = 2000
SECRET = "whsec_benchmark_not_a_secret"


def cold_import_seconds(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    samples = [
        float(
            subprocess.run(
                [sys.executable, "-c", code],
                env=ENV,
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        for _ in range(COLD_RUNS)
    ]
    return statistics.median(samples)


def warm_latency_seconds(call: Callable[[], Any]) -> float:
    for _ in range(50):
        call()
    samples = []
    for _ in range(WARM_CALLS):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def stubbed_sqs(calls: int) -> Any:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sqs")
    stubber = Stubber(client)
    for n in range(calls):
        stubber.add_response("send_message", {"MessageId": f"m-{n}"})
    stubber.activate()
    return client


def main() -> None:
    os.environ.update(ENV)
    sys.path.insert(0, str(ROOT))
    import stripe

    from benchmarks import bare_sqs_handler
    from functions.ingest import handler
    from functions.ingest.adapters import SqsQueue
    from functions.ingest.service import VERIFIERS, WebhookIngest
    from tests.support.fakes import StaticSecrets
    from tests.support.lambda_events import api_gateway_event

    body = (ROOT / "tests/events/stripe/payment_intent.succeeded.json").read_text()
    header = stripe.WebhookSignature.generate_signature_header(body, SECRET, int(time.time()))
    event = api_gateway_event("stripe", body.encode(), {"Stripe-Signature": header})

    calls = WARM_CALLS + 50
    ingest = WebhookIngest(
        VERIFIERS,
        StaticSecrets({"stripe": (SECRET,)}),
        SqsQueue(stubbed_sqs(calls), ENV["WEBHOOK_QUEUE_URL"]),
        time.time,
    )
    bare_handler_sqs = stubbed_sqs(calls)
    bare_sqs_handler.sqs = bare_handler_sqs

    def ours() -> None:
        assert handler.respond(event, ingest)["statusCode"] == 200
        handler.metrics.clear_metrics()

    log_handler = handler.logger.registered_handler
    assert isinstance(log_handler, logging.StreamHandler)
    log_handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 - formatting cost stays, output goes
    results = {
        "cold_import_ms": {
            "ingest": 1000 * cold_import_seconds("functions.ingest.handler"),
            "bare": 1000 * cold_import_seconds("benchmarks.bare_sqs_handler"),
        },
        "warm_latency_us": {
            "ingest": 1e6 * warm_latency_seconds(ours),
            "bare": 1e6
            * warm_latency_seconds(lambda: bare_sqs_handler.lambda_handler(event, None)),
        },
    }
    for pair in results.values():
        pair["ratio"] = pair["ingest"] / pair["bare"]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
