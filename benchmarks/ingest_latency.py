"""Ingest's cost next to a bare boto3 handler: cold import time and warm latency.

Run with `make bench`. The bare handler (`bare_sqs_handler.py`) imports boto3, creates an SQS
client and sends the body: the floor. Every pair is measured in the same run, alternating
ingest and bare sample by sample, so that load from other processes on the machine hits both
alike; each ratio is of medians.

- cold import: fresh interpreters, tracing disabled (`POWERTOOLS_TRACE_DISABLED=true`). Also
  shown, not compared: ingest with tracing on as Lambda would run it (`LAMBDA_TASK_ROOT` set),
  which imports the X-Ray SDK.
- warm latency, stubbed: SQS answered by botocore's Stubber (no network, no moto), so both pay
  the same client-side cost and the ratio isolates what ingest adds (signature check, envelope
  read, Powertools logging and metrics); ingest is `handler.respond`.
- warm latency, real endpoint: both send to one queue of the local moto server over HTTP
  (`LocalAws`); ingest is the whole `lambda_handler` (its decorators, the secret read through
  Powertools Parameters' cache from the server's Secrets Manager). The queue is drained
  every few rounds, untimed: moto's SendMessage slows down as its queue grows.
- cold start to the first answer, shown, not compared: a fresh interpreter imports the
  handler and answers one request against the local server. The bare handler creates its
  client at import; ingest creates its clients and reads its secret on the first request, so
  this is the fair cold comparison.

Process throughput is measured by `process_throughput.py`, also run by `make bench`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TextIO

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
# Tracing on, as in Lambda today: inside Lambda and not disabled.
TRACED_ENV = {
    **{k: v for k, v in ENV.items() if k != "POWERTOOLS_TRACE_DISABLED"},
    "LAMBDA_TASK_ROOT": str(ROOT),
}
COLD_RUNS = 9
WARM_CALLS = 2000
REAL_CALLS = 400
REAL_WARMUP = 20
FIRST_ANSWER_RUNS = 7
REAL_SETTINGS = ("AWS_ENDPOINT_URL", "WEBHOOK_QUEUE_URL", "PROVIDER_SECRETS")
PURGE_EVERY = 20
SECRET = "whsec_benchmark_not_a_secret"
COLD_IMPORT_LIMIT = 1.25  # the team's target: ingest's import at most 1.25x the bare handler's


def cold_import_seconds(module: str, env: Mapping[str, str]) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    output = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(env),
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output.splitlines()[-1])


def alternating(
    samplers: Mapping[str, Callable[[], float]],
    rounds: int,
    warmup: int = 0,
    between: Callable[[int], None] = lambda _: None,
) -> dict[str, float]:
    """Median of each sampler's samples, the samplers taking turns sample by sample;
    `between(n)` runs, untimed, before the n-th round."""
    for _ in range(warmup):
        for sample in samplers.values():
            sample()
    samples: dict[str, list[float]] = {name: [] for name in samplers}
    for n in range(rounds):
        between(n)
        for name, sample in samplers.items():
            samples[name].append(sample())
    return {name: statistics.median(values) for name, values in samples.items()}


def timed(call: Callable[[], Any]) -> Callable[[], float]:
    def sample() -> float:
        start = time.perf_counter()
        call()
        return time.perf_counter() - start

    return sample


def stubbed_sqs(calls: int) -> Any:
    import boto3
    from botocore.stub import Stubber

    client = boto3.client("sqs")
    stubber = Stubber(client)
    for n in range(calls):
        stubber.add_response("send_message", {"MessageId": f"m-{n}"})
    stubber.activate()
    return client


# Run in a fresh interpreter: the event is read before the clock starts; the context is a
# plain class, so that no import is shared with (or paid for) the handler before it.
FIRST_ANSWER = """
import json, sys, time
event = json.load(open(sys.argv[1]))
class Context:
    function_name = "umavez-ingest"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:umavez-ingest"
    aws_request_id = "00000000-0000-4000-8000-000000000000"
