"""Warm pylint server: lints each Python program in a child forked from one warm, frozen linter (started by
node_lint.NodeLinter).

Requests arrive on fd 3, {"code", "roots"} frames (wire.py); each reply on fd 4 is lint.lint's JSON object, or
{"error": trace} when linting raised or the child died. Linting writes into the linter's warm state: astroid
records every assignment to an attribute of what it infers (`math.X = 0` lands in the locals of the warm `math`
module, `OrderedDict.Q = 0` in a warm class), and its and pylint's caches fill with what the program made. In a
persistent process a program could so change the next programs' lints (a victim's E1101 vanished, quality
0.224 -> 0.784), and no list of caches to reset can be known complete. So nothing of a program reaches the warm
process: each lint runs in a fork, and whatever it wrote dies with it. The warm process is primed once (the
modules programs mostly import, the checkers' visit tables) and its objects frozen out of the collector (gc.freeze),
so a fork copies only the pages a lint writes. The child's CPU (wait4) is reported with the reply for the runner's
accounting. The server is restarted after MAX_USES programs and after any failure (node_lint.py).
"""

from __future__ import annotations

import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # lint, dead_code, wire sit next to this file

import lint  # noqa: E402
import wire  # noqa: E402

REQUESTS, REPLIES = 3, 4


def lint_in_fork(code: str, path: str, roots: list[str] | None) -> dict:
    """lint.lint in a forked child; the parent (the warm linter) never sees the program. Adds "child_cpu_ms"."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: lint, write the JSON, leave without running any clean-up of the warm process
        try:
            os.close(r)
            try:
                reply = lint.lint(code, path, roots)
            except Exception:  # noqa: BLE001 - reported; the runner restarts this server
                reply = {"error": traceback.format_exc()}
            data = json.dumps(reply).encode()
            while data:
                data = data[os.write(w, data) :]
        finally:
            os._exit(0)
    os.close(w)
    chunks = []
    with os.fdopen(r, "rb") as f:
        while chunk := f.read(1 << 16):
            chunks.append(chunk)
    _, status, usage = os.wait4(pid, 0)
    try:
        reply = json.loads(b"".join(chunks)) if os.waitstatus_to_exitcode(status) == 0 else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        return {"error": f"the lint child ended with status {status} and no report"}
    reply["child_cpu_ms"] = (usage.ru_utime + usage.ru_stime) * 1000.0
    return reply


def serve() -> None:
    lint.warm_up()
    path = os.path.join(os.getcwd(), "solution.py")
    reader = wire.FdReader(REQUESTS)
    wire.write_fd(REPLIES, {"ready": True})
    while not reader.eof:
        for req in reader.feed():
            wire.write_fd(REPLIES, lint_in_fork(str(req["code"]), path, req.get("roots")))


if __name__ == "__main__":
    serve()
