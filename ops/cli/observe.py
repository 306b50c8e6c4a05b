"""Looking at the running pipeline: `status` (its health on one screen) and `trace` (the journey
of one event, or of one order's events)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from typing import Any

from functions.shared.tables import DEFAULT_LEDGER_TABLE, DEFAULT_OUTBOX_TABLE, TableNames
from ops.cli.common import (
    add_endpoint_url,
    add_provider_api_options,
    operations_client,
    provider_apis_beside,
)

HEALTHY, NEEDS_PERSON = 0, 1


def add_parsers(commands: Any) -> None:
    status = commands.add_parser(
        "status",
        help="the pipeline's health on one screen; exit 1 when a person is needed",
        description="Queue depth and oldest message, dead letters, waiting and unmatched "
        "deliveries, dead and overdue notifications, the last reconciliation, the last "
        "statement passes, Asaas's webhooks (with the stage's Asaas key), the stack's "
        "alarms in ALARM. Exit status: 0 healthy, 1 a person is needed, 2 a mistake.",
    )
    status.add_argument("--json", action="store_true", help="machine-readable output")
    _where(status)
    status.add_argument(
        "--dlq-url", default=None, help="the dead-letter queue (default: the local stack's)"
    )
    status.add_argument(
        "--state-machine-arn",
        default=None,
        help="deployed: the reconciliation's state machine (its failed runs are read)",
    )
    add_provider_api_options(status)  # Asaas's webhooks API, with the stage's Asaas key
    status.set_defaults(run=run_status, stack_created_at=None)

    trace = commands.add_parser(
        "trace",
        help="the journey of one event (or of every event of an order): ingest, process, outbox",
    )
    trace.add_argument("id", help="a provider event id (evt_..., a notification id) or an order id")
    trace.add_argument("--json", action="store_true", help="machine-readable output")
    trace.add_argument(
        "--since",
        type=parse_window,
        default="7d",
        help="deployed: how far back the logs are read (30m, 24h, 7d; default %(default)s)",
    )
    trace.add_argument(
        "--log-group",
        action="append",
        default=[],
        help="deployed without --stack-name: a function's log group (repeat)",
    )
    _where(trace)
    trace.set_defaults(run=run_trace)


def _where(parser: argparse.ArgumentParser) -> None:
    add_endpoint_url(parser)
    parser.add_argument("--ledger-table", default=DEFAULT_LEDGER_TABLE)
    parser.add_argument("--outbox-table", default=DEFAULT_OUTBOX_TABLE)
    parser.add_argument(
        "--queue-url", default=None, help="the webhook queue (default: the local stack's)"
    )


def run_status(args: argparse.Namespace) -> int:
    import functools

    from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
    from ops.asaas_webhooks import SECRET, read_webhooks, stack_key
    from ops.status import Pipeline, read_status

    local = args.endpoint_url != "aws"
    if not local and not (
        args.queue_url
        and args.dlq_url
        and args.ledger_table != DEFAULT_LEDGER_TABLE
        and args.outbox_table != DEFAULT_OUTBOX_TABLE
    ):
        print(
            "--endpoint-url aws needs --queue-url, --dlq-url, --ledger-table and --outbox-table "
            "(or --stack-name NAME, which finds them)",
            file=sys.stderr,
        )
        return 2
    client = _clients(args.endpoint_url)
    if local:
        from ops.local import (
            DEAD_LETTER_QUEUE_NAME,
            LOCAL_RECONCILE_EVERY_SECONDS,
            WEBHOOK_QUEUE_NAME,
        )

        sqs = client("sqs")
        queue_url = args.queue_url or sqs.get_queue_url(QueueName=WEBHOOK_QUEUE_NAME)["QueueUrl"]
        dlq_url = args.dlq_url or sqs.get_queue_url(QueueName=DEAD_LETTER_QUEUE_NAME)["QueueUrl"]
        every = LOCAL_RECONCILE_EVERY_SECONDS
    else:
        from infra.settings import SCHEDULE_MINUTES

        every = SCHEDULE_MINUTES["reconciliation"] * 60
        queue_url, dlq_url = args.queue_url, args.dlq_url
    stage = args.stage or ("local" if local else "prod")
    asaas_key = stack_key(client("secretsmanager"), f"umavez/{stage}/{SECRET}")
    beside = provider_apis_beside(args.endpoint_url) if local else ASAAS_BASE_URL
    asaas_api = args.api_url or beside
    pipeline = Pipeline(
        args.ledger_table,
        args.outbox_table,
        queue_url,
        dlq_url,
        every,
        getattr(args, "stack_name", None),
        args.state_machine_arn,
        args.stack_created_at,
        functools.partial(read_webhooks, asaas_key, asaas_api),
    )
    status = read_status(pipeline, client, time.time())
    print(json.dumps(status.to_json(), indent=2) if args.json else status.render())
    return NEEDS_PERSON if status.needs_person else HEALTHY


def run_trace(args: argparse.Namespace) -> int:
    from ops.trace import InsightsLogs, LocalLogs, LogSource, trace

    local = args.endpoint_url != "aws"
    client = _clients(args.endpoint_url)
    logs: LogSource
    if local:
        from ops.local import stack_log_path

        logs = LocalLogs(stack_log_path(args.endpoint_url))
    else:
        groups = args.log_group or (
            function_log_groups(client("cloudformation"), args.stack_name)
            if args.stack_name
            else []
        )
        if not groups:
            print(
                "--endpoint-url aws needs --stack-name NAME (or the functions' --log-group)",
                file=sys.stderr,
            )
            return 2
        logs = InsightsLogs(client("logs"), groups, args.since)
    names = TableNames(args.ledger_table, args.outbox_table)
    journey = trace(args.id, client("dynamodb"), names, logs)
    if not journey.found:
        where = "the local stack's log" if local else "the logs of the window (--since)"
        print(
            f"umavez trace: nothing found for {args.id!r} in the ledger or {where}: check the id "
            "(a provider event id, or an order id)" + ("" if local else ", or widen --since"),
            file=sys.stderr,
        )
        return 1
    print(json.dumps(journey.to_json(), indent=2, default=str) if args.json else journey.render())
    return 0


def function_log_groups(cloudformation: Any, stack_name: str) -> list[str]:
    """The functions' log groups, as the stack's output `FunctionLogGroups` names them (not
    the API's access logs nor the state machine's: a Logs Insights query is billed by the
    bytes it scans); a stack without that output: every log group it made."""
    from ops.stack import stack_outputs

    named = stack_outputs(cloudformation, stack_name).get("FunctionLogGroups", "")
    if named:
        return sorted(name for name in named.split(",") if name)
    return sorted(
        r["PhysicalResourceId"]
        for page in cloudformation.get_paginator("list_stack_resources").paginate(
            StackName=stack_name
        )
        for r in page["StackResourceSummaries"]
        if r["ResourceType"] == "AWS::Logs::LogGroup" and r.get("PhysicalResourceId")
    )


def parse_window(text: str) -> float:
    """`30m`, `24h`, `7d` (or seconds): a window in seconds; anything else is refused."""
    match = re.fullmatch(r"(\d+)([smhd]?)", text.strip())
    if not match or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"--since {text!r}: a duration such as 30m, 24h or 7d")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}[match.group(2)]
    return float(int(match.group(1)) * unit)


def _clients(endpoint_url: str) -> Any:
    def client(service: str) -> Any:
        return operations_client(service, endpoint_url)

    return client
