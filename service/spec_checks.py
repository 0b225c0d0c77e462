"""Test specs that cannot judge any program: refused as the client's mistake, before a sandbox is spent.

A spec whose tests fail (or pass) whatever the program does would otherwise come back as the program's verdict:
a HumanEval `check(candidate)` sent without `entry_point` runs with `candidate = None` and every program "fails"
with a TypeError, a wrong reward charged to the policy. Each rule here names the field to fix. The rules read
the spec alone (never a program), so a refusal is always the request's fault.

What the judge makes of an `assert` spec is mirrored from `sandboxes/inside/judge.py` (`judge_assert`,
`_case_groups`); `tests/test_spec_checks_units.py` runs both on the same sources so that they cannot drift.
"""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

from graders import pyast

# A name a program can define and the judge can call: `name` or `Class.method` (JavaScript also allows `$`).
_ENTRY_POINT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(\.[A-Za-z_$][A-Za-z0-9_$]*)?")
_PYTHON_ENTRY_POINT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_RUST_TEST = re.compile(r"#\s*\[\s*test\s*\]")

Found = tuple[tuple[str, ...], str, str]  # (loc under `tests`, message, error type)


def spec_problem(tests: Any, language: str) -> Found | None:
    """The first reason `tests` (a service.models test spec) can judge no program, or None."""
    kind = getattr(tests, "kind", None)
    entry = getattr(tests, "entry_point", None)
    if entry is not None:
        pattern = _PYTHON_ENTRY_POINT if language == "python" else _ENTRY_POINT
        if not pattern.fullmatch(entry):
            return (("entry_point",), f"{entry[:80]!r} is not a name a program can define (a function name, or "
                    "Class.method)", "entry_point")
    if kind == "assert" and language == "python":
        return _assert_problem(tests.test_code, entry)
    if kind == "pytest":
        return _pytest_problem(tests.test_code)
    if kind == "rust_test" and not _RUST_TEST.search(tests.test_code):
        return (("test_code",), "no #[test] function: nothing would be judged", "no_tests")
    return None


def case_groups(statements: list[ast.stmt]) -> list[list[ast.stmt]]:
    """The statement groups the judge runs as cases: each statement that asserts something other than a
    constant closes one (judge.py `_case_groups`)."""
    groups, current = [], []
    for stmt in statements:
        current.append(stmt)
        if any(isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant) for n in ast.walk(stmt)):
            groups.append(current)
            current = []
    return groups


def _parse(source: str) -> ast.Module | None:
    try:
        return pyast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the judge answers a test_code that does not parse as invalid_input, with its error


@functools.lru_cache(maxsize=1024)  # a GRPO group sends the same tests with every sample
def _assert_problem(source: str, entry: str | None) -> Found | None:
    tree = _parse(source)
    if tree is None:
        return None
    check = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
    if check is not None and check.args.args and not entry:
        param = check.args.args[0].arg
        return (("entry_point",), f"test_code defines check({param}) but no entry_point names the function to "
                f"pass as {param!r}: every program would fail", "missing")
    if not case_groups(check.body if check is not None else tree.body):
        where = "check()" if check is not None else "test_code"
        return (("test_code",), f"{where} has no assert statement (other than a constant): nothing would be judged",
                "no_tests")
    return None


@functools.lru_cache(maxsize=1024)
def _pytest_problem(source: str) -> Found | None:
    tree = _parse(source)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            return None
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            return None
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id.startswith("test"):
            return None  # test_x = make_test(...)
        if isinstance(node, ast.alias) and (node.asname or node.name).startswith("test"):
            return None  # from helpers import test_shared
    return (("test_code",), "no test function (test_*) or Test* class: pytest would collect nothing",
            "no_tests")
