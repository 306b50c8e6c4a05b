"""What preflight's checks share: the findings they make, the options they run with, a deployed
stack's outputs, and one call to the account (a resource that does not exist, or a call the
account will not answer, said as a finding)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from functions.asaas.api import BASE_URL as ASAAS_BASE_URL
from infra.config import PROVIDERS

DEFAULT_PROCESS_MAX_CONCURRENCY: Final = 5


class Verdict(StrEnum):
    OK = "ok"
    PROBLEM = "PROBLEM"  # the deploy, or the stack once deployed, would not work as it should
    NOTE = "note"  # worth knowing; nothing is wrong
    UNKNOWN = "unknown"  # the account did not answer: checked by hand (docs/deploy.md)


@dataclass(frozen=True)
class Finding:
    check: str
    verdict: Verdict
    detail: str


class PreflightError(Exception):
    """The checks cannot run at all (no credentials, no region, no endpoint): one line says
    what to do."""


Clients = Callable[[str], Any]


@dataclass(frozen=True)
class Options:
    stack_name: str
    providers: tuple[str, ...] = PROVIDERS
    # Before the deploy, what the stack will be deployed with; after it, its outputs say.
    email_sender: str | None = None
    email_configuration_set: str | None = None
    process_max_concurrency: int = DEFAULT_PROCESS_MAX_CONCURRENCY
    test_alarm: bool = False
    alarm_wait_seconds: float = 90.0
    poll_seconds: float = 5.0
    asaas_api_url: str = ASAAS_BASE_URL


@dataclass(frozen=True)
class Stack:
    """A deployed stack, as its outputs describe it."""

    outputs: dict[str, str]


class Unanswered(Exception):
    """A call the account would not answer; its finding says so."""

    def __init__(self, finding: Finding) -> None:
        super().__init__(finding.detail)
        self.finding = finding


class Missing(Exception):
    """The resource asked for does not exist."""


MISSING_CODES: Final = frozenset(
    {"ParameterNotFound", "NotFoundException", "ResourceNotFoundException", "NotFound"}
)


class AccountCalls:
    """The checks' calls to the account, through one client per service."""

    def __init__(self, clients: Clients) -> None:
        self._clients = clients

    def guarded(self, check: str, run: Callable[[], Finding]) -> Finding:
        """The check's finding, or, when a call it made was refused, what the account said."""
        try:
            return run()
        except Unanswered as unanswered:
            return Finding(check, unanswered.finding.verdict, unanswered.finding.detail)
        except Missing as missing:
            return Finding(check, Verdict.PROBLEM, f"does not exist ({missing})")

    def call(self, service: str, operation: str, action: str, **params: Any) -> Any:
        """One call; a resource that does not exist is Missing, anything else the account
        will not answer is Unanswered (its finding names the IAM action), and missing
        credentials, region or endpoint stop the run (PreflightError)."""
        try:
            return getattr(self._clients(service), operation)(**params)
        except (NoCredentialsError, NoRegionError) as exc:
            raise PreflightError(
                f"{exc}: run `aws configure` (or `aws sso login`), or pass --profile and --region"
            ) from exc
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            message = exc.response.get("Error", {}).get("Message", "")
            if code in MISSING_CODES or (code == "ValidationError" and "does not exist" in message):
                raise Missing(code) from exc
            if "AccessDenied" in code or code in {"UnauthorizedOperation", "AuthorizationError"}:
                detail = f"not allowed to call {action}: {message}"
            else:
                detail = f"{action} was not answered ({code}): {message}"
            raise Unanswered(Finding("", Verdict.UNKNOWN, detail)) from exc
        except BotoCoreError as exc:
            raise PreflightError(f"cannot reach AWS: {exc}") from exc
