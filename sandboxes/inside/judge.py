"""Judge side of a judge job (stdlib only, plus pytest for "pytest" specs): runs the tests, calls the candidate.

Runs as the judge uid, in its own process: nothing the candidate does can patch this harness, its builtins or
its AssertionError. The candidate is reached only through the channel: arguments go out and return values come
back as plain data (codec), so an object whose __eq__ always agrees cannot reach a comparison here. Verdicts go
to the runner over the verdict socket, never through any output the candidate controls.

Spec kinds:
- "assert": test_code is HumanEval's `check(candidate)` (with entry_point) or plain MBPP assert lines; optional
  trusted support_code (e.g. the HumanEval prompt) whose names win over the candidate's, except the entry point.
- "function": entry_point and cases [{args, kwargs, expected}], optional float_tol.
- "pytest": test_code is a pytest file that imports `solution`.
"""

from __future__ import annotations

import ast
import builtins
import math
import os
import select
import socket
import sys
import time
import types

import codec
import wire

MESSAGE_CAP = 300


class CaseTimeout(BaseException):
    """The candidate did not answer within the test case's time limit. A BaseException so that a test's own
    `except Exception` cannot swallow it and pass."""


class CandidateGone(BaseException):
    """The candidate process died (or closed the channel) during the test case (BaseException: see above)."""


class CandidateError(Exception):
    """The candidate raised, returned something that is not plain data, or lacks the name called."""


class SpecError(Exception):
    """The test specification itself is broken (a dataset bug, not the candidate's fault)."""


class Channel:
    """The judge's end of the candidate channel, including respawning a candidate that hung or died."""

    def __init__(self, vsock: socket.socket, to_fd: int, from_fd: int, pid: int, case_timeout: float) -> None:
        self.vsock = vsock
        self.case_timeout = case_timeout
        self._attach(to_fd, from_fd, pid)
        self.deadline = time.monotonic() + case_timeout
        self.broken = False
        self.last_death: dict | None = None

    def _attach(self, to_fd: int, from_fd: int, pid: int) -> None:
        self.to_fd, self.from_fd, self.pid = to_fd, from_fd, pid
        os.set_blocking(to_fd, False)
        os.set_blocking(from_fd, False)
        self.reader = wire.FdReader(from_fd)
        self.pending: list[object] = []

    def _next_frame(self) -> dict:
        while not self.pending:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.broken = True
                raise CaseTimeout()
            r, _, _ = select.select([self.from_fd], [], [], remaining)
            if r:
                try:
                    self.pending.extend(self.reader.feed())
                except ValueError as e:
                    self.broken = True
                    raise CandidateGone(f"protocol violation: {e}") from None
                if self.reader.eof and not self.pending:
                    self.broken = True
                    raise CandidateGone("the candidate process ended")
        frame = self.pending.pop(0)
        if type(frame) is not dict:
            self.broken = True
            raise CandidateGone("protocol violation")
        return frame

    def _send(self, obj: object) -> None:
        data = memoryview(wire.encode(obj))
        while data:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.broken = True
                raise CaseTimeout()
            _, w, _ = select.select([], [self.to_fd], [], remaining)
            if w:
                try:
                    data = data[os.write(self.to_fd, data) :]
                except BrokenPipeError:
                    self.broken = True
                    raise CandidateGone("the candidate process ended") from None

    def load(self) -> dict:
        """Wait for the candidate's parse and load reports."""
        self.deadline = time.monotonic() + self.case_timeout
        try:
            parsed = self._next_frame()
            if not parsed.get("ok"):
                return {"ok": False, "stage": "parse", "error": str(parsed.get("error"))[:MESSAGE_CAP]}
            loaded = self._next_frame()
        except CaseTimeout:
            return {"ok": False, "stage": "load", "status": "timeout", "error": "loading the program timed out"}
        except CandidateGone as e:
            return {"ok": False, "stage": "load", "status": "exited", "error": f"{e} while loading"}
        flags = [f for f in parsed.get("flags", []) if type(f) is str]
        if not loaded.get("ok"):
            return {"ok": False, "stage": "load", "status": str(loaded.get("kind")), "flags": flags,
                    "error": str(loaded.get("error"))[:MESSAGE_CAP]}
        names = loaded.get("names")
        names = {str(k): str(v) for k, v in names.items()} if type(names) is dict else {}
        return {"ok": True, "flags": flags, "names": names}

    def request(self, req: dict) -> object:
        if self.broken:
            raise CandidateGone("the candidate process is gone")
        self._send(req)
        reply = self._next_frame()
        if "value" in reply:
            try:
                return codec.decode(reply["value"])
            except Exception as e:  # noqa: BLE001 - anything malformed is the candidate's failure
                raise CandidateError(f"unreadable return value: {e}"[:MESSAGE_CAP]) from None
        raise CandidateError(str(reply.get("error", "no value"))[:MESSAGE_CAP], reply.get("kind"))

    def call(self, name: str, args: tuple, kwargs: dict) -> object:
        try:
            enc_args, enc_kwargs = codec.encode(list(args)), codec.encode(dict(kwargs))
        except codec.Unencodable as e:
            raise SpecError(f"test passes a non-plain argument to {name}: {e}") from None
        return self.request({"op": "call", "call": name, "args": enc_args, "kwargs": enc_kwargs})

    def get(self, name: str) -> object:
        return self.request({"op": "get", "call": name})

    def respawn(self) -> dict:
        """Ask the runner for a fresh candidate process; returns its load report."""
        for fd in (self.to_fd, self.from_fd):
            os.close(fd)
        wire.send(self.vsock, {"event": "respawn"})
        self.vsock.setblocking(True)
        reply, fds = wire.recv_with_fds(self.vsock)
        self.last_death = reply.get("prev")
        self._attach(fds[0], fds[1], reply["pid"])
        self.broken = False
        return self.load()

    def cpu_ns(self) -> int:
        """On-CPU time of the candidate's main thread, from the kernel (schedstat): per-case information."""
        try:
            with open(f"/proc/{self.pid}/schedstat") as f:
                return int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            return 0


