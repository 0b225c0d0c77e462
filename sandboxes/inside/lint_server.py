"""Warm pylint server: lints Python programs one after another in one process (started by node_lint.NodeLinter).

Requests arrive on fd 3, {"code", "roots"} frames (wire.py); each reply on fd 4 is lint.lint's JSON object, or
{"error": trace} when linting raised. A forked lint job paid ~12 ms of copy-on-write page faults on the warm
linter's heap for ~6 ms of linting; here nothing is forked. What one program leaves behind is dropped before the
next: astroid's cached modules that were not there after warm-up (the program's own, whatever it imported) and the
inference cache, so each program is linted as a fresh fork of the warm linter would lint it (bench: identical
results on HumanEval-164 in either order). The server is restarted after MAX_USES programs and after any failure.
"""

from __future__ import annotations

import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # lint, dead_code, wire sit next to this file

import lint  # noqa: E402
import wire  # noqa: E402

REQUESTS, REPLIES = 3, 4


def _forget_program(keep: set[str]) -> None:
    import astroid.context
    from astroid import MANAGER

    for name in [n for n in MANAGER.astroid_cache if n not in keep]:
        del MANAGER.astroid_cache[name]
    astroid.context._INFERENCE_CACHE.clear()


def serve() -> None:
    lint.warm_up()
    from astroid import MANAGER

    keep = set(MANAGER.astroid_cache)
    path = os.path.join(os.getcwd(), "solution.py")
    reader = wire.FdReader(REQUESTS)
    wire.write_fd(REPLIES, {"ready": True})
    while not reader.eof:
        for req in reader.feed():
            try:
                reply = lint.lint(str(req["code"]), path, req.get("roots"))
            except Exception:  # noqa: BLE001 - reported; the runner restarts this server
                reply = {"error": traceback.format_exc()}
            finally:
                _forget_program(keep)
            wire.write_fd(REPLIES, reply)


if __name__ == "__main__":
    serve()
