"""ingest's AWS adapters: the queue it writes to and the secrets it verifies with."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import BotoCoreError, ClientError

from functions.ingest.errors import UnavailableError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


class SqsQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send(self, body: str, attributes: Mapping[str, str]) -> str:
        try:
            response = self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=body,
                MessageAttributes={
                    name: {"DataType": "String", "StringValue": value}
                    for name, value in attributes.items()
                },
            )
        except (ClientError, BotoCoreError) as exc:
            raise UnavailableError("enqueue_failed", "could not enqueue; retry") from exc
        return response["MessageId"]


class SecretsManagerStore:
    """Active secrets per provider, read through Powertools Parameters (cached `max_age`).

    A secret's value is `{"active": ["newest", "previous"]}` (several while rotating) or a
    plain string. Removing a secret from `active` retires it within `max_age` seconds.
    """

    def __init__(self, secret_names: Mapping[str, str], fetch: Callable[[str], Any]) -> None:
        self._names = secret_names
        self._fetch = fetch

    def active_secrets(self, provider: str) -> tuple[str, ...]:
        name = self._names.get(provider)
        if name is None:
            raise UnavailableError("secret_not_configured", f"no secret set for {provider}")
        try:
            value = self._fetch(name)
        except GetParameterError as exc:
            raise UnavailableError("secrets_unavailable", "could not read the secret") from exc
        secrets = _active(value)
        if not secrets:
            raise UnavailableError("secret_not_configured", f"the {provider} secret is empty")
        return secrets


def _active(value: Any) -> tuple[str, ...]:
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return (value.strip(),) if value.strip() else ()
    if isinstance(value, dict):
        value = value.get("active", [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return ()
    return tuple(s.strip() for s in value if isinstance(s, str) and s.strip())
