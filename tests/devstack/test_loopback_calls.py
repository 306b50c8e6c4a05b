"""Calls to the local servers skip SigV4 and urllib3 (`devstack/loopback_calls.py`): they
reach moto with the scope it routes by, answer and fail as botocore's own path does, and no
call to any other address changes."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from unittest.mock import patch

import boto3
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

from devstack import loopback_calls
from devstack.local_aws import LocalAws

FROZEN = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
FAKE_CREDENTIALS = Credentials("AKIDEXAMPLE", "fake-secret", "fake-session-token")
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})


@pytest.fixture
def installed() -> Iterator[None]:
    was = loopback_calls.installed()
    loopback_calls.install()
    yield
    if not was:
        loopback_calls.uninstall()


def _authorized(url: str, *, service: str = "sqs", region: str = "eu-west-1") -> AWSRequest:
    request = AWSRequest(
        method="POST",
        url=url,
        data=b'{"QueueName": "q"}',
        headers={"X-Amz-Target": "AmazonSQS.CreateQueue", "Authorization": "old"},
    )
    with patch("botocore.auth.get_current_datetime", return_value=FROZEN):
        SigV4Auth(FAKE_CREDENTIALS, service, region).add_auth(request)
    return request


def test_a_loopback_call_carries_a_signed_calls_scope_date_and_token(installed: None) -> None:
    # Given the local stack's calls installed
    # When a call to a loopback address is authorized
    request = _authorized("http://127.0.0.1:4566/")

    # Then it names the account, date, region and service as a signed call does, with no
    # signature worked out, and a retry's old header is gone
    assert request.headers["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261130/eu-west-1/sqs/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={loopback_calls.UNSIGNED}"
    )
    assert request.headers["X-Amz-Date"] == "20261130T120000Z"
    assert request.headers["X-Amz-Security-Token"] == "fake-session-token"


def test_a_call_to_any_other_address_is_signed_exactly_as_botocore_signs_it(
    installed: None,
) -> None:
    # Given the same call to AWS itself, authorized with and without the local calls
    url = "https://sqs.eu-west-1.amazonaws.com/"
    stamped = _authorized(url)
    loopback_calls.uninstall()
    try:
        signed = _authorized(url)
    finally:
        loopback_calls.install()

    # Then both carry the same real signature
    assert stamped.headers["Authorization"] == signed.headers["Authorization"]
    assert loopback_calls.UNSIGNED not in signed.headers["Authorization"]


def test_the_local_server_routes_a_stamped_call_by_its_region() -> None:
    # Given the local server (which installs the loopback calls) and a client of another region
    aws = LocalAws().start()
    try:
        assert loopback_calls.installed()
        secrets = boto3.client(
            "secretsmanager",
            endpoint_url=aws.endpoint_url,
            region_name="sa-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )

        # When it creates a secret (on moto, which routes by the stamp's credential scope)
        arn = secrets.create_secret(Name="stamped", SecretString="s")["ARN"]

        # Then moto read the region from the stamp: the secret lives in that region
        assert arn.startswith("arn:aws:secretsmanager:sa-east-1:")
    finally:
        aws.stop()


# -- the transport, against a server that answers as told -----------------------------------

Answer = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture
def answering() -> Iterator[Callable[[Answer], str]]:
    servers: list[ThreadingHTTPServer] = []

    def serve(answer: Answer) -> str:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer(self)

            def log_message(self, format: str, *args: Any) -> None:
                return

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def _json(handler: BaseHTTPRequestHandler, status: int, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/x-amz-json-1.0")
    handler.send_header("X-Amzn-RequestId", "req-1")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()


def _dynamodb(url: str, config: Config = NO_RETRIES) -> Any:
    return boto3.client(
        "dynamodb",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        config=config,
    )


def test_answers_and_refusals_reach_the_caller_as_botocore_parses_them(
    installed: None, answering: Callable[[Answer], str]
) -> None:
    # Given a server that answers one item, then refuses with DynamoDB's error shape
    answers = iter(
        [
            (200, b'{"Item": {"pk": {"S": "a"}, "n": {"N": "7"}}}'),
            (
                400,
                b'{"__type": "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException",'
                b' "message": "Requested resource not found"}',
            ),
        ]
    )
    url = answering(lambda handler: _json(handler, *next(answers)))
    dynamodb = _dynamodb(url)

    # When a read is made, then another
    read = dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}})
    with pytest.raises(ClientError) as refused:
        dynamodb.get_item(TableName="t", Key={"pk": {"S": "a"}})

    # Then the item and the headers (by any case) arrive parsed, and the refusal is botocore's
    assert read["Item"] == {"pk": {"S": "a"}, "n": {"N": "7"}}
    assert read["ResponseMetadata"]["RequestId"] == "req-1"
    assert refused.value.response["Error"]["Code"] == "ResourceNotFoundException"


def test_a_kept_connection_the_server_closed_is_opened_again(
    installed: None, answering: Callable[[Answer], str]
) -> None:
    # Given a server that closes every connection once it has answered, without saying so
    closed = threading.Event()

    def answer_then_close(handler: BaseHTTPRequestHandler) -> None:
        _json(handler, 200, b"{}")
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)
        closed.set()

    url = answering(answer_then_close)
    dynamodb = _dynamodb(url)

    # When calls follow one another, each once the server closed the last one's connection
    # (no retries allowed)
    for _ in range(4):
        closed.clear()
        dynamodb.describe_limits()
        assert closed.wait(5)
    # Then each found its kept connection closed and opened a new one: none failed


def test_no_server_listening_is_an_endpoint_connection_error(installed: None) -> None:
    # Given a loopback port nobody listens on
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    # When a call is made, then botocore's own error says so
    with pytest.raises(EndpointConnectionError):
        _dynamodb(f"http://127.0.0.1:{port}").describe_limits()


def test_a_server_that_never_answers_is_a_read_timeout(
    installed: None, answering: Callable[[Answer], str]
) -> None:
    # Given a server that holds every call past the client's read timeout
    release = threading.Event()

    def hold(_handler: BaseHTTPRequestHandler) -> None:
        release.wait(5)

    url = answering(hold)
    dynamodb = _dynamodb(url, NO_RETRIES.merge(Config(read_timeout=0.2, connect_timeout=1)))

    # When a call is made, then it times out as botocore's own path does
    try:
        with pytest.raises(ReadTimeoutError):
            dynamodb.describe_limits()
    finally:
        release.set()


def test_calls_over_https_to_other_addresses_or_streamed_go_through_urllib3(
    installed: None,
) -> None:
    # Given the original send, watched
    sent: list[str] = []

    def original(_session: Any, request: Any) -> str:
        sent.append(request.url)
        return "urllib3"

    class Request:
        def __init__(self, url: str, stream_output: bool = False) -> None:
            self.url, self.stream_output, self.body = url, stream_output, b""
            self.headers: dict[str, str] = {}

    # When a call to AWS, a streamed loopback call and one to loopback over HTTPS are sent
    with patch.object(loopback_calls, "_original_send", original):
        sqs: Any = boto3.Session().client("sqs", region_name="us-east-1")
        session = sqs._endpoint.http_session
        results: list[Any] = [
            loopback_calls._send(session, Request("https://sqs.us-east-1.amazonaws.com/")),
            loopback_calls._send(session, Request("http://127.0.0.1:1/", stream_output=True)),
            loopback_calls._send(session, Request("https://localhost/")),
        ]

    # Then all went the original way
    assert results == ["urllib3"] * 3
    assert sent == [
        "https://sqs.us-east-1.amazonaws.com/",
        "http://127.0.0.1:1/",
        "https://localhost/",
    ]
