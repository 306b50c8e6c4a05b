"""An operation the in-memory services do not hold is answered with the service's own error,
naming it, as AWS answers an action it lacks: never a crash of the local server."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from devstack.memory import sqs_operations
from devstack.memory.events import MemoryEvents
from devstack.memory.operations import MemoryDynamoDB
from devstack.memory.sqs import MemorySqs, SqsError
from devstack.memory.tables import DynamoError


def _dynamodb(operation: str) -> object:
    return MemoryDynamoDB().handle(operation, {})


def _streams(operation: str) -> object:
    return MemoryDynamoDB().handle_streams(operation, {})


def _sqs(operation: str) -> object:
    return sqs_operations.handle(MemorySqs(), operation, {})


def _events(operation: str) -> object:
    return MemoryEvents(MemorySqs()).handle(operation, {})


@pytest.mark.parametrize(
    ("ask", "error", "code"),
    [
        (_dynamodb, DynamoError, "UnknownOperationException"),
        (_streams, DynamoError, "UnknownOperationException"),
        (_sqs, SqsError, "UnsupportedOperation"),
        (_events, SqsError, "UnsupportedOperation"),
    ],
    ids=["dynamodb", "streams", "sqs", "events"],
)
def test_an_operation_not_held_in_memory_is_the_services_error_naming_it(
    ask: Callable[[str], object], error: type[DynamoError | SqsError], code: str
) -> None:
    # Given a service of the in-memory store
    # When it is asked for an operation it does not hold
    with pytest.raises(error) as raised:
        ask("RestoreFromTheMoon")

    # Then its own error code answers, naming the operation
    answered = raised.value
    assert isinstance(answered, DynamoError | SqsError)
    assert answered.code == code
    assert "RestoreFromTheMoon is not held in memory" in answered.message
