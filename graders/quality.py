"""Quality: static analysis of the program, computed inside the sandbox by a warm linter (pylint + radon).

    quality = 0.7 * pylint_score / 10 + 0.3 * maintainability_index / 100        (0..1)

pylint runs with its default checks (minus missing-module-docstring) and its own score formula
10 - 10 * (5 * errors + warnings + refactors + conventions) / statements, clipped to 0..10, where statements counts
only live ones: statements that do nothing (constants nothing reads, unreachable code, definitions the tests'
names never reach: sandboxes/inside/dead_code.py) cannot dilute the messages. Suppression pragmas (any `pylint:`
directive, `# noqa`, `# type: ignore`) are blanked out before linting, so they cannot raise the score; their count
is reported. The linter reads exactly the text that runs (encoding declarations neutralised). A program that does
not parse scores 0. Results are cached by content hash (with the names the tests call).

JavaScript and TypeScript: eslint's pinned `recommended` config (typescript-eslint's too for TypeScript), run by
a warm eslint inside the sandbox (sandboxes/inside/eslint_server.js), with inline configuration off, scored like
pylint: quality = eslint_score / 10, eslint_score = 10 - 10 * problems / statements, clipped to 0..10.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from sandboxes import Limits, LintJob, Status
from sandboxes.builds import JobRunner

from . import pyast

PYLINT_WEIGHT = 0.7
MI_WEIGHT = 0.3
MAX_MESSAGES_IN_RESPONSE = 20  # lint messages (id, symbol, line, text) kept in a response; message_count says all
LINT_LIMITS = Limits(wall_s=20.0, cpu_s=20.0, memory_mb=1024, output_bytes=1 << 20)


@dataclass
class QualityReport:
    score: float | None
    pylint_score: float | None = None
    eslint_score: float | None = None
    maintainability_index: float | None = None
    cyclomatic: list[dict[str, Any]] = field(default_factory=list)
    suppressions: int = 0
    dead_statements: int | None = None  # statements that do nothing: left out of pylint's density
    messages: list[dict[str, Any]] = field(default_factory=list)
    message_count: int = 0
    reason: str = ""
    cached: bool = False

    def details(self) -> dict[str, Any]:
        return {
            "pylint_score": self.pylint_score,
            **({"eslint_score": self.eslint_score} if self.eslint_score is not None else {}),
            "maintainability_index": self.maintainability_index,
            "cyclomatic": self.cyclomatic,
            "suppressions": self.suppressions,
            **({"dead_statements": self.dead_statements} if self.dead_statements is not None else {}),
            "messages": self.messages,
            "message_count": self.message_count,
            "reason": self.reason,
            "cached": self.cached,
        }


def combine(pylint_score: float, maintainability_index: float) -> float:
    return round(PYLINT_WEIGHT * pylint_score / 10.0 + MI_WEIGHT * maintainability_index / 100.0, 6)


class QualityGrader:
    def __init__(self, pool: JobRunner, cache_size: int = 4096) -> None:
        self.pool = pool
        self.cache: OrderedDict[str, QualityReport] = OrderedDict()
        self.cache_size = cache_size
        self.hits = 0

    async def grade(self, code: str, language: str = "python", roots: list[str] | None = None) -> QualityReport:
        """roots: the names the tests call (lint_roots), which decide which statements are live."""
        key = hashlib.sha256(f"{language}\0{json.dumps(roots)}\0".encode() + code.encode()).hexdigest()
        if key in self.cache:
            self.cache.move_to_end(key)
            self.hits += 1
            hit = self.cache[key]
            return QualityReport(**{**hit.__dict__, "cached": True})
        report = await self._lint(code, language, roots)
        if report.reason != "sandbox error":
            self.cache[key] = report
            if len(self.cache) > self.cache_size:
                self.cache.popitem(last=False)
        return report

    async def _lint(self, code: str, language: str, roots: list[str] | None) -> QualityReport:
        result = await self.pool.run(LintJob(code=code, language=language, roots=roots, limits=LINT_LIMITS))
        if result.status != Status.OK:
            return QualityReport(None, reason="sandbox error" if result.status == Status.SANDBOX_ERROR
                                 else f"linter {result.status}")
        try:
            data = json.loads(result.stdout)
        except ValueError:
            return QualityReport(None, reason="linter output unreadable")
        messages = data.get("messages", [])
        message_count = int(data.get("message_count", len(messages)))
        if not data.get("ok"):
            return QualityReport(0.0, reason="the program does not parse", messages=messages[:MAX_MESSAGES_IN_RESPONSE],
                                 message_count=message_count)
        if "eslint_score" in data:
            eslint = float(data["eslint_score"])
            return QualityReport(round(eslint / 10.0, 6), eslint_score=eslint, suppressions=int(data["suppressions"]),
                                 messages=messages[:MAX_MESSAGES_IN_RESPONSE], message_count=message_count)
        pylint, mi = float(data["pylint_score"]), float(data["maintainability_index"])
        return QualityReport(
            combine(pylint, mi),
            pylint_score=pylint,
            maintainability_index=mi,
            cyclomatic=data.get("cyclomatic", []),
            suppressions=int(data.get("suppressions", 0)),
            dead_statements=int(data.get("dead_statements", 0)),
            messages=messages[:MAX_MESSAGES_IN_RESPONSE],
            message_count=message_count,
        )


def lint_roots(tests: Any) -> list[str] | None:
    """The names the tests call, from the (trusted) test spec: what the live-statement count starts from.
    [] for a program that runs as a script (io tests, no tests); None when they cannot be told."""
    if tests is None or tests.kind == "io":
        return []
    entry = getattr(tests, "entry_point", None)
    if entry:
        return [entry.split(".", 1)[0]]
    test_code = getattr(tests, "test_code", "") or ""
    try:
        tree = pyast.parse(test_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module == "solution":
            if any(a.name == "*" for a in n.names):
                return None  # a star import: any top-level name may be what the tests call
            names |= {a.name for a in n.names}
        elif isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "solution":
            names.add(n.attr)
    return sorted(names - set(dir(builtins))) or None
