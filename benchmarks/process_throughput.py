"""Process throughput on the embedded server, next to its floor: the same raw requests.

Run with `make bench`. N Stripe payments (`payment_intent.succeeded`, each a new order) go
through the real `EffectProcessor.process` against one local moto server (`LocalAws`, as the
embedded stack runs it); a botocore hook records every database request it makes (the read
before writing, `BatchGetItem`, and the `TransactWriteItems`), exactly as it made it. The same
requests are then replayed, unchanged and in order, on a second server with the same, equally
fresh tables (so each succeeds as it did, against tables of the same size). Process is timed
in events/s, the replay in request sets (one event's requests) per second; the ratio is what
process adds beyond its database work: reading the provider's payload, routing, building the
items.

The two alternate chunk by chunk (process a chunk, replay it), so that load from other
processes on the machine hits both alike. Each round gives a ratio; the result is their
median. The servers' own per-operation time (`/umavez-local/stats`) says how much of each
request is the server's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_764_460_800
THROUGHPUT_LIMIT = 0.8  # the team's target: process at least 0.8x its raw requests
RECORDED = ("BatchGetItem", "TransactWriteItems")


@dataclass
class Round:
    events: int = 0
    process_seconds: float = 0.0
    requests: int = 0
    replay_seconds: float = 0.0

    @property
    def events_per_second(self) -> float:
        return self.events / self.process_seconds

    @property
    def requests_per_second(self) -> float:
        return self.requests / self.replay_seconds

    @property
    def ratio(self) -> float:
        return self.events_per_second / self.requests_per_second


@dataclass
class Recorder:
    """The recorded requests' parameters as the caller passed them, in order, and a count of
    every request made."""

    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    operations: Counter[str] = field(default_factory=Counter)

    def attach(self, client: Any) -> None:
        for operation in RECORDED:
            client.meta.events.register(
                f"provide-client-params.dynamodb.{operation}", self._recorder(operation)
            )
        client.meta.events.register("before-call.dynamodb", self._operation)

    def _recorder(self, operation: str) -> Any:
        def record(params: dict[str, Any], **_: Any) -> None:
            # A shallow copy: botocore adds its idempotency token to the dict it was given.
            self.requests.append((operation, dict(params)))

        return record

    @property
    def transactions(self) -> list[dict[str, Any]]:
        return [params for operation, params in self.requests if operation == RECORDED[1]]

    def _operation(self, model: Any, **_: Any) -> None:
        self.operations[model.name] += 1


def payments(first: int, count: int) -> list[str]:
    from fixtures import stripe

    return [
        stripe.payment_intent_succeeded(f"ord_bench{n:06d}", f"pi_bench{n:06d}", 1000 + n, T0 + n)
        for n in range(first, first + count)
    ]


def replay(client: Any, operation: str, params: dict[str, Any]) -> None:
    """One recorded request again; raises unless it succeeds as it did."""
    if operation == "BatchGetItem":
        assert not client.batch_get_item(**params).get("UnprocessedKeys")
    else:
        client.transact_write_items(**params)


def transaction_server_seconds(aws: Any) -> float:
    """The server's own time in the recorded operations."""
    seconds = aws.stats()["seconds"]
    return float(sum(seconds.get(operation, 0.0) for operation in RECORDED))


@dataclass
class Side:
    """One local server, with a client that processes (recorded) and one that replays."""

    aws: Any
    process_db: Any
    replay_db: Any
    processor: Any


@dataclass
class Alternation:
    """Process on one server, replay on the other, turn by turn; what the measured turns took."""

    sides: list[Side]
    recorder: Recorder
    server_time: dict[str, float] = field(default_factory=lambda: {"process": 0.0, "replay": 0.0})

    def process_and_replay(self, bodies: list[str], turn: int, into: Round | None) -> None:
        """Process on one server, replay on the other; both then hold the same items, so
        the servers swap roles every turn (any difference between them cancels out)."""
        from functions.shared.domain import Outcome

        first, second = self.sides
        here, there = (first, second) if turn % 2 == 0 else (second, first)
        recorded = len(self.recorder.requests)
        server_before = transaction_server_seconds(here.aws)
        started = time.perf_counter()
        for body in bodies:
            for processed in here.processor.process("stripe", body):
                assert processed.outcome is Outcome.APPLIED, processed
        process_seconds = time.perf_counter() - started
        process_server = transaction_server_seconds(here.aws) - server_before
        requests = self.recorder.requests[recorded:]
        server_before = transaction_server_seconds(there.aws)
        started = time.perf_counter()
        for operation, params in requests:
            replay(there.replay_db, operation, params)
        replay_seconds = time.perf_counter() - started
        replay_server = transaction_server_seconds(there.aws) - server_before
        if into is not None:
            into.events += len(bodies)
            into.process_seconds += process_seconds
            into.requests += sum(1 for operation, _ in requests if operation == RECORDED[1])
            into.replay_seconds += replay_seconds
            self.server_time["process"] += process_server
            self.server_time["replay"] += replay_server