class Remote:
    """Stands for a name defined by the candidate; calling it calls the candidate through the channel."""

    def __init__(self, chan: Channel, name: str) -> None:
        self._chan, self._name = chan, name

    def __call__(self, *args: object, **kwargs: object) -> object:
        try:
            return self._chan.call(self._name, args, kwargs)
        except CandidateError as e:
            _raise_like(e)
            raise

    def __repr__(self) -> str:
        return f"<candidate {self._name}>"


def _raise_like(err: CandidateError) -> None:
    """Re-raise a candidate exception as the builtin Exception subclass it names, so that tests expecting
    e.g. ValueError work. Only Exception subclasses: SystemExit and friends never reach the judge."""
    text = str(err.args[0]) if err.args else ""
    if len(err.args) > 1 and err.args[1] == "exception":
        name = text.split(":", 1)[0]
        cls = getattr(builtins, name, None)
        if isinstance(cls, type) and issubclass(cls, Exception) and cls is not AssertionError:
            raise cls(text) from None


class Reporter:
    def __init__(self, vsock: socket.socket, chan: Channel) -> None:
        self.vsock, self.chan = vsock, chan
        self.count = 0

    def case(self, name: str, passed: bool, status: str, message: str, cpu_ns: int = 0) -> None:
        self.count += 1
        wire.send(self.vsock, {"event": "case", "name": name, "passed": passed, "status": status,
                               "message": message[:MESSAGE_CAP], "cpu_ms": cpu_ns / 1e6})

    def event(self, obj: dict) -> None:
        wire.send(self.vsock, obj)


