"""SQS's operations over the queues in memory (`sqs.py`), by the names the JSON protocol's
`X-Amz-Target: AmazonSQS.<Operation>` carries."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from devstack.memory.dispatch import handler_for
from devstack.memory.sqs import MAX_BATCH, MemorySqs, SqsError

Request = Mapping[str, Any]
Answer = dict[str, Any]


def _create_queue(sqs: MemorySqs, request: Request) -> Answer:
    name = str(request["QueueName"])
    attributes = {k: str(v) for k, v in (request.get("Attributes") or {}).items()}
    if name.endswith(".fifo") != (attributes.get("FifoQueue") == "true"):
        raise SqsError(
            "InvalidParameterValue",
            "The name of a FIFO queue can only include alphanumeric "
            "characters, hyphens, or underscores, must end with .fifo suffix.",
        )
    return {"QueueUrl": sqs.create(name, attributes).url}


def _get_queue_url(sqs: MemorySqs, request: Request) -> Answer:
    return {"QueueUrl": sqs.queue(str(request["QueueName"])).url}


def _list_queues(sqs: MemorySqs, request: Request) -> Answer:
    prefix = str(request.get("QueueNamePrefix", ""))
    urls = [q.url for name, q in sorted(sqs.queues.items()) if name.startswith(prefix)]
    return {"QueueUrls": urls} if urls else {}


def _get_queue_attributes(sqs: MemorySqs, request: Request) -> Answer:
    queue = sqs.queue(request["QueueUrl"])
    found = sqs.attributes(queue, list(request.get("AttributeNames") or []))
    return {"Attributes": found} if found else {}


def _set_queue_attributes(sqs: MemorySqs, request: Request) -> Answer:
    queue = sqs.queue(request["QueueUrl"])
    queue.attributes.update({k: str(v) for k, v in request["Attributes"].items()})
    sqs._redrive(queue)
    return {}


def _purge_queue(sqs: MemorySqs, request: Request) -> Answer:
    sqs.queue(request["QueueUrl"]).messages.clear()
    return {}


def _delete_queue(sqs: MemorySqs, request: Request) -> Answer:
    del sqs.queues[sqs.queue(request["QueueUrl"]).name]
    return {}


def _send_message(sqs: MemorySqs, request: Request) -> Answer:
    return sqs.send(sqs.queue(request["QueueUrl"]), request)


def _entries(request: Request) -> list[Mapping[str, Any]]:
    entries = list(request.get("Entries") or [])
    if not entries:
        raise SqsError("EmptyBatchRequest", "There should be at least one entry in the request.")
    if len(entries) > MAX_BATCH:
        raise SqsError(
            "TooManyEntriesInBatchRequest",
            f"Maximum number of entries per request are {MAX_BATCH}. You have sent {len(entries)}.",
        )
    ids = [e["Id"] for e in entries]
    if len(set(ids)) != len(ids):
        raise SqsError("BatchEntryIdsNotDistinct", "Two or more batch entries have the same Id.")
    return entries


def _batch(
    sqs: MemorySqs, request: Request, each: Callable[[Any, Mapping[str, Any]], Answer]
) -> Answer:
    """A batch's entries one by one: the successful ones and the failed ones, each by Id."""
    queue = sqs.queue(request["QueueUrl"])
    successful, failed = [], []
    for entry in _entries(request):
        try:
            successful.append({"Id": entry["Id"], **each(queue, entry)})
        except SqsError as error:
            failed.append(
                {
                    "Id": entry["Id"],
                    "SenderFault": True,
                    "Code": error.code,
                    "Message": error.message,
                }
            )
    return {"Successful": successful, "Failed": failed}


def _send_message_batch(sqs: MemorySqs, request: Request) -> Answer:
    return _batch(sqs, request, sqs.send)


def _receive_message(sqs: MemorySqs, request: Request) -> Answer:
    count = int(request.get("MaxNumberOfMessages", 1))
    if not 1 <= count <= MAX_BATCH:
        raise SqsError(
            "InvalidParameterValue",
            f"Value {count} for parameter MaxNumberOfMessages is invalid. Reason: must be "
            "between 1 and 10, if provided.",
        )
    messages = sqs.receive(sqs.queue(request["QueueUrl"]), request)
    return {"Messages": messages} if messages else {}


def _delete_message(sqs: MemorySqs, request: Request) -> Answer:
    sqs.delete(sqs.queue(request["QueueUrl"]), str(request["ReceiptHandle"]))
    return {}


def _delete_message_batch(sqs: MemorySqs, request: Request) -> Answer:
    def delete(queue: Any, entry: Mapping[str, Any]) -> Answer:
        sqs.delete(queue, str(entry["ReceiptHandle"]))
        return {}

    return _batch(sqs, request, delete)


def _change_message_visibility(sqs: MemorySqs, request: Request) -> Answer:
    queue = sqs.queue(request["QueueUrl"])
    sqs.change_visibility(queue, str(request["ReceiptHandle"]), int(request["VisibilityTimeout"]))
    return {}


def _change_message_visibility_batch(sqs: MemorySqs, request: Request) -> Answer:
    def change(queue: Any, entry: Mapping[str, Any]) -> Answer:
        timeout = int(entry.get("VisibilityTimeout", 0))
        sqs.change_visibility(queue, str(entry["ReceiptHandle"]), timeout)
        return {}

    return _batch(sqs, request, change)


OPERATIONS: dict[str, Callable[[MemorySqs, Request], Answer]] = {
    "CreateQueue": _create_queue,
    "GetQueueUrl": _get_queue_url,
    "ListQueues": _list_queues,
    "GetQueueAttributes": _get_queue_attributes,
    "SetQueueAttributes": _set_queue_attributes,
    "PurgeQueue": _purge_queue,
    "DeleteQueue": _delete_queue,
    "SendMessage": _send_message,
    "SendMessageBatch": _send_message_batch,
    "ReceiveMessage": _receive_message,
    "DeleteMessage": _delete_message,
    "DeleteMessageBatch": _delete_message_batch,
    "ChangeMessageVisibility": _change_message_visibility,
    "ChangeMessageVisibilityBatch": _change_message_visibility_batch,
}


def handle(sqs: MemorySqs, operation: str, request: Request) -> Answer:
    """One request: its answer, or the SqsError SQS would answer with."""
    handler = handler_for(OPERATIONS, operation, SqsError, "UnsupportedOperation")
    with sqs.lock:
        return handler(sqs, request)
