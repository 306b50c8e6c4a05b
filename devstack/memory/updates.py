"""DynamoDB's update expressions (SET, REMOVE, ADD, DELETE), parsed once and applied to a copy
of an item in the wire's typed form."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from decimal import Decimal
from functools import lru_cache
from typing import Any

from devstack.memory.expressions import (
    ExpressionError,
    Item,
    Operand,
    Path,
    Values,
    _Parser,
    resolve,
)

Action = Callable[[Item, Item, Values], None]  # (item being updated, item before, values)


def _number(value: Decimal) -> dict[str, str]:
    if value == value.to_integral_value():
        return {"N": str(int(value))}
    return {"N": format(value.normalize(), "f")}


class _UpdateParser(_Parser):
    def actions(self) -> list[Action]:
        actions: list[Action] = []
        self.paths: list[Path] = []
        seen: set[str] = set()
        while self.peek()[0] != "end":
            kind, clause = self.take()
            if kind != "keyword" or clause not in ("SET", "REMOVE", "ADD", "DELETE"):
                raise ExpressionError(f"Invalid UpdateExpression: unexpected {clause!r}")
            if clause in seen:
                raise ExpressionError(f"The {clause} section can only be used once")
            seen.add(clause)
            actions.append(self._clause(clause))
            while self.at(","):
                self.take()
                actions.append(self._clause(clause))
        _no_overlap(self.paths)
        return actions

    def _clause(self, clause: str) -> Action:
        path = self.path()
        self.paths.append(path)
        if clause == "REMOVE":
            return lambda item, before, values: _remove(item, path)
        if clause == "SET":
            self.take("=")
            value = self._set_value()
            return lambda item, before, values: _put(item, path, value(before, values))
        operand = self.operand()
        if clause == "ADD":
            return lambda item, before, values: _add(item, path, operand(before, values))
        return lambda item, before, values: _delete(item, path, operand(before, values))

    def _set_value(self) -> Operand:
        left = self._set_operand()
        if self.at("+") or self.at("-"):
            sign = self.take()[1]
            right = self._set_operand()
            return lambda item, values: _arithmetic(sign, left(item, values), right(item, values))
        return left

    def _set_operand(self) -> Operand:
        kind, word = self.peek()
        if kind == "word" and word in ("if_not_exists", "list_append") and self.peek(1)[1] == "(":
            self.take()
            self.take("(")
            first = self.path() if word == "if_not_exists" else None
            first_operand = None if first is not None else self._set_operand()
            self.take(",")
            second = self._set_operand()
            self.take(")")
            if first is not None:
                kept = first
                return lambda item, values: resolve(item, kept) or second(item, values)
            head: Operand = first_operand  # type: ignore[assignment]  # list_append's first
            return lambda item, values: _appended(head(item, values), second(item, values))
        return self.operand()


def _no_overlap(paths: list[Path]) -> None:
    """DynamoDB refuses an update two of whose paths are one, or one inside the other."""
    for n, one in enumerate(paths):
        for two in paths[n + 1 :]:
            if one[: len(two)] == two[: len(one)]:
                raise ExpressionError(
                    "Invalid UpdateExpression: Two document paths overlap with each other; must "
                    f"remove or rewrite one of these paths; path one: {list(one)}, "
                    f"path two: {list(two)}"
                )


def targets(text: str, names: Mapping[str, str] | None) -> frozenset[str]:
    """The top-level attributes an update expression writes or removes."""
    return _targets(text, tuple(sorted((names or {}).items())))


@lru_cache(maxsize=512)
def _targets(text: str, names: tuple[tuple[str, str], ...]) -> frozenset[str]:
    parser = _UpdateParser(text, dict(names))
    parser.actions()
    return frozenset(str(path[0]) for path in parser.paths)


def _appended(head: Any, tail: Any) -> Any:
    return {"L": [*_listed(head), *_listed(tail)]}


def _listed(value: Any) -> list[Any]:
    if value is None or "L" not in value:
        raise ExpressionError("An operand in the update expression has an incorrect data type")
    return list(value["L"])


def _arithmetic(sign: str, left: Any, right: Any) -> Any:
    if left is None or right is None or "N" not in left or "N" not in right:
        raise ExpressionError("An operand in the update expression has an incorrect data type")
    a, b = Decimal(left["N"]), Decimal(right["N"])
    return _number(a + b if sign == "+" else a - b)


def _parent(item: Item, path: Path) -> tuple[Any, str | int]:
    """The map's or list's contents that hold the path's last part, and that part."""
    holder: Any = item
    for n, part in enumerate(path[:-1]):
        nested = holder[part] if isinstance(part, int) else holder.get(part)
        if nested is None:
            raise ExpressionError("The document path provided in the update expression is invalid")
        holder = nested["L"] if isinstance(path[n + 1], int) else nested["M"]
    return holder, path[-1]


def _put(item: Item, path: Path, value: Any) -> None:
    if value is None:
        raise ExpressionError("The provided expression refers to an attribute that does not exist")
    holder, last = _parent(item, path)
    if isinstance(last, int):
        if last < len(holder):
            holder[last] = value
        else:
            holder.append(value)
    else:
        holder[last] = value


def _remove(item: Item, path: Path) -> None:
    holder, last = _parent(item, path)
    if isinstance(last, int):
        if last < len(holder):
            del holder[last]
    else:
        holder.pop(last, None)


def _add(item: Item, path: Path, value: Any) -> None:
    current = resolve(item, path)
    kind = next(iter(value))
    if current is None:
        _put(item, path, copy.deepcopy(value))
    elif kind == "N" and "N" in current:
        _put(item, path, _number(Decimal(current["N"]) + Decimal(value["N"])))
    elif kind in ("SS", "NS", "BS") and kind in current:
        merged = list(current[kind]) + [v for v in value[kind] if v not in current[kind]]
        _put(item, path, {kind: merged})
    else:
        raise ExpressionError("An operand in the update expression has an incorrect data type")


def _delete(item: Item, path: Path, value: Any) -> None:
    current = resolve(item, path)
    kind = next(iter(value))
    if current is None:
        return
    if kind not in ("SS", "NS", "BS") or kind not in current:
        raise ExpressionError("An operand in the update expression has an incorrect data type")
    left = [v for v in current[kind] if v not in value[kind]]
    if left:
        _put(item, path, {kind: left})
    else:
        _remove(item, path)


@lru_cache(maxsize=512)
def _update(text: str, names: tuple[tuple[str, str], ...]) -> tuple[Action, ...]:
    parser = _UpdateParser(text, dict(names))
    return tuple(parser.actions())


def updated(item: Item, text: str, names: Mapping[str, str] | None, values: Values) -> Item:
    """A copy of `item` with the update applied (values read from the item before it)."""
    before = item
    after = copy.deepcopy(item)
    for action in _update(text, tuple(sorted((names or {}).items()))):
        action(after, before, values)
    return after
