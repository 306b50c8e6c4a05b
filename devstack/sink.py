"""What reached the sinks, per outbox key: EventBridge events (through the local bus's rule to
a queue: counted in memory and written to a small local table, so that `umavez show` in
another process can read them), SES messages (from moto's own data dump), and the signed HTTP
notifications the local receiver verified (`HttpSink`)."""

from __future__ import annotations

import base64
import json
import re
import secrets
import threading
import urllib.request
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from devstack.pollers import Poller
from devstack.resources import client
from devstack.server import EMAILS_PATH

SINK_TABLE = "umavez-local-sink"
RECEIVE_LIMIT = 10  # SQS's most per receive
REFERENCE = re.compile(r"Reference: (obx_[0-9a-f]{64})")


def create_sink_table(endpoint_url: str) -> None:
    client("dynamodb", endpoint_url).create_table(
        TableName=SINK_TABLE,
        KeySchema=[{"AttributeName": "outbox_id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "outbox_id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )


class SinkRecorder(Poller):
    def __init__(self, endpoint_url: str, sink_queue_url: str) -> None:
        super().__init__("sink-recorder")
        self._sqs = client("sqs", endpoint_url)
        self._dynamodb = client("dynamodb", endpoint_url)
        self._queue_url = sink_queue_url
        self._lock = threading.Lock()
        self.counts: dict[str, Counter[str]] = {}
        self._dirty: set[str] = set()

    def poll_once(self) -> bool:
        """Count one receive's events. Only a full receive is polled again at once: events
        trickle in one by one, and a receive at every arrival cost the functions' process
        and the server a request for each (a batching window, as Lambda's)."""
        messages = self._sqs.receive_message(
            QueueUrl=self._queue_url, MaxNumberOfMessages=RECEIVE_LIMIT
        ).get("Messages", [])
        for message in messages:
            self.count(json.loads(message["Body"])["detail"]["idempotency_key"], "eventbridge")
        if messages:
            self._sqs.delete_message_batch(
                QueueUrl=self._queue_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
                    for i, m in enumerate(messages)
                ],
            )
        if not messages:
            self._flush()
        return len(messages) == RECEIVE_LIMIT

    def count(self, key: str, channel: str) -> None:
        with self._lock:
            self.counts.setdefault(key, Counter())[channel] += 1
            self._dirty.add(key)

    def _flush(self) -> None:
        """Idle time: write what changed, 25 items a request."""
        with self._lock:
            dirty = [(k, dict(self.counts[k])) for k in self._dirty]
            self._dirty.clear()
        for start in range(0, len(dirty), 25):
            self._dynamodb.batch_write_item(
                RequestItems={
                    SINK_TABLE: [
                        {
                            "PutRequest": {
                                "Item": {
                                    "outbox_id": {"S": key},
                                    **{c: {"N": str(n)} for c, n in channels.items()},
                                }
                            }
                        }
                        for key, channels in dirty[start : start + 25]
                    ]
                }
            )

    def settled(self) -> bool:
        """Nothing queued or in flight for the recorder, and every count written."""
        with self._lock:
            if self._dirty:
                return False
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self._queue_url,
            AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
        )["Attributes"]
        return not self.busy and sum(int(v) for v in attributes.values()) == 0


class HttpSink:
    """The embedded stack's HTTP notification receiver, on loopback (the one place plain http
    is allowed): it verifies every POST the way a receiver should, with the Standard Webhooks
    reference implementation and the stack's signing secret. A verified one is counted under
    `http` for its outbox key (its `webhook-id`) and answered 200; any other is counted as
    unverified and answered 401, so the sender retries it like any refusal."""

    def __init__(self, recorder: SinkRecorder) -> None:
        self.secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        self.verified = 0
        self.unverified = 0
        self._recorder = recorder
        self._lock = threading.Lock()
        webhook = Webhook(self.secret)
        sink = self

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = dict(self.headers.items())
                try:
                    webhook.verify(body, headers)
                except (WebhookVerificationError, ValueError):
                    sink.counted(None)
                    self.send_response(401)
                else:
                    sink.counted(self.headers["webhook-id"])
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/notifications"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http-sink", daemon=True
        )

    def counted(self, outbox_id: str | None) -> None:
        with self._lock:
            if outbox_id is None:
                self.unverified += 1
                return
            self.verified += 1
        self._recorder.count(outbox_id, "http")

    def start(self) -> HttpSink:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():  # shutdown() waits for a serving loop that never began
            self._server.shutdown()
        self._server.server_close()


def sink_counts(endpoint_url: str) -> dict[str, dict[str, int]]:
    """Per outbox key, how many times each sink received it."""
    counts: dict[str, dict[str, int]] = {}
    dynamodb: Any = client("dynamodb", endpoint_url)
    for page in dynamodb.get_paginator("scan").paginate(TableName=SINK_TABLE):
        for item in page["Items"]:
            counts[item["outbox_id"]["S"]] = {
                name: int(value["N"]) for name, value in item.items() if name != "outbox_id"
            }
    with urllib.request.urlopen(endpoint_url + EMAILS_PATH, timeout=60) as response:  # noqa: S310
        bodies = json.load(response)["bodies"]
    for body in bodies:
        for key in REFERENCE.findall(body):
            channels = counts.setdefault(key, {})
            channels["email"] = channels.get("email", 0) + 1
    return counts
