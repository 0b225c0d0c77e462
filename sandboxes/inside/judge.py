"""Judge side of a judge job (stdlib only, plus pytest for "pytest" specs): runs the tests, calls the candidate.

Runs as the judge uid, in its own process: nothing the candidate does can patch this harness, its builtins or
its AssertionError. The candidate is reached only through the channel: arguments go out and return values come
back as plain data (codec), so an object whose __eq__ always agrees cannot reach a comparison here. Verdicts go
to the runner over the verdict socket, never through any output the candidate controls.

Whose fault is what, by construction (a program must never turn its own failure into ours, nor ours into its):
- SpecError (the item comes back invalid_input) only for what fails without any program: the test code does not
  parse, the support code or the scaling generator raises, a test hands the program something that is not plain
  data, or the tests fail the same way against StandIn, a stand-in program that accepts every operation (set-up
  statements, pytest collection). A test file that cannot import a name the program lacks is the program's failure.
- Everything the candidate can reach on our side is its failure: its end of the channel (closed, corrupted, bytes
  that do not decode, however deep or large: CandidateGone), the values it returns (whatever a test raises on
  them: a failed case), the resources it shares with us (our memory exhausted by its data, the scratch
  filesystem filled: CandidateFault, reported as memory_limit / output_limit). SIGPIPE is ignored here, so a
  closed pipe is an error we handle, never a death.
- Anything else that escapes is a fault of ours, and the runner reports it as one (sandbox_error).

The tests see only the names they are meant to call (see visible_names): a program's `all`, `set` or `sorted`
never replaces the builtin a test or the trusted support code relies on.

Spec kinds:
- "assert": test_code is HumanEval's `check(candidate)` (with entry_point) or plain MBPP assert lines; optional
  trusted support_code (e.g. the HumanEval prompt) in a namespace of its own, whose names win over the candidate's
  except the entry point.
- "function": entry_point and cases [{args, kwargs, expected}], optional float_tol (never applied to ints).
- "pytest": test_code is a pytest file that imports `solution`.
"""

from __future__ import annotations

import ast
import builtins
import errno
import math
import os
import reprlib
import select
import signal
import socket
import sys
import time
import types

import codec
import wire

TYPE_CHECKING = False  # for the checker only: the code run in the sandbox never imports typing (start-up time)
if TYPE_CHECKING:
    from typing import Any, Literal

MESSAGE_CAP = 300
BUILTIN_NAMES = frozenset(dir(builtins))
DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class CaseTimeout(BaseException):
    """The candidate did not answer within the test case's time limit. A BaseException so that a test's own
    `except Exception` cannot swallow it and pass."""


class CandidateGone(BaseException):
    """The candidate process died, closed or corrupted the channel during the test case (BaseException: see
    above)."""


class CandidateError(Exception):
    """The candidate raised, returned something that is not plain data, or lacks the name called."""


class SpecError(Exception):
    """The test specification is broken on its own, with no program involved (see the module docstring)."""


