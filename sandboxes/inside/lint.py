"""Quality job (runs as the candidate uid, forked from the lint zygote that imported pylint once).

pylint and radon read the program; neither runs it. What they read is exactly the text that runs: the runner
compiles the program from text, which ignores a source-encoding declaration, while pylint reads a file and would
honour one (`# coding: unicode_escape` made it read another program), so encoding declarations are neutralised
before the file is written. Suppression pragmas are removed before linting (and counted): any comment holding a
`pylint:` directive (however many directives it chains: `# pylint: enable=x disable=all`), `# noqa`,
`# type: ignore`, `# flake8: noqa`, so none can raise the score. pylint's score is recomputed over live statements
only (dead_code.py): padding a program with code that does nothing cannot dilute its messages. The maintainability
index is computed without comments and with docstrings counted as code, so padding a program with comments (which
radon's MI rewards) cannot raise it either. Prints one JSON object on stdout.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import sys
import tokenize

import dead_code

PRAGMA = re.compile(r"pylint\s*:|noqa|type\s*:\s*ignore|flake8\s*:|mypy\s*:|pyright\s*:", re.IGNORECASE)
CODING = re.compile(r"^([ \t\f]*#.*?)coding([:=])", re.IGNORECASE)  # PEP 263, as tokenize.detect_encoding reads it
MAX_MESSAGES = 50
PYLINT_ARGS = ["--persistent=n", "--jobs=1", "--reports=n", "--score=y", "--disable=missing-module-docstring",
               "--rcfile=/dev/null", "--load-plugins="]


def neutralise_encoding(code: str) -> tuple[str, bool]:
    """The program with any source-encoding declaration on its first two lines made a plain comment (the text
    is then read as UTF-8, as the runner reads it). Returns (source, whether there was one)."""
    lines = code.split("\n", 2)
    found = False
    for i in range(min(2, len(lines))):
        new = CODING.sub(lambda m: m.group(1) + "c0ding" + m.group(2), lines[i])
        found = found or new != lines[i]
        lines[i] = new
    return "\n".join(lines), found


def strip_pragmas(code: str) -> tuple[str, int]:
    """Remove suppression comments (line numbers kept). Returns (new source, how many were removed)."""
    return _strip_comments(code, lambda text: bool(PRAGMA.search(text)))


def strip_comments(code: str) -> str:
    """The source without any comment: what the maintainability index is computed on, so comments earn nothing."""
    return _strip_comments(code, lambda text: True)[0]


def _strip_comments(code: str, which) -> tuple[str, int]:
    lines = code.splitlines(keepends=True)
    count = 0
    for tok in reversed(list(tokenize.generate_tokens(io.StringIO(code).readline))):  # right to left per line
        if tok.type == tokenize.COMMENT and which(tok.string):
            row, col = tok.start
            line = lines[row - 1]
            rest = line[col + len(tok.string) :]
            lines[row - 1] = line[:col].rstrip() + rest  # rest is the line ending (a comment ends its line)
            count += 1
    return "".join(lines), count


def lint(code: str, path: str, roots: list[str] | None = None) -> dict:
    """roots: the names the tests call ([] for a script, None when unknown), for the live-statement count."""
    from pylint.lint import Run
    from pylint.reporters import CollectingReporter
    from radon.complexity import cc_visit
    from radon.metrics import mi_visit

    code, declared_encoding = neutralise_encoding(code)
    try:
        clean, suppressions = strip_pragmas(code)
    except (tokenize.TokenError, SyntaxError, IndentationError) as e:
        return {"ok": False, "parse_error": f"{type(e).__name__}: {e}"}  # "error" is a failure of the linter
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
        f.write(clean)
    reporter = CollectingReporter()
    if _warm_linter is not None:  # reuse the zygote's configured linter: ~4 ms instead of ~17 ms per file
        from pylint.utils import LinterStats

        linter = _warm_linter
        linter.set_reporter(reporter)
        linter.stats = LinterStats()
        linter.check([path])
        linter.generate_reports()
    else:
        linter = Run([*PYLINT_ARGS, path], reporter=reporter, exit=False).linter
    # One order for one program: pylint reports a node's messages in the order of a set of inferred values
    # (typecheck's missingattr), i.e. of their addresses, which differ from one lint process to the next.
    messages = sorted(reporter.messages, key=lambda m: (m.line or 0, m.column or 0, m.msg_id, m.msg))
    fatal = any(m.msg_id.startswith(("E0001", "F")) for m in messages)
    dead = _dead(clean, roots)
    score = live_score(linter.stats, dead)
    try:
        mi = float(mi_visit(strip_comments(clean), multi=False))  # comments and docstrings do not raise MI
        cc = [{"name": b.name, "complexity": b.complexity} for b in cc_visit(clean)]
    except Exception:  # noqa: BLE001 - radon fails on what pylint already reported
        mi, cc = 0.0, []
    return {
        "ok": not fatal,
        "pylint_score": max(0.0, min(10.0, float(score))),
        "maintainability_index": max(0.0, min(100.0, mi)),
        "cyclomatic": cc[:50],
        "suppressions": suppressions,
        "statements": linter.stats.statement,
        "dead_statements": dead,
        "encoding_declaration": declared_encoding,
        "messages": [{"id": m.msg_id, "symbol": m.symbol, "line": m.line, "text": m.msg[:200]}
                     for m in messages[:MAX_MESSAGES]],
        "message_count": len(messages),
    }


def _dead(source: str, roots: list[str] | None) -> int:
    try:
        return dead_code.dead_statements(ast.parse(source), roots)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return 0


def live_score(stats, dead: int) -> float:
    """pylint's own evaluation formula, 10 - 10 * (5 * error + warning + refactor + convention) / statements,
    with the statements that do nothing left out of the denominator."""
    if stats.fatal:
        return 0.0
    weighted = 5 * stats.error + stats.warning + stats.refactor + stats.convention
    live = stats.statement - dead
    if live <= 0:
        return 10.0 if weighted == 0 else 0.0
    return max(0.0, min(10.0, 10.0 - 10.0 * weighted / live))


_warm_linter = None
WARM_IMPORTS = (
    "import bisect, collections, copy, functools, hashlib, heapq, itertools, math, random, re, string, sys\n"
    "from typing import Any, Dict, List, Optional, Tuple\n"
    "from collections import Counter, defaultdict, deque\n"
)


def warm_up() -> None:
    """Import and exercise the linter once so that forked children lint warm (astroid caches included)."""
    import tempfile

    os.environ["PYLINTHOME"] = "/nonexistent/pylint"  # read at import; --persistent=n then never writes
    global _warm_linter
    from pylint.lint import Run
    from pylint.reporters import CollectingReporter

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "warm.py")
        with open(path, "w") as f:
            f.write("import os\n\n\ndef f(x):\n    return os.path.join(x, 'a')\n")
        _warm_linter = Run([*PYLINT_ARGS, path], reporter=CollectingReporter(), exit=False).linter
        _prepare_checkers_once(_warm_linter)
        # Programs mostly import these: astroid parses each module once here instead of once per lint job.
        lint(WARM_IMPORTS + "def g(y: List[int]) -> Dict[str, int]:\n    return {str(v): v for v in y}\n",
             os.path.join(d, "warm2.py"))
    import gc

    gc.freeze()  # the linter's objects are now permanent: forked children do not copy them for the collector


def _prepare_checkers_once(linter) -> None:
    """pylint picks its checkers and collects their visit methods for every file (~6 ms of ~11 per small file).
    Both depend only on which messages are enabled, which is fixed here: the configuration never changes and
    the pragmas that could change it per file are stripped before linting. So do it once, in the zygote."""
    import pylint.lint.pylinter as pylinter

    needed = linter.prepare_checkers()
    template = pylinter.ASTWalker(linter)
    for checker in needed:
        template.add_checker(checker)
    base = pylinter.ASTWalker

    class PreparedWalker(base):  # type: ignore[misc,valid-type]
        def __init__(self, owner) -> None:
            super().__init__(owner)
            self.prepared = owner is linter
            if self.prepared:
                for kind in ("visit_events", "leave_events"):
                    events = getattr(self, kind)
                    for cid, methods in getattr(template, kind).items():
                        events[cid] = list(methods)

        def add_checker(self, checker) -> None:
            if not self.prepared:
                super().add_checker(checker)

    linter.prepare_checkers = lambda: list(needed)
    pylinter.ASTWalker = PreparedWalker


def main(code: str, roots: list[str] | None = None) -> None:
    result = lint(code, os.path.join(os.getcwd(), "solution.py"), roots)
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()