def run_case(chan: Channel, rep: Reporter, name: str, body) -> None:
    """Run one test case: body() raising nothing means passed. Respawns a hung or dead candidate after."""
    chan.deadline = time.monotonic() + chan.case_timeout
    before = chan.cpu_ns()
    try:
        body()
    except CaseTimeout:
        rep.case(name, False, "timeout", f"no answer within {chan.case_timeout:g}s")
    except CandidateGone as e:
        rep.case(name, False, "runtime_error", str(e))
    except CandidateError as e:
        rep.case(name, False, "failed", f"candidate: {e.args[0]}")
    except AssertionError as e:
        rep.case(name, False, "failed", str(e) or "assertion failed")
    except SpecError:
        raise
    except RecursionError:
        rep.case(name, False, "failed", "RecursionError")
    except Exception as e:  # noqa: BLE001 - e.g. comparing a wrong type raised inside the test
        rep.case(name, False, "failed", f"{type(e).__name__}: {e}")
    else:
        rep.case(name, True, "passed", "", chan.cpu_ns() - before)
        return
    if chan.broken:
        reload = chan.respawn()
        if chan.last_death and chan.last_death.get("status") not in (None, "ok", "timeout"):
            rep.event({"event": "candidate_death", "case": name, **chan.last_death})
        if not reload.get("ok"):
            chan.broken = True  # later cases fail fast


# ------------------------------------------------------------------------------------------------- specs


def _case_groups(statements: list[ast.stmt]) -> tuple[list[list[ast.stmt]], list[ast.stmt]]:
    """Split statements into test cases: each statement that asserts (a loop of asserts is one case) closes
    a case together with the plain statements before it. Constant asserts (`assert True`) are not cases."""
    groups, current = [], []
    for stmt in statements:
        current.append(stmt)
        if any(isinstance(n, ast.Assert) and not isinstance(n.test, ast.Constant) for n in ast.walk(stmt)):
            groups.append(current)
            current = []
    return groups, current


def _case_name(group: list[ast.stmt], source: str) -> str:
    seg = ast.get_source_segment(source, group[-1]) or ast.dump(group[-1])[:80]
    return " ".join(seg.split())[:160]


def _assert_message(group: list[ast.stmt], source: str) -> str:
    return "assertion failed: " + _case_name(group, source)


def judge_assert(spec: dict, chan: Channel, rep: Reporter, load: dict) -> None:
    source = spec.get("test_code") or ""
    entry = spec.get("entry_point")
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise SpecError(f"test_code does not parse: {e}") from None
    check = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
    if check is not None:
        setup = [s for s in tree.body if s is not check]
        groups, tail = _case_groups(check.body)
        param = check.args.args[0].arg if check.args.args else "candidate"
    else:
        setup = []
        groups, tail = _case_groups(tree.body)
        param = None
    names = [_case_name(g, source) for g in groups]
    rep.event({"event": "plan", "cases": names})
    if not load["ok"]:
        for n in names:
            rep.case(n, False, "not_run", "program did not load: " + load.get("error", ""))
        return
    if entry and not _defined(entry, load["names"]):
        for n in names:
            rep.case(n, False, "failed", f"entry point {entry!r} is not defined")
        return
    ns: dict = {"__name__": "__test__", "__builtins__": builtins}
    if spec.get("support_code"):
        try:
            exec(compile(spec["support_code"], "<support>", "exec"), ns)
        except Exception as e:  # noqa: BLE001
            raise SpecError(f"support_code failed: {type(e).__name__}: {e}") from None
    for name, kind in load["names"].items():
        if name in ns:
            continue  # trusted support code wins: a candidate cannot redefine the oracle
        if kind == "value":
            try:
                chan.deadline = time.monotonic() + chan.case_timeout
                ns[name] = chan.get(name)
            except (CandidateError, CaseTimeout, CandidateGone):
                pass
        else:
            ns[name] = Remote(chan, name)
    if entry:
        ns[entry] = Remote(chan, _callable_name(entry, load["names"]))
    try:
        for stmt in setup:
            exec(compile(ast.Module([stmt], []), "<test>", "exec"), ns)
    except Exception as e:  # noqa: BLE001
        raise SpecError(f"test set-up failed: {type(e).__name__}: {e}") from None
    if param:
        ns[param] = ns.get(entry) if entry else None
    del tail  # statements after the last assert verify nothing
    for group, name in zip(groups, names, strict=True):
        code = compile(ast.Module(group, []), "<test>", "exec")
        message = _assert_message(group, source)

        def body(code=code, message=message) -> None:
            try:
                exec(code, ns)
            except AssertionError as e:
                raise AssertionError(message + (f" ({e})" if str(e) else "")) from None

        run_case(chan, rep, name, body)