def measure(events: int, rounds: int, chunk: int, warmup: int) -> dict[str, Any]:
    from devstack.local_aws import LocalAws

    recorder = Recorder()
    servers = [LocalAws().start(), LocalAws().start()]
    try:
        alternation = Alternation(fresh_sides(servers, recorder), recorder)
        alternation.process_and_replay(payments(0, warmup), 0, None)
        alternation.process_and_replay(payments(warmup, warmup), 1, None)
        operations_before = Counter(recorder.operations)
        measured = measured_rounds(alternation, events, rounds, chunk, first_payment=2 * warmup)
    finally:
        for aws in servers:
            aws.stop()
    return summary(measured, recorder.operations - operations_before, alternation.server_time)


def fresh_sides(servers: list[Any], recorder: Recorder) -> list[Side]:
    """Each server with the same empty tables and a processor whose requests are recorded."""
    from devstack.resources import client
    from functions.process.service import EffectProcessor
    from functions.shared import tables

    names = tables.TableNames("bench-ledger", "bench-outbox")
    sides = []
    for aws in servers:
        process_db = client("dynamodb", aws.endpoint_url)
        for request in tables.create_table_requests(names):
            process_db.create_table(**request)
        recorder.attach(process_db)
        processor = EffectProcessor(process_db, names, time.time)
        sides.append(Side(aws, process_db, client("dynamodb", aws.endpoint_url), processor))
    return sides


def measured_rounds(
    alternation: Alternation, events: int, rounds: int, chunk: int, first_payment: int
) -> list[Round]:
    """`rounds` rounds of `events` new payments each, `chunk` payments a turn."""
    measured = []
    next_payment = first_payment
    turn = 0
    for _ in range(rounds):
        round_ = Round()
        for start in range(0, events, chunk):
            bodies = payments(next_payment, min(chunk, events - start))
            next_payment += len(bodies)
            alternation.process_and_replay(bodies, turn, round_)
            turn += 1
        measured.append(round_)
    return measured


def summary(
    measured: list[Round], operations: Counter[str], server_time: dict[str, float]
) -> dict[str, Any]:
    """The rounds' medians, the requests process made per event, and where each ms went."""
    total_events = sum(r.events for r in measured)
    total_requests = sum(r.requests for r in measured)
    process_wall_ms = 1000 * sum(r.process_seconds for r in measured) / total_events
    replay_wall_ms = 1000 * sum(r.replay_seconds for r in measured) / total_requests
    ratios = [r.ratio for r in measured]
    return {
        "events": total_events,
        "rounds": len(measured),
        "process_events_per_s": statistics.median(r.events_per_second for r in measured),
        "replay_requests_per_s": statistics.median(r.requests_per_second for r in measured),
        "ratio": statistics.median(ratios),
        "ratios_by_round": [round(r, 3) for r in ratios],
        "limit": THROUGHPUT_LIMIT,
        "process_requests_per_event": {
            name: count / total_events for name, count in sorted(operations.items())
        },
        "ms": {
            "process_per_event": process_wall_ms,
            "replay_per_request": replay_wall_ms,
            "server_per_process_transaction": 1000 * server_time["process"] / total_requests,
            "server_per_replayed_transaction": 1000 * server_time["replay"] / total_requests,
        },
    }


def client_side(events: int) -> dict[str, float]:
    """The same comparison without a server: DynamoDB answered by botocore's Stubber, so only
    the client's own CPU is left (what a Lambda of 256 MB, a sixth of a vCPU, pays for). Each
    payment is processed, then its requests replayed, in turn; medians per event."""
    import boto3
    from botocore.stub import Stubber

    from functions.process.service import EffectProcessor
    from functions.shared import tables

    def stubbed() -> Any:
        db = boto3.client("dynamodb")
        stubber = Stubber(db)
        for _ in range(events + 50):
            stubber.add_response("batch_get_item", {"Responses": {}})
            stubber.add_response("transact_write_items", {})
        stubber.activate()
        return db

    process_db, replay_db = stubbed(), stubbed()
    recorder = Recorder()
    recorder.attach(process_db)
    processor = EffectProcessor(process_db, tables.TableNames("bench-l", "bench-o"), time.time)
    samples: dict[str, list[float]] = {"process": [], "replay": []}
    for n, body in enumerate(payments(0, events + 50)):
        started = time.perf_counter()
        recorded = len(recorder.requests)
        processor.process("stripe", body)
        processed = time.perf_counter()
        for operation, params in recorder.requests[recorded:]:
            replay(replay_db, operation, params)
        replayed = time.perf_counter()
        if n >= 50:  # warm-up
            samples["process"].append(processed - started)
            samples["replay"].append(replayed - processed)
    result = {f"{side}_us": 1e6 * statistics.median(times) for side, times in samples.items()}
    result["ratio"] = result["replay_us"] / result["process_us"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=300, help="payments per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=25, help="payments per alternation")
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--client-events", type=int, default=1000, help="stubbed payments")
    args = parser.parse_args()
    for name, value in {
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
    }.items():
        os.environ.setdefault(name, value)
    sys.path.insert(0, str(ROOT))
    result = measure(args.events, args.rounds, args.chunk, args.warmup)
    result["client_side_stubbed_dynamodb"] = client_side(args.client_events)
    print(json.dumps({"process_throughput": result}, indent=2))
    if result["ratio"] < THROUGHPUT_LIMIT:
        print(f"process throughput below {THROUGHPUT_LIMIT}x its transactions", file=sys.stderr)


if __name__ == "__main__":
    main()
