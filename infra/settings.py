"""Deployment settings shared by the CDK stack and the embedded local stack.

No aws_cdk import here: the local stack reads these without paying for CDK.
"""

from __future__ import annotations

import math
import re
import tomllib
from pathlib import Path
from typing import Final

from infra.assets import ROOT
from infra.reconciliation import RECONCILIATION

# Each Lambda: its handler and the packages its asset holds besides `functions/__init__.py`.
# A function that reads webhooks holds every provider's package (functions/stripe/, …).
PROVIDER_PACKAGES: Final = ("stripe", "mercadopago", "asaas")
LAMBDA_PACKAGES: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "ingest": ("functions.ingest.handler.lambda_handler", ("shared", *PROVIDER_PACKAGES, "ingest")),
    "process": (
        "functions.process.handler.lambda_handler",
        ("shared", *PROVIDER_PACKAGES, "store", "process"),
    ),
    "waiting": (
        "functions.process.waiting_handler.lambda_handler",
        ("shared", *PROVIDER_PACKAGES, "store", "process"),
    ),
    "outbox": ("functions.outbox.handler.lambda_handler", ("shared", "store", "outbox")),
    "sweeper": ("functions.outbox.sweeper_handler.lambda_handler", ("shared", "store", "outbox")),
    "reconciliation": (
        "functions.reconcile.handler.lambda_handler",
        ("shared", "store", "reconcile"),
    ),
    # The statement books what it finds through process's own processor.
    "statement": (
        "functions.statement.handler.lambda_handler",
        ("shared", *PROVIDER_PACKAGES, "store", "process", "statement"),
    ),
}
# Each function's memory: more memory, more CPU. The cost model bills these as deployed.
LAMBDA_MEMORY_MB: Final[dict[str, int]] = {
    "ingest": 512,  # cold starts are part of the contract
    "process": 256,
    "waiting": 256,
    "outbox": 256,
    "sweeper": 256,
    "reconciliation": 1024,
    "statement": 1024,  # the CPU of its booking workers (functions/statement/schedule.py)
}
# What the stack writes into the secrets it creates; an operator replaces it after deploy
# (`umavez preflight` tells a secret still holding it).
WEBHOOK_SECRET_PLACEHOLDER: Final = '{"active": []}'  # noqa: S105 - no secret: an empty list
API_CREDENTIAL_PLACEHOLDER: Final = "set-me"
MAX_RECEIVE_COUNT: Final = 5
# What `umavez preflight` reads of the account: CDK's bootstrap version (the default
# qualifier's), and the alarm it sets to ALARM with --test-alarm (`<stack>-DeadLetters`).
BOOTSTRAP_VERSION_PARAMETER: Final = "/cdk-bootstrap/hnb659fds/version"
TEST_ALARM: Final = "DeadLetters"
# SQS's largest (1 MiB). A message's size counts its attributes too: at the old 256 KiB default,
# a body ingest accepts (up to 256 KiB) with its attributes was refused, and ingest answered 503
# to every retry of it. The dead-letter queue takes the same, or a redrive into it would fail.
WEBHOOK_MESSAGE_MAX_BYTES: Final = 1024 * 1024
PROCESS_TIMEOUT_SECONDS: Final = 30
# AWS's rule for a queue a Lambda consumes: its visibility timeout at least six times the
# function's timeout. A record failed or cut short is received again that long after.
VISIBILITY_TIMEOUT_FACTOR: Final = 6
# How long an accepted delivery may wait in the webhook queue before SQS deletes it.
WEBHOOK_QUEUE_RETENTION_DAYS: Final = 4
# The senders start an item only while its worst case (functions/outbox/budget.py, ~40 s with
# every sink at its timeouts) fits in what is left: these leave room for many items and one
# slow one. The sweeper's run ends before the next is due (every 5 minutes).
OUTBOX_TIMEOUT_SECONDS: Final = 120
SWEEPER_TIMEOUT_SECONDS: Final = 240
PROCESS_BATCH_SIZE: Final = 10
OUTBOX_BATCH_SIZE: Final = 10
OUTBOX_RETRY_ATTEMPTS: Final = 3
# Concurrent batches per stream shard. Every outbox item has a key of its own (Lambda keeps the
# order of records of one key only), so a burst of notifications is sent by this many
# invocations at once instead of one batch after another.
OUTBOX_PARALLELIZATION_FACTOR: Final = 4
# A stream record older than this is not handed to the sender: it goes to the on-failure
# queue, and the sweeper parks its item (functions/outbox/stranded.py).
OUTBOX_STREAM_MAX_RECORD_AGE_SECONDS: Final = 3600
# The scheduled functions: how often each runs, and how long one run may take.
SCHEDULE_MINUTES: Final[dict[str, int]] = {
    "sweeper": 5,
    "waiting": 5,
    "reconciliation": 60,
    "statement": 60,
}
WAITING_TIMEOUT_SECONDS: Final = 120
# A statement run reads window after window while twice the last one's time is left: Lambda's
# longest, so that a provider behind by hours catches up in few runs.
STATEMENT_TIMEOUT_SECONDS: Final = 900
# The reconciliation runs as a state machine every hour; each invocation of its function (a
# plan, a unit's share of orders, a finish) has this long, sized from a unit's share.
RECONCILIATION_TIMEOUT_SECONDS: Final = RECONCILIATION.check_timeout_seconds
# The functions' runtime and architecture, as CDK and AWS's public parameters name them.
LAMBDA_RUNTIME: Final = "python3.13"
LAMBDA_ARCHITECTURE: Final = "arm64"
POWERTOOLS_REQUIREMENT: Final = re.compile(
    r"aws-lambda-powertools(\[[^\]]*\])?==(?P<version>[\w.]+)"
)


