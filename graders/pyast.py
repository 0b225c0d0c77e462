"""`ast.parse` for the service process, behind one lock.

CPython 3.11 converts a parse tree to Python objects with a recursion counter kept in interpreter-wide state, reset
from the calling thread's stack depth at each call; two threads parsing at once can then fail with "SystemError: AST
constructor recursion depth mismatch" (seen in CI on HumanEval/153 while other items' flags were computed in
threads; cpython gh-106905 is the same family). The service parses candidate programs (flags), test code (lint
roots) and generators (validation) from the event loop and from worker threads, so every such parse goes through
here. A parse costs ~0.3 ms for a HumanEval program: the lock is never held long.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse(source: str | bytes, filename: str = "<unknown>") -> ast.Module:
    with _LOCK:
        return ast.parse(source, filename)
