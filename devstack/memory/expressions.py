"""DynamoDB's expressions, parsed once and evaluated over items in the wire's typed form
({"S": ...}, {"N": ...}, ...): conditions (and key conditions and filters), updates and
projections, as DynamoDB's developer guide defines them.

A parsed expression is a small tree of closures; parses are kept by their text and names (the
same few expressions come every time). Values (`:name`) are looked up when evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

Item = dict[str, Any]  # attribute name -> typed value
Values = Mapping[str, Any]  # ":name" -> typed value
Operand = Callable[[Item, Values], Any]  # a typed value, or None where the path is absent
Condition = Callable[[Item, Values], bool]
Path = tuple[str | int, ...]

_TOKEN = re.compile(
    r"\s*(?:(?P<op><>|<=|>=|[=<>(),.\[\]+-])|(?P<name>#[A-Za-z0-9_]+)"
    r"|(?P<value>:[A-Za-z0-9_]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<number>[0-9]+))"
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "BETWEEN", "SET", "REMOVE", "ADD", "DELETE"}


class ExpressionError(ValueError):
    """An expression DynamoDB would refuse (a ValidationException)."""


def tokens(text: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    position = 0
    text = text.rstrip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise ExpressionError(f"Invalid expression: unexpected {text[position:]!r}")
        kind = str(match.lastgroup)
        word = match.group(kind)
        if kind == "word" and word.upper() in _KEYWORDS:
            kind, word = "keyword", word.upper()
        found.append((kind, word))
        position = match.end()
    return found


class _Parser:
    def __init__(self, text: str, names: Mapping[str, str]) -> None:
        self._tokens = tokens(text)
        self._at = 0
        self._names = names

    def peek(self, offset: int = 0) -> tuple[str, str]:
        at = self._at + offset
        return self._tokens[at] if at < len(self._tokens) else ("end", "")

    def take(self, expected: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if token[0] == "end" or (expected is not None and token[1] != expected):
            raise ExpressionError(f"Invalid expression: expected {expected or 'more'}")
        self._at += 1
        return token

    def at(self, word: str) -> bool:
        return self.peek()[1] == word and self.peek()[0] in ("keyword", "op")

    def done(self) -> None:
        if self.peek()[0] != "end":
            raise ExpressionError(f"Invalid expression: unexpected {self.peek()[1]!r}")

    # -- paths and operands ---------------------------------------------------------------

    def path(self) -> Path:
        parts: list[str | int] = [self._name()]
        while self.at(".") or self.at("["):
            if self.take()[1] == ".":
                parts.append(self._name())
            else:
                parts.append(int(self.take()[1]))
                self.take("]")
        return tuple(parts)

    def _name(self) -> str:
        kind, word = self.take()
        if kind == "name":
            if word not in self._names:
                raise ExpressionError(f"An expression attribute name is undefined: {word}")
            return self._names[word]
        if kind != "word":
            raise ExpressionError(f"Invalid expression: {word!r} is no attribute name")
        return word

    def operand(self) -> Operand:
        kind, word = self.peek()
        if kind == "value":
            self.take()
            return lambda item, values: _value(values, word)
        if kind == "word" and word == "size" and self.peek(1)[1] == "(":
            self.take()
            self.take("(")
            path = self.path()
            self.take(")")
            return lambda item, values: _size(resolve(item, path))
        path = self.path()
        return lambda item, values: resolve(item, path)

    # -- conditions -------------------------------------------------------------------------

    def condition(self) -> Condition:
        left = self._conjunction()
        while self.at("OR"):
            self.take()
            right = self._conjunction()
            left = _either(left, right)
        return left

    def _conjunction(self) -> Condition:
        left = self._negation()
        while self.at("AND"):
            self.take()
            right = self._negation()
            left = _both(left, right)
        return left

    def _negation(self) -> Condition:
        if self.at("NOT"):
            self.take()
            inner = self._negation()
            return lambda item, values: not inner(item, values)
        if self.at("("):
            self.take()
            inner = self.condition()
            self.take(")")
            return inner
        kind, word = self.peek()
        if kind == "word" and word in _FUNCTIONS and self.peek(1)[1] == "(":
            return self._function(word)
        return self._comparison(self.operand())

    def _function(self, name: str) -> Condition:
        self.take()
        self.take("(")
        path = self.path()
        argument: Operand | None = None
        if self.at(","):
            self.take()
            argument = self.operand()
        self.take(")")
        test = _FUNCTIONS[name]
        return lambda item, values: test(
            resolve(item, path), argument(item, values) if argument else None
        )

    def _comparison(self, left: Operand) -> Condition:
        _, word = self.take()
        if word == "BETWEEN":
            low = self.operand()
            self.take("AND")
            high = self.operand()
            return lambda item, values: _between(
                left(item, values), low(item, values), high(item, values)
            )
        if word == "IN":
            self.take("(")
            options = [self.operand()]
            while self.at(","):
                self.take()
                options.append(self.operand())
            self.take(")")
            return lambda item, values: any(
                compare("=", left(item, values), option(item, values)) for option in options
            )
        if word not in ("=", "<>", "<", "<=", ">", ">="):
            raise ExpressionError(f"Invalid expression: {word!r} compares nothing")
        right = self.operand()
        return lambda item, values: compare(word, left(item, values), right(item, values))


def _either(left: Condition, right: Condition) -> Condition:
    return lambda item, values: left(item, values) or right(item, values)


def _both(left: Condition, right: Condition) -> Condition:
    return lambda item, values: left(item, values) and right(item, values)


def _value(values: Values, name: str) -> Any:
    if name not in values:
        raise ExpressionError(f"An expression attribute value is undefined: {name}")
    return values[name]


def resolve(item: Mapping[str, Any] | None, path: Path) -> Any:
    """The typed value at `path`, or None."""
    value: Any = {"M": item} if item is not None else None
    for part in path:
        if value is None:
            return None
        if isinstance(part, int):
            listed = value.get("L")
            value = listed[part] if listed is not None and part < len(listed) else None
        else:
            value = (value.get("M") or {}).get(part)
    return value


def plain(value: Any) -> Any:
    """A typed scalar or set, as Python compares it (numbers as Decimal)."""
    kind, inner = next(iter(value.items()))
    if kind == "N":
        return Decimal(inner)
    if kind == "NS":
        return frozenset(Decimal(v) for v in inner)
    if kind in ("SS", "BS"):
        return frozenset(inner)
    if kind == "L":
        return tuple(plain(v) for v in inner)
    if kind == "M":
        return tuple(sorted((k, plain(v)) for k, v in inner.items()))
    return inner


def compare(operator: str, left: Any, right: Any) -> bool:
    if left is None or right is None:
        return operator == "<>" and (left is None) != (right is None)
    same_kind = next(iter(left)) == next(iter(right))
    if operator in ("=", "<>"):
        equal = same_kind and plain(left) == plain(right)
        return equal if operator == "=" else not equal
    if not same_kind or next(iter(left)) not in ("N", "S", "B"):
        return False
    a, b = plain(left), plain(right)
    return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[operator])


def _between(value: Any, low: Any, high: Any) -> bool:
    return compare(">=", value, low) and compare("<=", value, high)


def _size(value: Any) -> Any:
    if value is None:
        return None
    kind, inner = next(iter(value.items()))
    return {"N": str(len(inner))} if kind in ("S", "B", "SS", "NS", "BS", "L", "M") else None


def _begins_with(value: Any, prefix: Any) -> bool:
    if value is None or prefix is None or next(iter(value)) != next(iter(prefix)):
        return False
    kind = next(iter(value))
    return kind in ("S", "B") and str(value[kind]).startswith(str(prefix[kind]))


def _contains(value: Any, member: Any) -> bool:
    if value is None or member is None:
        return False
    kind, inner = next(iter(value.items()))
    if kind == "S":
        return "S" in member and member["S"] in inner
    if kind in ("SS", "NS", "BS"):
        scalar = kind[0]
        return scalar in member and plain(member) in plain(value)
    if kind == "L":
        return any(compare("=", element, member) for element in inner)
    return False


_FUNCTIONS: dict[str, Callable[[Any, Any], bool]] = {
    "attribute_exists": lambda value, _: value is not None,
    "attribute_not_exists": lambda value, _: value is None,
    "begins_with": _begins_with,
    "contains": _contains,
    "attribute_type": lambda value, kind: value is not None and next(iter(value)) == kind["S"],
}


@lru_cache(maxsize=512)
def _condition(text: str, names: tuple[tuple[str, str], ...]) -> Condition:
    parser = _Parser(text, dict(names))
    condition = parser.condition()
    parser.done()
    return condition


def condition(text: str, names: Mapping[str, str] | None) -> Condition:
    """A condition, key condition or filter expression."""
    return _condition(text, tuple(sorted((names or {}).items())))


@lru_cache(maxsize=512)
def _projection(text: str, names: tuple[tuple[str, str], ...]) -> tuple[Path, ...]:
    parser = _Parser(text, dict(names))
    paths = [parser.path()]
    while parser.at(","):
        parser.take()
        paths.append(parser.path())
    parser.done()
    return tuple(paths)


def projected(item: Item, text: str | None, names: Mapping[str, str] | None) -> Item:
    """The parts of the item a projection names: top-level attributes whole, nested paths
    (`m.deep`, `l[1]`) as the maps and lists that hold them (a list keeps its picked elements,
    in order)."""
    if not text:
        return item
    picked: Any = None
    for path in _projection(text, tuple(sorted((names or {}).items()))):
        part = _pick({"M": item}, path)
        if part is not None:
            picked = part if picked is None else _merged(picked, part)
    return _typed(picked)["M"] if picked is not None else {}


@dataclass
class _Partial:
    """A map or list of which only some members were picked."""

    kind: str  # "M" or "L"
    members: dict[Any, Any]


def _pick(value: Any, path: Path) -> Any:
    if not path:
        return value
    part, rest = path[0], path[1:]
    kind = "L" if isinstance(part, int) else "M"
    container = value.get(kind)
    if container is None or (
        part >= len(container) if isinstance(part, int) else part not in container
    ):
        return None
    inner = _pick(container[part], rest)
    return None if inner is None else _Partial(kind, {part: inner})


def _merged(a: Any, b: Any) -> Any:
    """Two picks of one value together: a value picked whole covers any part of it."""
    if not isinstance(a, _Partial) or not isinstance(b, _Partial):
        return b if isinstance(a, _Partial) else a
    for key, member in b.members.items():
        a.members[key] = _merged(a.members[key], member) if key in a.members else member
    return a


def _typed(value: Any) -> Any:
    if not isinstance(value, _Partial):
        return value
    if value.kind == "M":
        return {"M": {k: _typed(v) for k, v in value.members.items()}}
    return {"L": [_typed(v) for _, v in sorted(value.members.items())]}