def _defined(entry: str, names: dict) -> bool:
    return entry in names or ("Solution" in names and "." not in entry)


def _callable_name(entry: str, names: dict) -> str:
    if entry in names or "." in entry:
        return entry
    return f"Solution.{entry}"


def _jsonish(v: object) -> object:
    """Tuples become lists: JSON test specs cannot express tuples."""
    if type(v) in (list, tuple):
        return [_jsonish(x) for x in v]
    if type(v) is dict:
        return {k: _jsonish(x) for k, x in v.items()}
    return v


def values_match(got: object, expected: object, tol: float | None) -> bool:
    if type(expected) is bool or type(got) is bool:
        return type(got) is type(expected) and got == expected
    if tol is not None and type(expected) in (int, float) and type(got) in (int, float):
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        return math.isclose(got, expected, rel_tol=tol, abs_tol=tol)
    if type(expected) is list and type(got) is list:
        return len(got) == len(expected) and all(values_match(g, e, tol) for g, e in zip(got, expected, strict=True))
    if type(expected) is dict and type(got) is dict:
        return got.keys() == expected.keys() and all(values_match(got[k], expected[k], tol) for k in expected)
    if type(expected) is float and type(got) is float and math.isnan(expected):
        return math.isnan(got)
    return type(got) in (int, float, str, type(None)) and got == expected


def judge_function(spec: dict, chan: Channel, rep: Reporter, load: dict) -> None:
    entry = spec.get("entry_point") or ""
    cases = spec.get("cases") or []
    tol = spec.get("float_tol")
    names = [f"case {i}" for i in range(len(cases))]
    rep.event({"event": "plan", "cases": names})
    if not load["ok"] or not _defined(entry, load["names"]):
        why = "program did not load: " + load.get("error", "") if not load["ok"] else f"{entry!r} is not defined"
        for n in names:
            rep.case(n, False, "not_run" if not load["ok"] else "failed", why)
        return
    target = _callable_name(entry, load["names"])
    for name, case in zip(names, cases, strict=True):

        def body(case=case) -> None:
            got = _jsonish(chan.call(target, tuple(case.get("args") or []), dict(case.get("kwargs") or {})))
            if not values_match(got, case.get("expected"), tol):
                raise AssertionError(f"expected {case.get('expected')!r:.100}, got {got!r:.100}")

        run_case(chan, rep, name, body)


