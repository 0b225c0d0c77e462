"""Candidate side of a judge job (stdlib only): load the candidate's program as a module, then answer calls.

Runs as the candidate uid. Requests arrive on fd 3 and replies leave on fd 4, as frames. The candidate's own
code runs in this process, so nothing here is trusted by the judge: replies are plain data decoded by the judge.
Nothing else is computed here either: the suspicious-construct flags are computed on the host over the very text
that runs (graders/flags.py), so that a program that exits, hangs or breaks this process still carries them.
"""

from __future__ import annotations

import ast
import os
import sys
import traceback
import types

import codec
import wire

TYPE_CHECKING = False  # for the checker only: the code run in the sandbox never imports typing (start-up time)
if TYPE_CHECKING:
    from typing import Any

REQ_FD, REP_FD = 3, 4


def _send(obj: object) -> None:
    wire.write_fd(REP_FD, obj)


def _short_error(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    return text[:500]


def _describe(value: object) -> str:
    if isinstance(value, type):
        return "class"
    return "callable" if callable(value) else "value"


def serve(code: str, module_name: str) -> None:
    """Parse, load the module, then serve calls until the judge hangs up."""
    try:
        tree = ast.parse(code, filename=f"{module_name}.py")
        compiled = compile(tree, f"{module_name}.py", "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as e:
        _send({"event": "parsed", "ok": False, "error": _short_error(e)})
        return
    _send({"event": "parsed", "ok": True})
    module = types.ModuleType(module_name)
    module.__file__ = os.path.join(os.getcwd(), f"{module_name}.py")
    sys.modules[module_name] = module
    sys.path[:] = [os.getcwd()] + [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    try:
        exec(compiled, module.__dict__)
    except SystemExit as e:
        _send({"event": "loaded", "ok": False, "error": f"SystemExit({e.code!r}) while loading", "kind": "exit"})
        return
    except BaseException as e:  # noqa: BLE001 - anything the program raises is the program's failure
        traceback.print_exc()
        _send({"event": "loaded", "ok": False, "error": _short_error(e), "kind": "exception"})
        return
    names = {n: _describe(v) for n, v in list(module.__dict__.items()) if not n.startswith("__")}
    _send({"event": "loaded", "ok": True, "names": names})
    reader = wire.FdReader(REQ_FD)
    os.set_blocking(REQ_FD, True)
    while True:
        frames = reader.feed()
        if reader.eof and not frames:
            return
        for req in frames:
            _send(_answer(module, req))


def _resolve(module: types.ModuleType, name: str) -> Any:
    """`f` is a module attribute; `Solution.f` is a method of a fresh Solution() (LeetCode style)."""
    head, _, rest = name.partition(".")
    obj = module.__dict__[head]
    if rest:
        obj = getattr(obj(), rest)
    return obj


def _answer(module: types.ModuleType, req: dict) -> dict:
    try:
        target = _resolve(module, req["call"])
    except BaseException as e:  # noqa: BLE001
        return {"error": _short_error(e), "kind": "missing"}
    try:
        own = lambda name: _resolve(module, name)  # noqa: E731 - a test passing the program's own function
        args = codec.decode(req.get("args", ["l", []]), own)
        kwargs = codec.decode(req.get("kwargs", ["d", []]), own)
        result = target(*args, **kwargs) if req.get("op", "call") == "call" else target
    except BaseException as e:  # noqa: BLE001 - SystemExit in a call is a failed call, never a pass
        return {"error": _short_error(e), "kind": "exception"}
    try:
        return {"value": codec.encode(result)}
    except BaseException as e:  # noqa: BLE001 - objects with a forged __eq__ end here
        return {"error": _short_error(e), "kind": "unencodable"}