def pinned_powertools_version(pyproject: Path = ROOT / "pyproject.toml") -> str:
    """The Powertools release the code is tested with: the layer must be that release."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    for requirement in dependencies:
        if match := POWERTOOLS_REQUIREMENT.fullmatch(requirement.replace(" ", "")):
            return match["version"]
    raise ValueError(f"{pyproject}: aws-lambda-powertools must be pinned with ==")


def powertools_layer_parameter(version: str) -> str:
    """AWS's public SSM parameter naming the Powertools layer of one release, per region."""
    return f"/aws/service/powertools/python/{LAMBDA_ARCHITECTURE}/{LAMBDA_RUNTIME}/{version}"


# The API stage's limit, whichever API type: requests a second and the burst above it.
API_THROTTLE_RATE: Final = 200
API_THROTTLE_BURST: Final = 400
# The WAF's rate rule (REST + WAF): requests one address may send in its 5-minute window
# before it is blocked; the addresses in `providerIpAllowList` are never counted.
WAF_REQUESTS_PER_ADDRESS_PER_5_MINUTES: Final = 3000
# Ingest's time per request as the concurrency estimate counts it (warm ~50 ms; cold starts
# and slow secrets reads raise the average in a burst).
INGEST_SECONDS_PER_REQUEST: Final = 0.1
SCHEDULED_FUNCTIONS: Final = ("sweeper", "waiting")


def concurrency_needed(process_max_concurrency: int) -> dict[str, int]:
    """Concurrent executions the stack may use at once, per function group, at the API's
    limit: what the account's Lambda concurrency must hold (new accounts may have 10)."""
    return {
        "ingest": math.ceil(API_THROTTLE_RATE * INGEST_SECONDS_PER_REQUEST),
        "process": process_max_concurrency,
        # One stream shard at least, each read by this many batches at once.
        "outbox": OUTBOX_PARALLELIZATION_FACTOR,
        "scheduled": len(SCHEDULED_FUNCTIONS),
        # The hourly books check's units, side by side for a few minutes of each hour.
        "reconciliation": RECONCILIATION.max_concurrency,
    }
