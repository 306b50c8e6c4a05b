"""Reads a synthesized template's policies the way AWS evaluates them.

moto enforces no resource policy, key policy or condition: a topic whose policy lets nobody
publish works there and fails on AWS. These helpers resolve a template's intrinsic functions
for one concrete account and region, and evaluate one request against a policy document with
AWS's rules for a single policy: an explicit Deny wins, then an Allow, else the implicit deny.
Only what the stack's policies use is supported; anything else raises, so a policy that grows
past this reader fails its test instead of being misread.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

ACCOUNT = "111122223333"
REGION = "sa-east-1"
PARTITION = "aws"


class Decision(StrEnum):
    ALLOW = "allow"
    EXPLICIT_DENY = "explicit_deny"
    IMPLICIT_DENY = "implicit_deny"


class UnsupportedPolicyError(ValueError):
    """The policy uses an element or operator this reader does not evaluate."""


@dataclass(frozen=True)
class Resolver:
    """Intrinsic functions of one stack, deployed in one account and region.

    `physical` gives a logical id's `Ref` (e.g. a topic's ARN); `attributes` its `Fn::GetAtt`s.
    """

    stack_name: str = "Umavez-test"
    account: str = ACCOUNT
    region: str = REGION
    partition: str = PARTITION
    physical: Mapping[str, str] = field(default_factory=dict)
    attributes: Mapping[tuple[str, str], str] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if set(value) == {"Ref"}:
            return self._ref(value["Ref"])
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(self.resolve(p)) for p in parts)
        if set(value) == {"Fn::GetAtt"}:
            logical_id, attribute = value["Fn::GetAtt"]
            # One not given stands for a resource of the stack no request here names.
            return self.attributes.get(
                (logical_id, attribute),
                f"arn:{self.partition}:stack:{self.region}:{self.account}:{logical_id}/{attribute}",
            )
        if any(key.startswith("Fn::") for key in value):
            raise UnsupportedPolicyError(f"intrinsic not resolved here: {sorted(value)}")
        return {k: self.resolve(v) for k, v in value.items()}

    def _ref(self, name: str) -> str:
        pseudo = {
            "AWS::AccountId": self.account,
            "AWS::Region": self.region,
            "AWS::Partition": self.partition,
            "AWS::StackName": self.stack_name,
            "AWS::URLSuffix": "amazonaws.com",
        }
        if name in pseudo:
            return pseudo[name]
        return self.physical[name]


@dataclass(frozen=True)
class Request:
    """One call as AWS sees it: who (a service or an account's ARN), what, on what, and the
    request's condition context (`aws:SecureTransport`, `aws:SourceArn`, ...), all strings."""

    principal: Mapping[str, str]  # {"Service": "..."} or {"AWS": "arn:..."}
    action: str
    resource: str
    context: Mapping[str, str] = field(default_factory=dict)


def evaluate(policy: Mapping[str, Any], request: Request) -> Decision:
    """The decision of one resolved policy document for one request."""
    matching = [s for s in _statements(policy) if _applies(s, request)]
    if any(s["Effect"] == "Deny" for s in matching):
        return Decision.EXPLICIT_DENY
    if any(s["Effect"] == "Allow" for s in matching):
        return Decision.ALLOW
    return Decision.IMPLICIT_DENY


def _statements(policy: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    statements = policy["Statement"]
    statements = statements if isinstance(statements, list) else [statements]
    for statement in statements:
        unknown = set(statement) - {"Sid", "Effect", "Principal", "Action", "Resource", "Condition"}
        if unknown:
            raise UnsupportedPolicyError(f"elements not evaluated here: {sorted(unknown)}")
    return statements


def _listed(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _applies(statement: Mapping[str, Any], request: Request) -> bool:
    return (
        _principal_matches(statement.get("Principal"), request.principal)
        and any(_like(p, request.action, fold=True) for p in _listed(statement["Action"]))
        and any(_like(p, request.resource) for p in _listed(statement.get("Resource", "*")))
        and _conditions_hold(statement.get("Condition", {}), request.context)
    )


def _principal_matches(principal: Any, caller: Mapping[str, str]) -> bool:
    if principal is None:
        return True  # an identity policy: it applies to whoever holds it
    if principal == "*" or principal == {"AWS": "*"}:
        return True
    caller_account = caller.get("AWS", "::::").split(":")[4]
    return any(
        caller.get(kind) in _listed(values) or (kind == "AWS" and caller_account in _listed(values))
        for kind, values in principal.items()
    )


def like(pattern: str, value: str, fold: bool = False) -> bool:
    """Whether `value` is one of the values an IAM pattern names (an action, folding case)."""
    return _like(pattern, value, fold)


def _like(pattern: str, value: str, fold: bool = False) -> bool:
    """IAM's wildcards: `*` any run of characters, `?` one; nothing else is special."""
    if fold:
        pattern, value = pattern.lower(), value.lower()
    escaped = pattern.replace("[", "[[]")
    return fnmatch.fnmatchcase(value, escaped)


def _arn_like(pattern: str, value: str) -> bool:
    """ArnLike compares an ARN's six fields one by one, each with wildcards."""
    patterns, values = pattern.split(":", 5), value.split(":", 5)
    return len(patterns) == len(values) == 6 and all(
        _like(p, v) for p, v in zip(patterns, values, strict=True)
    )


OPERATORS: dict[str, Callable[[str, str], bool]] = {
    "StringEquals": lambda expected, actual: expected == actual,
    "StringNotEquals": lambda expected, actual: expected != actual,
    "StringLike": _like,
    "ArnLike": _arn_like,
    "ArnEquals": _arn_like,
    "Bool": lambda expected, actual: expected.lower() == actual.lower(),
    "NumericLessThanEquals": lambda expected, actual: float(actual) <= float(expected),
}


def _conditions_hold(
    conditions: Mapping[str, Mapping[str, Any]], context: Mapping[str, str]
) -> bool:
    """Every operator and every key must hold (AND); any of a key's values may match (OR). A key
    missing from the request fails its condition, unless the operator ends in IfExists."""
    for operator, keys in conditions.items():
        base = operator.removesuffix("IfExists")
        if base not in OPERATORS:
            raise UnsupportedPolicyError(f"condition operator not evaluated here: {operator}")
        compare = OPERATORS[base]
        for key, expected in keys.items():
            if key not in context:
                if operator.endswith("IfExists"):
                    continue
                return False
            matches = (compare(e, context[key]) for e in _listed(expected))
            if base.startswith(("StringNot",)):
                if not all(matches):
                    return False
            elif not any(matches):
                return False
    return True
