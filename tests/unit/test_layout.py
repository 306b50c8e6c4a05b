"""What the import contracts cannot see: no package reads files under tests/ (the payloads,
builders and simulators live in fixtures/), no module refers to a file outside the
repository, and in functions/ only the ledger store (functions/store/) writes a condition or
reads a refusal. Imports themselves are held by `lint-imports` in `make lint`."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("functions", "infra", "ops", "devstack", "costmodel", "firedrill", "fixtures")


def code_strings(path: Path) -> list[str]:
    """Every string literal of a module but its docstrings."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
    ]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_package_reads_files_under_tests(package: str) -> None:
    # Given every module of the package, When its code's strings are read
    reaching = [
        f"{path.relative_to(ROOT)}: {text!r}"
        for path in sorted((ROOT / package).rglob("*.py"))
        for text in code_strings(path)
        if text == "tests" or text.startswith(("tests/", "../"))
    ]

    # Then none names the tests' tree (or climbs out of the repository)
    assert reaching == []


CONDITION_ARGUMENTS = frozenset(
    {"ConditionExpression", "KeyConditionExpression", "FilterExpression"}
)
CONDITION_WORDS = (
    "ConditionExpression",
    "CancellationReasons",
    "attribute_exists(",
    "attribute_not_exists(",
    "begins_with(",
)


def conditions_asked(path: Path) -> list[str]:
    """Each place a module asks DynamoDB under a condition or reads why it was refused: a
    condition argument, or a string that spells one."""
    tree = ast.parse(path.read_text())
    arguments = [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.arg}="
        for node in ast.walk(tree)
        if isinstance(node, ast.keyword) and node.arg in CONDITION_ARGUMENTS
    ]
    spelled = [
        f"{path.relative_to(ROOT)}: {text!r}"
        for text in code_strings(path)
        if any(word in text for word in CONDITION_WORDS)
    ]
    return arguments + spelled


def test_only_the_ledger_store_writes_a_condition_or_reads_a_refusal() -> None:
    # Given every module of functions/ outside the store (functions/store/), When read
    outside = [
        found
        for path in sorted((ROOT / "functions").rglob("*.py"))
        if (ROOT / "functions" / "store") not in path.parents
        for found in conditions_asked(path)
    ]

    # Then none renders a condition, a key condition or a filter, nor reads cancellation reasons
    assert outside == []


def test_the_condition_finder_sees_the_stores_conditions() -> None:
    # Given the store's own modules (where every condition lives), When read the same way
    found = [
        hit
        for path in (ROOT / "functions" / "store").rglob("*.py")
        for hit in conditions_asked(path)
    ]

    # Then it finds them: the test above would see one written elsewhere
    assert any("ConditionExpression" in hit for hit in found)
    assert any("CancellationReasons" in hit for hit in found)
    assert any("KeyConditionExpression" in hit for hit in found)