t = time.perf_counter()
import {module} as handler
answer = handler.lambda_handler(event, Context())
print(time.perf_counter() - t)
assert answer["statusCode"] == 200, answer
"""


def first_answer_seconds(module: str, env: Mapping[str, str], event_file: str) -> float:
    output = subprocess.run(
        [sys.executable, "-c", FIRST_ANSWER.format(module=module), event_file],
        env=dict(env),
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return float(output.strip().splitlines()[-1])  # the handler's log lines come first


def cold_imports() -> dict[str, float]:
    medians = alternating(
        {
            "ingest": lambda: cold_import_seconds("functions.ingest.handler", ENV),
            "bare": lambda: cold_import_seconds("benchmarks.bare_sqs_handler", ENV),
            "ingest_tracing_on": lambda: cold_import_seconds(
                "functions.ingest.handler", TRACED_ENV
            ),
        },
        COLD_RUNS,
    )
    result = {name: 1000 * seconds for name, seconds in medians.items()}
    result["ratio"] = result["ingest"] / result["bare"]
    result["limit"] = COLD_IMPORT_LIMIT
    result["ratio_tracing_on"] = result["ingest_tracing_on"] / result["bare"]
    return result


def main() -> None:
    os.environ.update(ENV)
    sys.path.insert(0, str(ROOT))
    event = signed_stripe_event()
    devnull = quiet_ingest_logs()
    results: dict[str, dict[str, float]] = {"cold_import_ms": cold_imports()}
    results["warm_latency_us_stubbed_sqs"] = warm_latency_stubbed_sqs(event)
    results.update(against_the_local_server(event, devnull))
    for name in (
        "cold_start_to_first_answer_ms_real_sqs",
        "warm_latency_us_stubbed_sqs",
        "warm_latency_us_real_sqs",
    ):
        pair = results[name]
        pair["ratio"] = pair["ingest"] / pair["bare"]
    print(json.dumps(results, indent=2))
    if results["cold_import_ms"]["ratio"] > COLD_IMPORT_LIMIT:
        print(f"cold import ratio above {COLD_IMPORT_LIMIT}x", file=sys.stderr)


def signed_stripe_event() -> dict[str, Any]:
    """A Stripe payment as API Gateway hands it to ingest, signed now."""
    import stripe

    from fixtures.lambda_events import api_gateway_event

    body = (ROOT / "fixtures/events/stripe/payment_intent.succeeded.json").read_text()
    header = stripe.WebhookSignature.generate_signature_header(body, SECRET, int(time.time()))
    return api_gateway_event("stripe", body.encode(), {"Stripe-Signature": header})


def quiet_ingest_logs() -> TextIO:
    """Ingest's log lines still formatted, written nowhere: the stream they go to instead."""
    from functions.ingest import handler

    log_handler = handler.logger.registered_handler
    assert isinstance(log_handler, logging.StreamHandler)
    devnull = open(os.devnull, "w")  # noqa: SIM115 - formatting cost stays, output goes
    log_handler.setStream(devnull)
    return devnull


def warm_latency_stubbed_sqs(event: dict[str, Any]) -> dict[str, float]:
    """What ingest adds on the client side: both handlers' SQS answered by botocore's Stubber."""
    from benchmarks import bare_sqs_handler
    from fixtures.fakes import StaticSecrets
    from functions.ingest import handler
    from functions.ingest.adapters import SqsQueue
    from functions.ingest.service import VERIFIERS, WebhookIngest

    calls = WARM_CALLS + 50
    ingest = WebhookIngest(
        VERIFIERS,
        StaticSecrets({"stripe": (SECRET,)}),
        SqsQueue(stubbed_sqs(calls), ENV["WEBHOOK_QUEUE_URL"]),
        time.time,
    )
    bare_sqs_handler.sqs = stubbed_sqs(calls)

    def ours() -> None:
        assert handler.respond(event, ingest)["statusCode"] == 200
        handler.metrics.clear_metrics()

    stubbed = alternating(
        {
            "ingest": timed(ours),
            "bare": timed(lambda: bare_sqs_handler.lambda_handler(event, None)),
        },
        WARM_CALLS,
        warmup=50,
    )
    return {k: 1e6 * v for k, v in stubbed.items()}


