"""Lambda event and context shapes as the AWS runtime delivers them."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

QUEUE_ARN = "arn:aws:sqs:us-east-1:123456789012:umavez-webhooks"


@dataclass
class FakeLambdaContext:
    function_name: str = "umavez-process"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:umavez-process"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    # An invocation's start with room to spare: the senders need ~40 s for an item's worst case.
    remaining_ms: Callable[[], int] = lambda: 120_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms()


def sqs_record(body: str, attributes: dict[str, str], receive_count: int = 1) -> dict[str, Any]:
    return {
        "messageId": str(uuid.uuid4()),
        "receiptHandle": f"handle-{uuid.uuid4()}",
        "body": body,
        "attributes": {
            "ApproximateReceiveCount": str(receive_count),
            "SentTimestamp": "1764460800000",
            "SenderId": "AROAEXAMPLE:umavez-ingest",
            "ApproximateFirstReceiveTimestamp": "1764460800100",
        },
        "messageAttributes": {
            name: {
                "stringValue": value,
                "stringListValues": [],
                "binaryListValues": [],
                "dataType": "String",
            }
            for name, value in attributes.items()
        },
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": QUEUE_ARN,
        "awsRegion": "us-east-1",
    }


def sqs_event(*records: dict[str, Any]) -> dict[str, Any]:
    return {"Records": list(records)}


# A header or query parameter sent more than once is given as the list of its values, in order.
Values = Mapping[str, str | list[str]]
EVENTS_DIR = Path(__file__).resolve().parents[1] / "events" / "apigateway"
SOURCE_IP = "203.0.113.10"
# Added by API Gateway to every request it forwards, whichever provider sent it.
TRANSPORT_HEADERS = (
    "host",
    "x-amzn-trace-id",
    "x-forwarded-for",
    "x-forwarded-port",
    "x-forwarded-proto",
)


def _listed(values: Mapping[str, str | list[str]] | None) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in (values or {}).items()}


def api_gateway_event(
    provider: str,
    body: bytes,
    headers: Values,
    method: str = "POST",
    query: Values | None = None,
    base64_encoded: bool = False,
) -> dict[str, Any]:
    """An API Gateway REST proxy event (payload 1.0) for POST /webhooks/{provider}: the single
    value maps hold the last value of a repeated name, the multi-value maps all of them."""
    multi_headers = _listed(headers)
    multi_query = _listed(query) or None
    return {
        "resource": "/webhooks/{provider}",
        "path": f"/webhooks/{provider}",
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in multi_headers.items()},
        "multiValueHeaders": multi_headers,
        "queryStringParameters": {k: v[-1] for k, v in multi_query.items()}
        if multi_query
        else None,
        "multiValueQueryStringParameters": multi_query,
        "pathParameters": {"provider": provider},
        "requestContext": {
            "resourcePath": "/webhooks/{provider}",
            "httpMethod": method,
            "stage": "prod",
            "requestId": str(uuid.uuid4()),
            "identity": {"sourceIp": SOURCE_IP, "userAgent": "Stripe/1.0"},
        },
        "body": base64.b64encode(body).decode() if base64_encoded else body.decode("utf-8"),
        "isBase64Encoded": base64_encoded,
    }


def http_api_event(
    provider: str,
    body: bytes,
    headers: Values,
    method: str = "POST",
    query: Values | None = None,
    base64_encoded: bool = False,
) -> dict[str, Any]:
    """An HTTP API event (payload 2.0) for the same request, from the real shape in
    tests/events/apigateway: header names lower-case, a repeated header's or parameter's values
    comma-joined, cookies apart, the raw query string beside the decoded parameters, the method
    and source address under requestContext.http."""
    event = json.loads((EVENTS_DIR / "http_api_v2.stripe.json").read_text())
    multi_headers: dict[str, list[str]] = {}
    for name, values in _listed(headers).items():
        multi_headers.setdefault(name.lower(), []).extend(values)
    cookies = [c for value in multi_headers.pop("cookie", []) for c in value.split("; ")]
    transport = {k: v for k, v in event["headers"].items() if k in TRANSPORT_HEADERS}
    multi_query = _listed(query)
    path = f"/live/webhooks/{provider}"
    event.update(
        {
            "rawPath": path,
            "rawQueryString": urlencode(
                [(k, v) for k, values in multi_query.items() for v in values]
            ),
            "headers": {
                **transport,
                "content-length": str(len(body)),
                **{k: ",".join(v) for k, v in multi_headers.items()},
            },
            "pathParameters": {"provider": provider},
            "body": base64.b64encode(body).decode() if base64_encoded else body.decode("utf-8"),
            "isBase64Encoded": base64_encoded,
        }
    )
    if cookies:
        event["cookies"] = cookies
    if multi_query:
        event["queryStringParameters"] = {k: ",".join(v) for k, v in multi_query.items()}
    event["requestContext"]["http"].update({"method": method, "path": path, "sourceIp": SOURCE_IP})
    event["requestContext"]["requestId"] = str(uuid.uuid4())
    return event  # type: ignore[no-any-return]
