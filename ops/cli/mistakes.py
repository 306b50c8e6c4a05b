"""Ordinary mistakes, answered in one line that says what to do, with a non-zero exit.

An operator woken by an alarm types a wrong path, forgets to start the local stack, or runs with
no credentials: each is one line naming the thing and the fix, not a traceback. `--debug`
shows the traceback instead. Anything not recognised here is a defect, and keeps its traceback.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ProfileNotFound,
)

from ops.trace import LogsQueryError

# Exit status of a mistake the operator can fix (argparse's own usage errors exit 2 too).
MISTAKE = 2
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})

_MISSING_RESOURCE = frozenset(
    {"ResourceNotFoundException", "AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"}
)
_NOT_ALLOWED = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation"})
_BAD_CREDENTIALS = frozenset(
    {"UnrecognizedClientException", "InvalidClientTokenId", "ExpiredToken", "ExpiredTokenException"}
)


def explained(exc: BaseException) -> str | None:
    """One line for a mistake a person can act on; None for anything else (a defect)."""
    if isinstance(exc, FileNotFoundError):
        return f"{exc.filename}: no such file; check the path (it is read from {_cwd()})"
    if isinstance(exc, IsADirectoryError):
        return f"{exc.filename} is a directory; give the path of a file"
    if isinstance(exc, PermissionError) and exc.filename:
        return f"{exc.filename}: permission denied"
    if isinstance(exc, EndpointConnectionError):
        url = str(exc.kwargs.get("endpoint_url", ""))
        if urlsplit(url).hostname in LOOPBACK:
            return (
                f"nothing answers at {url}: start the local stack (`umavez serve`) or point "
                "the command at the deployed stack (--endpoint-url aws)"
            )
        return f"cannot reach {url}: check the network, the region and any proxy"
    if isinstance(exc, NoCredentialsError):
        return (
            "no AWS credentials found: set a profile (--profile, AWS_PROFILE) or run "
            "`aws configure`; the local stack needs none"
        )
    if isinstance(exc, ProfileNotFound):
        return f"{exc}: check `aws configure list-profiles`"
    if isinstance(exc, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION"
    if isinstance(exc, ClientError):
        return _client_error(exc)
    if isinstance(exc, LogsQueryError):
        return str(exc)
    return None


def _client_error(exc: ClientError) -> str | None:
    error = exc.response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    operation = exc.operation_name
    if code in _MISSING_RESOURCE:
        return (
            f"{operation}: {message or code}. Check the table or queue name (the stack's "
            "outputs name them), and that the stack is the one you meant"
        )
    if code in _NOT_ALLOWED:
        return f"{operation}: not allowed ({message or code}); check the role or profile in use"
    if code in _BAD_CREDENTIALS:
        return f"{operation}: the credentials were refused ({code}); refresh them and retry"
    if operation == "DescribeStacks" and "does not exist" in message:
        return f"{message}: check --stack-name and --region (`aws cloudformation list-stacks`)"
    return None


def _cwd() -> str:
    from pathlib import Path

    return str(Path.cwd())