class CandidateFault(Exception):
    """The candidate exhausted a resource the judge shares with it; status is the program's failure."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status


def text_of(value: object, limit: int = 100) -> str:
    """A short repr that cannot fail (a 10,000-digit int has no decimal repr under the interpreter's limit)."""
    r = reprlib.Repr()
    r.maxstring = r.maxother = r.maxlong = limit
    try:
        return r.repr(value)[: limit * 2]
    except Exception:  # noqa: BLE001
        return f"<{type(value).__name__}>"


def message_of(e: BaseException) -> str:
    try:
        return str(e)[:MESSAGE_CAP]
    except Exception:  # noqa: BLE001 - str() of an exception carrying an unprintable value (a huge int)
        return ""


def error_text(e: BaseException) -> str:
    return f"{type(e).__name__}: {message_of(e)}"[:MESSAGE_CAP]


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

    def _gone(self, why: str) -> CandidateGone:
        self.broken = True
        return CandidateGone(why)

    def _next_frame(self) -> dict:
        while not self.pending:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.broken = True
                raise CaseTimeout()
            try:
                r, _, _ = select.select([self.from_fd], [], [], remaining)
                if r:
                    self.pending.extend(self.reader.feed())
            except Exception as e:  # noqa: BLE001 - any bytes at all: too deep (RecursionError), too big
                # (MemoryError), not JSON, not UTF-8, a broken pipe: the candidate's failure, never ours
                raise self._gone(f"protocol violation: {error_text(e)}") from None
            if self.reader.eof and not self.pending:
                raise self._gone("the candidate process ended")
        frame = self.pending.pop(0)
        if type(frame) is not dict:
            raise self._gone("protocol violation: a frame that is not an object")
        return frame

    def _send(self, obj: object) -> None:
        data = memoryview(wire.encode(obj))
        while data:
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.broken = True
                raise CaseTimeout()
            try:
                _, w, _ = select.select([], [self.to_fd], [], remaining)
                if w:
                    data = data[os.write(self.to_fd, data) :]
            except OSError as e:  # EPIPE (SIGPIPE is ignored), or whatever the candidate did to its end
                raise self._gone(f"the candidate closed its end of the channel ({e.strerror})") from None

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
        if not loaded.get("ok"):
            return {"ok": False, "stage": "load", "status": str(loaded.get("kind"))[:40],
                    "error": str(loaded.get("error"))[:MESSAGE_CAP]}
        names = loaded.get("names")
        names = {str(k): str(v) for k, v in names.items()} if type(names) is dict else {}
        return {"ok": True, "names": names}

    def request(self, req: dict) -> object:
        if self.broken:
            raise CandidateGone("the candidate process is gone")
        self._send(req)
        reply = self._next_frame()
        if "value" in reply:
            try:
                return codec.decode(reply["value"])
            except Exception as e:  # noqa: BLE001 - anything malformed is the candidate's failure
                raise CandidateError(f"unreadable return value: {error_text(e)}") from None
        raise CandidateError(str(reply.get("error", "no value"))[:MESSAGE_CAP], reply.get("kind"))

    def call(self, name: str, args: tuple, kwargs: dict) -> object:
        try:
            enc_args, enc_kwargs = codec.encode(list(args), self._ref), codec.encode(dict(kwargs), self._ref)
        except codec.TooLarge as e:  # plain data, only too big: built from the candidate's own answers
            raise CandidateError(f"the arguments for {name} are too large to send: {e}") from None
        except codec.Unencodable as e:
            raise SpecError(f"a test passes a non-plain argument to {name}: {e}") from None
        return self.request({"op": "call", "call": name, "args": enc_args, "kwargs": enc_kwargs})

    def _ref(self, value: object) -> str | None:
        """A Remote of this channel crosses as a reference to the candidate's own name."""
        return value._name if isinstance(value, Remote) and value._chan is self else None

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
        try:  # os-level: read twice per case, a text file costs the judge ~3x the CPU
            fd = os.open(f"/proc/{self.pid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
            try:
                return int(os.read(fd, 256).split()[0])
            finally:
                os.close(fd)
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
            try:
                exc = cls(text)
            except Exception:  # noqa: BLE001 - e.g. UnicodeDecodeError wants five arguments
                return
            raise exc from None


class StandIn:
    """A stand-in program's every name: any attribute, call, item, operator or iteration succeeds. Tests that
    fail against it are broken on their own; tests that pass with it and fail with the program, fail because of
    the program."""

    def __getattr__(self, name: str) -> StandIn:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # protocols the interpreter probes (copy, pickle, fspath, ...)
        return self

    def __call__(self, *args: object, **kwargs: object) -> StandIn:
        return self

    def __getitem__(self, key: object) -> StandIn:
        return self

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def __delitem__(self, key: object) -> None:
        pass

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return True

    def __index__(self) -> int:
        return 0

    def __int__(self) -> int:
        return 0

    def __float__(self) -> float:
        return 0.0

    def __str__(self) -> str:
        return ""

    def __repr__(self) -> str:
        return "<stand-in>"

    def __hash__(self) -> int:
        return 0

    def __eq__(self, other: object) -> bool:
        return True

    def __contains__(self, item: object) -> bool:
        return False

    def __enter__(self) -> StandIn:
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        return False


def _stand_in_operator(self: StandIn, *args: object) -> StandIn:
    return self


for _op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or",
            "xor", "divmod"):
    for _form in (f"__{_op}__", f"__r{_op}__", f"__i{_op}__"):
        setattr(StandIn, _form, _stand_in_operator)
for _op in ("neg", "pos", "abs", "invert", "lt", "le", "gt", "ge", "ne", "round", "trunc", "floor", "ceil"):
    setattr(StandIn, f"__{_op}__", _stand_in_operator)
StandIn.__lt__ = StandIn.__le__ = StandIn.__gt__ = StandIn.__ge__ = lambda self, other: True  # type: ignore
StandIn.__ne__ = lambda self, other: False  # type: ignore


class StandInModule(types.ModuleType):
    """`solution` for the stand-in program: every name exists (PEP 562); `import *` yields the names read."""

    def __getattr__(self, name: str) -> StandIn:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return StandIn()


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
        rep.case(name, False, "failed", message_of(e) or "assertion failed")
    except SpecError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever the test raised on the candidate's values (a wrong type,
        rep.case(name, False, "failed", error_text(e))  # RecursionError, MemoryError on a huge answer)
    else:
        rep.case(name, True, "passed", "", chan.cpu_ns() - before)
        return
    if chan.broken:
        reload = chan.respawn()
        if chan.last_death and chan.last_death.get("status") not in (None, "ok", "timeout"):
            rep.event({"event": "candidate_death", "case": name, **chan.last_death})
        if not reload.get("ok"):
            chan.broken = True  # later cases fail fast


# ------------------------------------------------------------------------------------------ what tests see


def _parse(source: str, what: str) -> ast.Module:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise SpecError(f"{what} does not parse: {error_text(e)}") from None


def _names_read_and_bound(tree: ast.AST) -> tuple[set[str], set[str]]:
    """(names the test code reads, names it binds itself: assignments, defs, imports, parameters, ...)."""
    read: set[str] = set()
    bound: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            (read if isinstance(n.ctx, ast.Load) else bound).add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(n.name)
        elif isinstance(n, ast.arg):
            bound.add(n.arg)
        elif isinstance(n, ast.alias):
            bound.add(n.asname or n.name.split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.MatchAs | ast.MatchStar) and n.name:
            bound.add(n.name)
    return read, bound


def visible_names(tree: ast.AST, program: dict, trusted: set[str], entry: str | None) -> list[str]:
    """The program's names the tests may reach: the entry point, plus names the test code reads without binding
    them itself that are neither builtins nor defined by the trusted support code. A program defining `sum`,
    `all` or `sorted` (or anything else a test does not ask for) is not seen by the tests."""
    read, bound = _names_read_and_bound(tree)
    wanted = (read - bound - BUILTIN_NAMES - trusted) | ({entry} if entry else set())
    return sorted(n for n in wanted if n in program and not n.startswith("__"))


def _bind(chan: Channel, names: dict, visible: list[str], bind) -> None:
    """Bind each visible name: a value is fetched once (plain data), anything callable becomes a Remote."""
    for name in visible:
        if names.get(name) == "value":
            try:
                chan.deadline = time.monotonic() + chan.case_timeout
                bind(name, chan.get(name))
            except (CandidateError, CaseTimeout, CandidateGone):
                pass  # the tests meet a NameError, a failed case
        else:
            bind(name, Remote(chan, name))


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


def _compile(stmts: list[ast.stmt], filename: str) -> types.CodeType:
    try:
        return compile(ast.Module(stmts, []), filename, "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        raise SpecError(f"test_code does not compile: {error_text(e)}") from None


def _support_namespace(spec: dict) -> dict:
    """The trusted support code's own namespace: no name of the program is ever in it except the entry point
    (bound later), so a helper the tests call cannot be redirected to the program by a shadowing name."""
    ns: dict = {"__name__": "__test__", "__builtins__": builtins}
    if spec.get("support_code"):
        try:
            exec(compile(spec["support_code"], "<support>", "exec"), ns)
        except Exception as e:  # noqa: BLE001 - runs before any name of the program exists
            raise SpecError(f"support_code failed: {error_text(e)}") from None
    return ns


def _set_up(codes: list[types.CodeType], ns: dict) -> BaseException | None:
    """Run the tests' set-up statements; the exception that stopped them, if any."""
    try:
        for code in codes:
            exec(code, ns)
    except (Exception, CaseTimeout, CandidateGone) as e:  # noqa: BLE001
        return e
    return None


def judge_assert(spec: dict, chan: Channel, rep: Reporter, load: dict) -> None:
    source = spec.get("test_code") or ""
    entry = spec.get("entry_point")
    tree = _parse(source, "test_code")
    check = next((s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "check"), None)
    if check is not None:
        setup = [s for s in tree.body if s is not check]
        groups, tail = _case_groups(check.body)
        param = check.args.args[0].arg if check.args.args else "candidate"
    else:
        setup = []
        groups, tail = _case_groups(tree.body)
        param = None
    del tail  # statements after the last assert verify nothing
    names = [_case_name(g, source) for g in groups]
    setup_codes = [_compile([s], "<test>") for s in setup]
    case_codes = [_compile(g, "<test>") for g in groups]
    rep.event({"event": "plan", "cases": names})
    support = _support_namespace(spec)
    if not load["ok"]:
        for n in names:
            rep.case(n, False, "not_run", "program did not load: " + load.get("error", ""))
        return
    if entry and not _defined(entry, load["names"]):
        for n in names:
            rep.case(n, False, "failed", f"entry point {entry!r} is not defined")
        return
    visible = visible_names(tree, load["names"], set(support) - {entry}, entry)
    ns = dict(support)
    _bind(chan, load["names"], [n for n in visible if n != entry], ns.__setitem__)
    if entry:
        ns[entry] = support[entry] = Remote(chan, _callable_name(entry, load["names"]))
    chan.deadline = time.monotonic() + chan.case_timeout
    failure = _set_up(setup_codes, ns)
    if failure is not None:
        candidate_made = isinstance(failure, CaseTimeout | CandidateGone | CandidateError)
        stand_in = _stand_in_namespace(spec, visible + [entry] if entry else visible)
        if not candidate_made and _set_up(setup_codes, stand_in) is not None:
            raise SpecError(f"test set-up failed: {error_text(failure)}")
        for n in names:
            rep.case(n, False, "failed", f"the tests' set-up failed on this program: {error_text(failure)}")
        return
    if param:
        ns[param] = ns.get(entry) if entry else None
    for code, name in zip(case_codes, names, strict=True):
        message = "assertion failed: " + name

        def body(code=code, message=message) -> None:
            try:
                exec(code, ns)
            except AssertionError as e:
                detail = message_of(e)
                raise AssertionError(message + (f" ({detail})" if detail else "")) from None

        run_case(chan, rep, name, body)


def _stand_in_namespace(spec: dict, names: list[str]) -> dict:
    ns = _support_namespace(spec)
    for name in names:
        ns[name] = StandIn()
    return ns


def _defined(entry: str, names: dict) -> bool:
    return entry in names or ("Solution" in names and "." not in entry)


def _callable_name(entry: str, names: dict) -> str:
    if entry in names or "." in entry:
        return entry
    return f"Solution.{entry}"


def _jsonish(v: Any) -> object:
    """Tuples become lists: JSON test specs cannot express tuples."""
    if type(v) in (list, tuple):
        return [_jsonish(x) for x in v]
    if type(v) is dict:
        return {k: _jsonish(x) for k, x in v.items()}
    return v


def values_match(got: Any, expected: Any, tol: float | None) -> bool:
    """Exact, except floats within float_tol when one is given. An expected int is never compared with a
    tolerance (a count off by 89 in 123,456,789 is wrong, whatever float_tol says)."""
    if type(expected) is bool or type(got) is bool:
        return type(got) is type(expected) and got == expected
    if tol is not None and type(expected) is float and type(got) in (int, float):
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
                raise AssertionError(f"expected {text_of(case.get('expected'))}, got {text_of(got)}")

        run_case(chan, rep, name, body)


# ------------------------------------------------------------------------------------------------- pytest


def _pytest_wants(tree: ast.Module) -> tuple[set[str], bool]:
    """(names the test file asks `solution` for by name: `from solution import x`, `solution.x`; whether it
    star-imports it)."""
    asked, star, aliases = set(), False, {"solution"}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module == "solution" and not n.level:
            for a in n.names:
                if a.name == "*":
                    star = True
                else:
                    asked.add(a.name)
        elif isinstance(n, ast.Import):
            aliases |= {a.asname for a in n.names if a.name == "solution" and a.asname}
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in aliases:
            asked.add(n.attr)
    return asked, star


def _write_own_file(path: str, text: str) -> None:
    """A file of the judge's own. The scratch filesystem was empty when the job began (every job is wiped
    after): if it is full now, the candidate filled it."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as e:
        if e.errno in DISK_FULL:
            raise CandidateFault("output_limit", "the program filled the sandbox's scratch space") from None
        raise


def judge_pytest(spec: dict, chan: Channel, rep: Reporter, load: dict) -> None:
    import pytest

    source = spec.get("test_code") or ""
    tree = _parse(source, "test_code")
    path = os.path.join(os.getcwd(), "test_solution.py")
    _write_own_file(path, source)
    asked, star = _pytest_wants(tree)
    read, bound = _names_read_and_bound(tree)
    star_names = sorted(read - bound - BUILTIN_NAMES) if star else []
    module = types.ModuleType("solution")
    if load["ok"]:
        # Names asked for by name are the program's (even `from solution import sorted`); a star import brings
        # only the names the file reads and does not bind itself, never a builtin's double.
        visible = sorted((asked | set(star_names)) & set(load["names"]))
        _bind(chan, load["names"], visible, lambda n, v: setattr(module, n, v))
        module.__dict__["__all__"] = [n for n in star_names if hasattr(module, n)]
    else:
        module.__dict__["__all__"] = []
    sys.modules["solution"] = module
    load_error = None if load["ok"] else "program did not load: " + load.get("error", "")

    class Collector:
        collect_error = ""
        items = 0

        def pytest_collectreport(self, report) -> None:
            if report.failed:
                self.collect_error = self.collect_error or _last_line(str(report.longrepr))

        def pytest_collection_finish(self, session) -> None:
            self.items = len(session.items)
            if not self.collect_error and self.items:
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
                elif "CandidateGone" in message:
                    status = "runtime_error"
                rep.case(report.nodeid.split("::", 1)[-1], report.passed and not report.skipped, status, message)
                if chan.broken:
                    chan.respawn()

    args = [path, "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", os.getcwd(),
            "-c", os.devnull, "--import-mode=importlib", "--tb=line", "-o", "console_output_style=classic",
            "--capture=sys", "--basetemp", os.path.join(os.getcwd(), "tmp")]
    collector = Collector()
    pytest.main(args, plugins=[collector])
    if collector.collect_error or not collector.items:
        for name, mod in list(sys.modules.items()):  # the test module, imported against the program
            if getattr(mod, "__file__", None) == path:
                del sys.modules[name]
        plan = _collect_against_stand_in(args, star_names)
        why = collector.collect_error or "no test was collected"
        rep.event({"event": "plan", "cases": plan})
        for name in plan:
            rep.case(name, False, "failed", f"the tests cannot be collected with this program: {why}"[:MESSAGE_CAP])


def _last_line(text: str) -> str:
    """The line that says what went wrong (pytest's `E   ImportError: cannot import name ...`)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else text)[-MESSAGE_CAP:]


def _collect_against_stand_in(args: list[str], star_names: list[str]) -> list[str]:
    """The test file's own cases, collected against a stand-in `solution`; SpecError if even that fails."""
    import pytest

    stand_in = StandInModule("solution")
    stand_in.__dict__["__all__"] = list(star_names)
    for name in star_names:
        setattr(stand_in, name, StandIn())
    sys.modules["solution"] = stand_in

    class Plan:
        error = ""
        cases: list[str] = []

        def pytest_collectreport(self, report) -> None:
            if report.failed:
                self.error = self.error or str(report.longrepr)[-MESSAGE_CAP:]

        def pytest_collection_finish(self, session) -> None:
            self.cases = [item.nodeid.split("::", 1)[-1] for item in session.items]

    plan = Plan()
    pytest.main([*args, "--collect-only"], plugins=[plan])
    if plan.error or not plan.cases:
        raise SpecError("pytest could not collect the tests: " + (plan.error or "no test found"))
    return plan.cases


# ------------------------------------------------------------------------------------------------- scaling


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
        raise SpecError(f"scaling generator failed: {error_text(e)}") from None
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
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a candidate closing its end gets EPIPE here, not our death
    if not cand_pid:  # the runner set us up while the candidate's zygote set it up: its pid comes as a frame
        frame = wire.recv(vsock)
        cand_pid = int(frame["pid"]) if isinstance(frame, dict) else 0
    chan = Channel(vsock, to_fd, from_fd, cand_pid, case_timeout)
    rep = Reporter(vsock, chan)
    done: dict = {"event": "done"}
    try:
        load = chan.load()
        rep.event({"event": "load", **load})
        kind = KINDS.get(spec.get("kind", ""))
        if kind is None:
            raise SpecError(f"unknown test kind {spec.get('kind')!r}")
        kind(spec, chan, rep, load)
    except SpecError as e:
        done["spec_error"] = str(e)[:2000]
    except CandidateFault as e:
        done.update(candidate_fault=e.status, error=str(e))
    except MemoryError:  # our own needs are bounded by the spec: what exhausted our memory is the program's data
        done.update(candidate_fault="memory_limit", error="the judge ran out of memory on the program's data")
    except OSError as e:
        if e.errno not in DISK_FULL:
            raise
        done.update(candidate_fault="output_limit", error="the program filled the sandbox's scratch space")
    except (CaseTimeout, CandidateGone) as e:  # only the channel raises these: the candidate's doing
        done.update(candidate_fault="timeout" if isinstance(e, CaseTimeout) else "runtime_error",
                    error=f"the candidate stopped answering: {e}")
    wire.send(vsock, done)
