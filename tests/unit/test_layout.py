"""What the import contracts cannot see: no package reads files under tests/ (the payloads,
builders and simulators live in fixtures/), and no module refers to a file outside the
repository. Imports themselves are held by `lint-imports` in `make lint`."""

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
