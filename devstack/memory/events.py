"""EventBridge in memory, for what the local stack wires: buses, rules matching an event
pattern, and SQS queues as their targets (`sqs.py`), with PutEvents delivering each event to
every matching rule's queues as EventBridge does (the event's envelope as the message body).

Patterns: each field a list of values one of which the event's must be (nested fields as
nested objects), the subset the stack's rules use; anything else is refused at PutRule.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from devstack.memory.dispatch import handler_for
from devstack.memory.sqs import ACCOUNT, MemorySqs, SqsError

Request = Mapping[str, Any]
Answer = dict[str, Any]


class EventsError(SqsError):
    """What EventBridge answers with an error."""


@dataclass
class Rule:
    name: str
    pattern: dict[str, Any]
    targets: dict[str, Answer] = field(default_factory=dict)


def matches(pattern: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    """Whether an event matches a pattern of value lists (and nested patterns)."""
    for name, wanted in pattern.items():
        value = event.get(name)
        if isinstance(wanted, dict):
            if not isinstance(value, dict) or not matches(wanted, value):
                return False
        elif value not in wanted:
            return False
    return True


def _checked(pattern: Any) -> dict[str, Any]:
    if not isinstance(pattern, dict):
        raise EventsError("InvalidEventPatternException", "Event pattern is not valid.")
    for wanted in pattern.values():
        if isinstance(wanted, dict):
            _checked(wanted)
        elif not isinstance(wanted, list) or any(isinstance(v, dict | list) for v in wanted):
            raise EventsError(
                "InvalidEventPatternException",
                "Only lists of values are held in memory (no prefix, numeric or anything-but)",
            )
    return pattern


class MemoryEvents:
    """Every event bus of one account and region; their SQS targets are `sqs`'s queues. The
    queues' lock is the one a request holds."""

    def __init__(self, sqs: MemorySqs, region: str = "us-east-1") -> None:
        self._sqs = sqs
        self._region = region
        self.buses: dict[str, dict[str, Rule]] = {"default": {}}
        self._operations: dict[str, Callable[[Request], Answer]] = {
            "CreateEventBus": self._create_event_bus,
            "PutRule": self._put_rule,
            "PutTargets": self._put_targets,
            "PutEvents": self._put_events,
        }

    def handle(self, operation: str, request: Request) -> Answer:
        handler = handler_for(self._operations, operation, EventsError, "UnsupportedOperation")
        with self._sqs.lock:
            return handler(request)

    def _arn(self, kind: str, name: str) -> str:
        return f"arn:aws:events:{self._region}:{ACCOUNT}:{kind}/{name}"

    def _bus(self, name: str | None) -> dict[str, Rule]:
        bus = self.buses.get(str(name or "default").rsplit("/", 1)[-1])
        if bus is None:
            raise EventsError("ResourceNotFoundException", f"Event bus {name} does not exist.")
        return bus

    def _create_event_bus(self, request: Request) -> Answer:
        name = str(request["Name"])
        if name in self.buses:
            raise EventsError("ResourceAlreadyExistsException", f"Event bus {name} already exists.")
        self.buses[name] = {}
        return {"EventBusArn": self._arn("event-bus", name)}

    def _put_rule(self, request: Request) -> Answer:
        bus = self._bus(request.get("EventBusName"))
        name = str(request["Name"])
        pattern = _checked(json.loads(request["EventPattern"]))
        bus[name] = Rule(name, pattern, bus[name].targets if name in bus else {})
        return {"RuleArn": self._arn("rule", name)}

    def _put_targets(self, request: Request) -> Answer:
        bus = self._bus(request.get("EventBusName"))
        rule = bus.get(str(request["Rule"]))
        if rule is None:
            raise EventsError(
                "ResourceNotFoundException", f"Rule {request['Rule']} does not exist."
            )
        for target in request["Targets"]:
            if ":sqs:" not in str(target["Arn"]) or "InputTransformer" in target:
                raise EventsError("ValidationException", "Only SQS targets are held in memory")
            rule.targets[str(target["Id"])] = dict(target)
        return {"FailedEntryCount": 0, "FailedEntries": []}

    def _put_events(self, request: Request) -> Answer:
        entries: list[Answer] = []
        for entry in request["Entries"]:
            try:
                detail = json.loads(entry["Detail"])
            except (KeyError, ValueError):
                entries.append(
                    {"ErrorCode": "MalformedDetail", "ErrorMessage": "Detail is malformed."}
                )
                continue
            event = {
                "version": "0",
                "id": str(uuid.uuid4()),
                "detail-type": entry.get("DetailType"),
                "source": entry.get("Source"),
                "account": ACCOUNT,
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "region": self._region,
                "resources": list(entry.get("Resources", [])),
                "detail": detail,
            }
            self._deliver(self._bus(entry.get("EventBusName")), event)
            entries.append({"EventId": event["id"]})
        failed = sum(1 for e in entries if "ErrorCode" in e)
        return {"FailedEntryCount": failed, "Entries": entries}

    def _deliver(self, bus: Mapping[str, Rule], event: Answer) -> None:
        for rule in bus.values():
            if not matches(rule.pattern, event):
                continue
            for target in rule.targets.values():
                queue = self._sqs.by_arn(str(target["Arn"]))
                if queue is None:
                    continue  # EventBridge drops what it cannot deliver (after retries)
                group = target.get("SqsParameters", {}).get("MessageGroupId")
                message: Answer = {"MessageBody": json.dumps(event)}
                if group:
                    message |= {"MessageGroupId": group, "MessageDeduplicationId": event["id"]}
                self._sqs.send(queue, message)
