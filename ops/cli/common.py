"""What the `umavez` commands share: the local stack's ports, the options naming where the
stack is, and its clients."""

from __future__ import annotations

import argparse
from typing import Any

from infra.config import DEFAULT_API_TYPE, ApiType

DEFAULT_PORT = 8750
LOCAL_PROVIDER_APIS = f"http://127.0.0.1:{DEFAULT_PORT + 2}"  # `serve`'s fake provider APIs


def provider_apis_beside(endpoint_url: str) -> str:
    """The fake provider APIs of the local stack whose AWS is at `endpoint_url`: `serve --port
    P` serves AWS on P+1 and them on P+2."""
    import urllib.parse

    url = urllib.parse.urlsplit(endpoint_url)
    if url.port is None:
        return LOCAL_PROVIDER_APIS
    return f"{url.scheme}://{url.hostname}:{url.port + 1}"


def add_api_type(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-type",
        type=ApiType,
        choices=list(ApiType),
        default=DEFAULT_API_TYPE,
        help="the API Gateway the webhook front plays, as the stack's apiType: an HTTP API"
        " (payload 2.0 events) or a REST API (payload 1.0); default: %(default)s",
    )


def add_endpoint_url(
    parser: argparse.ArgumentParser, deployed: str = "the deployed stack", *, by_name: bool = True
) -> None:
    """Where the stack is: the local one (default), or a deployed one by its name (its
    resources from its outputs), or `--endpoint-url aws` with physical names given."""
    parser.add_argument(
        "--endpoint-url",
        default=f"http://127.0.0.1:{DEFAULT_PORT + 1}",
        help=f"local stack (default) or 'aws' for {deployed} (with physical names)",
    )
    if not by_name:
        return
    parser.add_argument(
        "--stack-name", help="a deployed stack: its tables and queues from its outputs"
    )
    parser.add_argument("--region", help="with --stack-name: default the profile's")
    parser.add_argument("--profile", help="with --stack-name: an AWS CLI profile")


def operations_client(service: str, endpoint_url: str) -> Any:
    """A client of the local stack's AWS, or of the deployed stack's (`aws`)."""
    import boto3

    from ops.local import client

    if endpoint_url != "aws":
        return client(service, endpoint_url)
    return boto3.client(service)  # type: ignore[call-overload]  # the service is a variable


def add_provider_api_options(parser: argparse.ArgumentParser) -> None:
    """Where the provider's API and its credentials are: the stage's secrets, and the URL."""
    parser.add_argument(
        "--stage", default=None, help="secrets umavez/STAGE/...: default local, or prod on aws"
    )
    parser.add_argument(
        "--api-url",
        default=None,
        help=f"the provider's API (default: the real one; locally {LOCAL_PROVIDER_APIS})",
    )