def judge_pytest(spec: dict, chan: Channel, rep: Reporter, load: dict) -> None:
    import pytest

    path = os.path.join(os.getcwd(), "test_solution.py")
    with open(path, "w") as f:
        f.write(spec.get("test_code") or "")
    module = types.ModuleType("solution")
    if load["ok"]:
        for name, kind in load["names"].items():
            if kind == "value":
                try:
                    chan.deadline = time.monotonic() + chan.case_timeout
                    setattr(module, name, chan.get(name))
                except (CandidateError, CaseTimeout, CandidateGone):
                    pass
            else:
                setattr(module, name, Remote(chan, name))
    sys.modules["solution"] = module
    load_error = None if load["ok"] else "program did not load: " + load.get("error", "")

    class Collector:
        def pytest_collection_finish(self, session) -> None:
            rep.event({"event": "plan", "cases": [item.nodeid.split("::", 1)[-1] for item in session.items]})

        def pytest_runtest_setup(self, item) -> None:
            chan.deadline = time.monotonic() + chan.case_timeout
            if load_error:
                pytest.fail(load_error, pytrace=False)

        def pytest_runtest_logreport(self, report) -> None:
            if report.when == "call" or (report.when == "setup" and not report.passed):
                status = "passed" if report.passed else "failed"
                if report.skipped:
                    status = "failed"  # a skipped test never counts as passed
                message = "" if report.passed else str(report.longrepr)[-MESSAGE_CAP:]
                if "CaseTimeout" in message:
                    status = "timeout"
                rep.case(report.nodeid.split("::", 1)[-1], report.passed and not report.skipped, status, message)
                if chan.broken:
                    chan.respawn()

        def pytest_collectreport(self, report) -> None:
            if report.failed:
                raise SpecError("pytest could not collect the tests: " + str(report.longrepr)[-MESSAGE_CAP:])

    args = [path, "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", os.getcwd(),
            "-c", os.devnull, "--import-mode=importlib", "--tb=line", "-o", "console_output_style=classic",
            "--basetemp", os.path.join(os.getcwd(), "tmp")]
    code = pytest.main(args, plugins=[Collector()])
    if code not in (0, 1) and rep.count == 0:
        raise SpecError(f"pytest exited with {code} and ran no test")


def judge_scaling(spec: dict, chan: Channel, rep: Reporter, load: dict) -> None:
    """One call of the entry point on generated input of size n (efficiency's complexity fit). The case passes when
    the call returns; its message is a digest of the answer, which the host compares with the reference's."""
    import hashlib
    import json

    entry, n = spec.get("entry_point") or "", int(spec.get("n", 0))
    name = f"n={n}"
    rep.event({"event": "plan", "cases": [name]})
    if not load["ok"] or not _defined(entry, load["names"]):
        rep.case(name, False, "failed", "program did not load or lacks the entry point")
        return
    ns: dict = {"__name__": "__scaling__", "__builtins__": builtins}
    try:
        exec(compile(spec.get("generator") or "", "<generator>", "exec"), ns)
        args = ns[spec.get("function") or "generate"](n)
    except Exception as e:  # noqa: BLE001
        raise SpecError(f"scaling generator failed: {type(e).__name__}: {e}") from None
    if type(args) not in (list, tuple):
        raise SpecError("the scaling generator must return a list of positional arguments")
    target = _callable_name(entry, load["names"])
    digest: list[str] = []

    def body() -> None:
        got = chan.call(target, tuple(args), {})
        digest.append(hashlib.sha256(json.dumps(codec.encode(got)).encode()).hexdigest()[:16])

    run_case(chan, rep, name, body)
    if digest:  # run_case reported the case already; the digest goes out as its own event
        rep.event({"event": "digest", "case": name, "digest": digest[0]})


KINDS = {"assert": judge_assert, "function": judge_function, "pytest": judge_pytest, "scaling": judge_scaling}


def main(spec: dict, vsock: socket.socket, to_fd: int, from_fd: int, cand_pid: int, case_timeout: float) -> None:
    chan = Channel(vsock, to_fd, from_fd, cand_pid, case_timeout)
    rep = Reporter(vsock, chan)
    load = chan.load()
    rep.event({"event": "load", **load})
    kind = KINDS.get(spec.get("kind", ""))
    try:
        if kind is None:
            raise SpecError(f"unknown test kind {spec.get('kind')!r}")
        kind(spec, chan, rep, load)
    except SpecError as e:
        wire.send(vsock, {"event": "done", "spec_error": str(e)[:2000]})
        return
    wire.send(vsock, {"event": "done"})
