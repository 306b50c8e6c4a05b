"""ingest's AWS adapters: the queue it writes to and the secrets it verifies with."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import BotoCoreError, ClientError

from functions.shared.rejections import UnavailableError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient


# SendMessageBatch: at most 10 entries; 256 KiB for all of them together is the limit SQS
# long had (now 1 MiB): kept, so that a batch fits whichever a queue enforces.
BATCH_ENTRIES: Final = 10
BATCH_BYTES: Final = 256 * 1024


class SqsQueue:
    def __init__(self, client: SQSClient, queue_url: str) -> None:
        self._client = client
        self._queue_url = queue_url

    def send(self, body: str, attributes: Mapping[str, str]) -> str:
        try:
            response = self._client.send_message(
                QueueUrl=self._queue_url,
                MessageBody=body,
                MessageAttributes=_message_attributes(attributes),
            )
        except (ClientError, BotoCoreError) as exc:
            raise UnavailableError("enqueue_failed", "could not enqueue; retry") from exc
        return response["MessageId"]

    def send_batch(self, messages: Sequence[tuple[str, Mapping[str, str]]]) -> list[str | None]:
        """Enqueue many, ten a request (fewer when large): each message's id, or None for one
        the queue refused (the others are enqueued all the same). Raises UnavailableError
        when a request fails as a whole: which of that request's messages got in is unknown."""
        ids: list[str | None] = []
        for chunk in _batches(messages):
            try:
                response = self._client.send_message_batch(
                    QueueUrl=self._queue_url,
                    Entries=[
                        {
                            "Id": str(n),
                            "MessageBody": body,
                            "MessageAttributes": _message_attributes(attributes),
                        }
                        for n, (body, attributes) in enumerate(chunk)
                    ],
                )
            except (ClientError, BotoCoreError) as exc:
                raise UnavailableError("enqueue_failed", "could not enqueue; retry") from exc
            sent = {
                int(entry["Id"]): entry["MessageId"] for entry in response.get("Successful", [])
            }
            ids += [sent.get(n) for n in range(len(chunk))]
        return ids


def _message_attributes(attributes: Mapping[str, str]) -> dict[str, Any]:
    return {
        name: {"DataType": "String", "StringValue": value} for name, value in attributes.items()
    }


def sqs_message_bytes(body: str, attributes: Mapping[str, str]) -> int:
    """A message's size as SQS holds it to the queue's MaximumMessageSize: the body's bytes
    plus each attribute's name, data type and value."""
    return len(body.encode()) + sum(
        len(name.encode()) + len("String") + len(value.encode())
        for name, value in attributes.items()
    )


def _batches(
    messages: Sequence[tuple[str, Mapping[str, str]]],
) -> Iterator[list[tuple[str, Mapping[str, str]]]]:
    """Consecutive runs of at most BATCH_ENTRIES messages and BATCH_BYTES (bodies, attribute
    names and values, as SQS counts them). A message over the limit goes alone; SQS refuses
    that whole request (`BatchRequestTooLong`), as it refuses a SendMessage that large: the
    replay stops there, on an UnavailableError."""
    chunk: list[tuple[str, Mapping[str, str]]] = []
    size = 0
    for body, attributes in messages:
        weight = sqs_message_bytes(body, attributes)
        if chunk and (len(chunk) == BATCH_ENTRIES or size + weight > BATCH_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append((body, attributes))
        size += weight
    if chunk:
        yield chunk


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