def against_the_local_server(event: dict[str, Any], devnull: TextIO) -> dict[str, dict[str, float]]:
    """A real SQS endpoint: the local moto server, over HTTP. Cold start to the first answer,
    then warm latency."""
    from devstack.local_aws import LocalAws

    aws = LocalAws().start()
    try:
        drain = partial(drained, *local_queue(aws.endpoint_url))
        first = first_answers(event)
        assert drain() == 2 * FIRST_ANSWER_RUNS  # every first answer enqueued its message
        results = {
            "cold_start_to_first_answer_ms_real_sqs": {
                name: 1000 * seconds for name, seconds in first.items()
            }
        }
        real = warm_latency_real_sqs(event, drain, devnull)
    finally:
        aws.stop()
    results["warm_latency_us_real_sqs"] = {k: 1e6 * v for k, v in real.items()}
    return results


def local_queue(endpoint_url: str) -> tuple[Any, str]:
    """A queue and ingest's Stripe secret on the local server, and both handlers (here and in
    fresh interpreters, through the environment) sending to that queue."""
    import boto3

    from benchmarks import bare_sqs_handler
    from devstack.resources import client
    from functions.ingest import handler

    sqs = client("sqs", endpoint_url)
    queue_url = sqs.create_queue(QueueName="bench-webhooks")["QueueUrl"]
    client("secretsmanager", endpoint_url).create_secret(
        Name="bench/stripe", SecretString=json.dumps({"active": [SECRET]})
    )
    os.environ.update(
        {
            "AWS_ENDPOINT_URL": endpoint_url,
            "WEBHOOK_QUEUE_URL": queue_url,
            "PROVIDER_SECRETS": json.dumps({"stripe": "bench/stripe"}),
        }
    )
    assert set(REAL_SETTINGS) <= set(os.environ)
    handler.webhook_ingest.cache_clear()
    bare_sqs_handler.sqs = boto3.client("sqs")  # as at its import, now for the server
    return sqs, queue_url


def drained(sqs: Any, queue_url: str) -> int:
    """How many messages the queue held; it is left empty."""
    count = 0
    while messages := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10).get(
        "Messages", []
    ):
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)
            ],
        )
        count += len(messages)
    return count


def first_answers(event: dict[str, Any]) -> dict[str, float]:
    """Each handler's cold start to its first answer, in fresh interpreters."""
    with tempfile.NamedTemporaryFile("w", suffix=".json") as event_file:
        json.dump(event, event_file)
        event_file.flush()
        env = {**ENV, **{k: os.environ[k] for k in REAL_SETTINGS}}
        return alternating(
            {
                "ingest": partial(
                    first_answer_seconds, "functions.ingest.handler", env, event_file.name
                ),
                "bare": partial(
                    first_answer_seconds, "benchmarks.bare_sqs_handler", env, event_file.name
                ),
            },
            FIRST_ANSWER_RUNS,
        )


def warm_latency_real_sqs(
    event: dict[str, Any], drain: Callable[[], int], devnull: TextIO
) -> dict[str, float]:
    """Ingest's whole `lambda_handler` and the bare handler, sending to the local queue."""
    from benchmarks import bare_sqs_handler
    from fixtures.lambda_events import FakeLambdaContext
    from functions.ingest import handler

    context = FakeLambdaContext(function_name="umavez-ingest")

    def ingest_handler() -> None:
        assert handler.lambda_handler(event, context)["statusCode"] == 200

    def keep_the_queue_short(n: int) -> None:
        """moto's SendMessage computes every queue attribute, a pass over all messages:
        its cost grows with the queue's depth (15 ms at 0, 80 ms at 600 here). The queue
        is drained every few rounds, counting that both handlers' messages are there."""
        if n % PURGE_EVERY == 0:
            expected = 2 * (PURGE_EVERY if n else REAL_WARMUP)
            assert drain() == expected

    with contextlib.redirect_stdout(devnull):  # the metrics' EMF line, printed per call
        return alternating(
            {
                "ingest": timed(ingest_handler),
                "bare": timed(lambda: bare_sqs_handler.lambda_handler(event, None)),
            },
            REAL_CALLS,
            warmup=REAL_WARMUP,
            between=keep_the_queue_short,
        )


if __name__ == "__main__":
    main()
