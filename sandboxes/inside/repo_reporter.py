"""rewardbox's own pytest reporter for repo jobs (stdlib + pytest). Runs in the test process, as the candidate uid.

The repository's package runs in this very process, so in principle nothing here is out of its reach. The design
makes every *generic* way of faking a pass fail, so that only an attack written against this file remains (see
the README's residual risks, and the `introspection` flag such an attack needs):

- Channel: verdicts leave on fd 3, a pipe only this process and the runner hold (close-on-exec), each frame
  carrying a per-job token that arrived on stdin before any package code ran. The runner rejects the whole run
  on a frame without it, so output (fake summaries), forged frames and a closed or replaced fd pass nothing.
- Positive evidence: a test passes only if this reporter's own code saw it run to the end: its test function,
  as sealed at the end of collection, was called by our pytest_pyfunc_call and returned (unittest: unittest
  called our addSuccess; other item kinds: the runtest call returned), and every report of the test (setup,
  call, teardown, subtests) passed. Rewriting reports, making runtest a no-op, skipping or exiting produce no
  evidence, so they fail.
- Guard: pytest's, pluggy's, unittest's and doctest's functions and classes and the builtins are recorded in the
  zygote's pristine state; import hooks, trace/profile hooks, gc callbacks, the plugin manager's plugins and hook
  implementations and the collected test functions at the end of collection. Any change, checked at the end of
  collection, after a test (the modules on every test's path, at most every CHECK_EVERY_S) and everything at the
  end of the session, fails the whole run (flag harness_patch).
- Provenance: the listed test files are compiled here before any package code runs, and pytest's importer gets
  that code; at the end of collection every test function and its module must be code of that compilation
  (repo_provenance), whatever the package did to sys.modules, finders, loaders or `__code__` (flag harness_patch).
- Collection: only the listed node ids run (the rest is deselected here, last); what was collected and which
  files failed to collect go to the runner, which fails every listed test it never got a verdict for.
"""

from __future__ import annotations

import builtins
import fcntl
import gc
import importlib.util
import inspect
import json
import operator
import os
import sys
import threading
import time
import types
from pathlib import Path

import _pytest.assertion.rewrite
import _pytest.config
import _pytest.config.findpaths
import _pytest.unittest
import pluggy
import pytest
import repo_provenance
import wire

REPORT_FD = 3
FLUSH_S = 0.05
CHECK_EVERY_S = 0.005
MESSAGE_CAP = 1500
# ast: repo_provenance compiles with it after package code may have run (files other than the listed tests).
WATCHED = ("pytest", "_pytest", "pluggy", "unittest", "doctest", "iniconfig", "ast")
# Module globals pytest itself rebinds while it runs (the assertion plugin, around every test).
REBOUND_BY_PYTEST = {("_pytest.assertion.util", "_reprcompare"), ("_pytest.assertion.util", "_assertion_pass"),
                     ("_pytest.assertion.util", "_config")}
# Class attributes pytest itself adds while it runs (caches of warnings it showed once).
CACHED_BY_PYTEST = {"_pytest_diamond_inheritance_warning_shown", "_wrapped_pdb_cls"}
CODE = operator.attrgetter("__code__")
GET_IMPLS = operator.methodcaller("get_hookimpls")
# On every test's path: checked after each test (everything is checked at the end of collection and of the session).
HOT_MODULES = ("builtins", "pluggy", "unittest.case", "unittest.result", "_pytest.runner", "_pytest.reports",
               "_pytest.python", "_pytest.unittest", "_pytest.fixtures", "_pytest.skipping", "_pytest.outcomes",
               "_pytest.nodes", "_pytest.main", "_pytest.subtests", "_pytest.doctest", "_pytest.capture",
               "_pytest.logging", "_pytest.threadexception", "_pytest.unraisableexception")
REWRITE_TEST = _pytest.assertion.rewrite._rewrite_test  # pytest's own, for files that are not listed tests
READ_PYC = _pytest.assertion.rewrite._read_pyc
HOOK_EXEC_CODE = _pytest.assertion.rewrite.AssertionRewritingHook.exec_module.__code__
GETFRAME = sys._getframe
# What the installed pytest and pluggy can do (the reporter runs in the task's own interpreter: pytest 5 and newer).
PYC_BY_HASH = "source_hash" in HOOK_EXEC_CODE.co_varnames  # pytest >= 8; older ones key rewritten pycs by stat
NEW_STYLE_WRAPPERS = "wrapper" in inspect.signature(pluggy.HookimplMarker.__call__).parameters  # pluggy >= 1.1
GUARD = None  # recorded in the zygote by warm_up(); every test process starts from that record


def warm_up() -> None:
    """In the zygote, before any job exists: import every module pytest may load and record them (the Guard), so
    that the record is of code no job has touched and no test process pays for taking it."""
    global GUARD
    import doctest  # noqa: F401
    import unittest  # noqa: F401

    for name in ("tomllib", "faulthandler", "packaging.version", "readline", "_pytest._argcomplete"):
        try:  # what pytest imports while it starts (measured): ~15 ms less per test process
            __import__(name)
        except ImportError:
            pass
    for name in (*_pytest.config.default_plugins, "subtests"):
        try:
            __import__(f"_pytest.{name}")
        except ImportError:
            pass
    GUARD = Guard()
    GUARD.record()
    gc.freeze()  # all of it is shared with every test process: keep the collector off it (no copy-on-write)


# ------------------------------------------------------------------------------------------------ the guard


def _code_of(value: object) -> object:
    return getattr(value, "__code__", None)


def _function_of(item) -> object:
    """The function a test item runs (a bound method's function: unittest items re-bind it per instance)."""
    obj = getattr(item, "obj", None)
    return getattr(obj, "__func__", obj)


def _recordable(value: object) -> bool:
    return isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, classmethod, staticmethod,
                              property))


class Space:
    """One namespace (a module's globals, a class's dict, the builtins) and what it held when recorded.

    The check is built for speed (it runs after every test): one itemgetter call fetches every recorded name, and
    identity (never ==, which a planted object could answer) is compared in C through map(operator.is_not)."""

    __slots__ = ("owner", "ns", "names", "values", "getter", "holders", "codes", "size", "keys")

    def __init__(self, owner: str, ns, every_value: bool = False, is_class: bool = False) -> None:
        self.owner, self.ns = owner, ns
        items = [(k, v) for k, v in list(ns.items())
                 if every_value or (_recordable(v) and (owner, k) not in REBOUND_BY_PYTEST)]
        self.names = [k for k, _ in items]
        self.values = tuple(v for _, v in items)
        self.getter = operator.itemgetter(*self.names) if len(self.names) > 1 else None
        holders = [h for h in map(_code_holder, self.values) if h is not None]
        self.holders, self.codes = tuple(holders), tuple(map(CODE, holders))
        self.size = len(ns) if is_class else None
        self.keys = frozenset(ns) if is_class else frozenset()

    def changed(self) -> str | None:
        ns = self.ns
        try:
            now = self.getter(ns) if self.getter is not None else tuple(ns[k] for k in self.names)
        except KeyError:
            return f"a name was removed from {self.owner}"
        if any(map(operator.is_not, now, self.values)):
            name = next(k for k, a, b in zip(self.names, now, self.values) if a is not b)  # noqa: B905 - 3.7
            return f"{self.owner}.{name} was replaced"
        if any(map(operator.is_not, map(CODE, self.holders), self.codes)):
            return f"the code of a function of {self.owner} was replaced"
        if self.size is not None and len(ns) != self.size:
            now_keys = frozenset(ns)
            if (self.keys - now_keys) or not (now_keys - self.keys) <= CACHED_BY_PYTEST:
                return f"{self.owner} gained or lost attributes: {sorted(now_keys ^ self.keys)[:5]}"
            self.size, self.keys = len(now_keys), now_keys
        return None


def _code_holder(value: object) -> object | None:
    if isinstance(value, (classmethod, staticmethod)):
        value = value.__func__
    if isinstance(value, property):
        value = value.fget
    return value if isinstance(value, types.FunctionType) else None


class _Flat:
    """The entries of many spaces side by side: three C-level passes tell whether anything changed."""

    def __init__(self, spaces: list[Space]) -> None:
        self.ns = tuple(sp.ns for sp in spaces for _ in sp.names)
        self.names = tuple(name for sp in spaces for name in sp.names)
        self.values = tuple(value for sp in spaces for value in sp.values)
        self.holders = tuple(h for sp in spaces for h in sp.holders)
        self.codes = tuple(c for sp in spaces for c in sp.codes)
        self.class_ns = tuple(sp.ns for sp in spaces if sp.size is not None)
        self.class_sizes = tuple(sp.size for sp in spaces if sp.size is not None)

    def changed(self) -> bool:
        try:
            if any(map(operator.is_not, map(operator.getitem, self.ns, self.names), self.values)):
                return True
        except KeyError:
            return True
        return (any(map(operator.is_not, map(CODE, self.holders), self.codes))
                or any(map(operator.ne, map(len, self.class_ns), self.class_sizes)))


class Guard:
    """What the package must not change, and the check that it did not. Recorded in the zygote (warm_up), then
    rebased in the test process once pytest has set itself up and before any conftest or test module loads."""

    def __init__(self) -> None:
        self.trusted_file = lambda path: False  # set per job: is code at path the snapshot's (or pytest's...)?
        self.spaces: list[Space] = []
        self.modules: dict[str, types.ModuleType] = {}
        self.meta_path: list[int] = []
        self.path_hooks: list[int] = []
        self.gc_callbacks: list[object] = []
        self.sealed: dict[str, tuple[object, object, type[pytest.Item]]] = {}
        self.callers: tuple = ()
        self.hookimpls: tuple = ()
        self.plugins: set[int] = set()
        self.pm: pluggy.PluginManager | None = None

    def record(self) -> None:
        """Every watched module not recorded yet, its classes, and the builtins."""
        for modname, module in list(sys.modules.items()):
            if modname in self.modules or not isinstance(module, types.ModuleType):
                continue
            if modname.split(".")[0] not in WATCHED:
                continue
            self.modules[modname] = module
            self.spaces.append(Space(modname, vars(module)))
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__ == modname:
                    self.spaces.append(Space(f"{modname}.{value.__qualname__}", vars(value), is_class=True))
        self.spaces = [s for s in self.spaces if s.owner != "builtins"]
        self.spaces.append(Space("builtins", vars(builtins), every_value=True))
        self.module_names = tuple(self.modules)
        self.module_objects = tuple(self.modules.values())
        self._flatten()
        self.meta_path = [id(f) for f in sys.meta_path]
        self.path_hooks = [id(h) for h in sys.path_hooks]
        self.gc_callbacks = list(gc.callbacks)

    def _flatten(self) -> None:
        """Every space's entries side by side, for the fast checks: a few C-level passes over all of them (or over
        the hot ones: the modules on every test's path, checked after each test; all are checked at the end of
        collection and of the session)."""
        self.flat = {"all": _Flat(self.spaces), "hot": _Flat([sp for sp in self.spaces
                                                              if sp.owner.startswith(HOT_MODULES)])}

    def rebase(self) -> None:
        """Take pytest's own set-up as the reference: its legacypath plugin monkeypatches a few of its classes, and
        parsing the command line imports some modules. No package code has run yet."""
        if self.flat["all"].changed():
            self.spaces = [Space(s.owner, s.ns, s.owner == "builtins", s.size is not None) if s.changed() else s
                           for s in self.spaces]
        self.record()

    def seal(self, items: list, pm) -> None:
        """End of collection: the test functions and the plugin registry as they are now."""
        self.pm = pm
        for item in items:
            func = _function_of(item)
            self.sealed[item.nodeid] = (func, _code_of(func), type(item))
        self.plugins = {id(p) for p in pm.get_plugins()}
        caller_type = type(pm.hook.pytest_runtest_call)  # pluggy.HookCaller (pluggy < 1.1: _HookCaller)
        self.callers = tuple(c for c in vars(pm.hook).values() if isinstance(c, caller_type))
        self.hookimpls = tuple(c.get_hookimpls() for c in self.callers)
        self.hookexec = (pm._inner_hookexec, pm._hookexec)

    def problem(self, hot_only: bool = False) -> str | None:
        """The first change found, or None."""
        if self.flat["hot" if hot_only else "all"].changed():
            for space in self.spaces:
                found = space.changed()
                if found:
                    return found
            self._flatten()  # only caches pytest itself added to its classes (Space.changed accepted them)
        if any(map(operator.is_not, map(sys.modules.get, self.module_names), self.module_objects)):
            return "a module of pytest, pluggy or unittest was replaced in sys.modules"
        for finder in sys.meta_path:  # the repository's own import hooks are fine (toolz's tlz installs one)
            if id(finder) not in self.meta_path and not self.trusted_code(finder):
                return f"an import hook was installed by the change ({type(finder).__name__})"
        for hook in sys.path_hooks:
            if id(hook) not in self.path_hooks and not self.trusted_code(hook):
                return "a path hook was installed by the change"
        if sys.gettrace() is not None or sys.getprofile() is not None:
            return "a trace or profile function was installed"
        if getattr(threading, "_trace_hook", None) is not None or getattr(threading, "_profile_hook", None):
            return "a thread trace or profile hook was installed"
        if gc.callbacks != self.gc_callbacks:
            return "gc.callbacks was changed"
        if self.pm is not None:
            pm = self.pm
            if {id(p) for p in pm.get_plugins()} != self.plugins:
                return "a pytest plugin was registered or removed after collection"
            if (any(map(operator.ne, map(GET_IMPLS, self.callers), self.hookimpls))
                    or (pm._inner_hookexec, pm._hookexec) != self.hookexec):
                return "pytest's hook implementations were changed"
        return None

    def trusted_code(self, obj: object) -> bool:
        """Defined in a file the change did not touch (the snapshot, pytest, the stdlib, the wheels)."""
        owner = obj if isinstance(obj, (types.ModuleType, type)) else type(obj)
        module = owner if isinstance(owner, types.ModuleType) else sys.modules.get(owner.__module__)
        path = getattr(module, "__file__", None)
        return bool(path) and self.trusted_file(path)

    def item_problem(self, item, with_function: bool = True) -> str | None:
        """with_function=False after teardown, when unittest items have dropped their test method."""
        sealed = self.sealed.get(item.nodeid)
        if sealed is None:
            return None
        if type(item) is not sealed[2] or "runtest" in vars(item):
            return f"the test item {item.nodeid} was replaced"
        if with_function:
            func = _function_of(item)
            if func is not sealed[0] or _code_of(func) is not sealed[1]:
                return f"the test function of {item.nodeid} was replaced"
        return None


# ------------------------------------------------------------------------------------------------ the channel


class Frames:
    """Frames to the runner, batched: every write wakes the runner, which shares the sandbox's CPU with this
    process, so cases go out every FLUSH_S from a flusher thread (verdicts of finished tests reach the runner even
    while the next test hangs), everything else at once."""

    def __init__(self, fd: int, token: str) -> None:
        self.fd, self.token, self.seq = fd, token, 0
        self.pending: list[bytes] = []
        self.lock = threading.Lock()
        fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)  # subprocesses of the tests never hold it
        threading.Thread(target=self._flusher, name="rewardbox-frames", daemon=True).start()

    def send(self, event: str, **fields: object) -> None:
        with self.lock:
            self.seq += 1
            self.pending.append(wire.encode({"t": self.token, "n": self.seq, "event": event, **fields}))
        if event != "case":
            self.flush()

    def flush(self) -> None:
        with self.lock:
            data, self.pending = b"".join(self.pending), []
            view = memoryview(data)
            while view:
                view = view[os.write(self.fd, view):]

    def _flusher(self) -> None:
        while True:
            time.sleep(FLUSH_S)
            if self.pending:
                self.flush()


class LazyStream:
    """sys.stdout for pytest's terminal output: written out when 64 KiB are buffered or at the end, not at every
    per-test flush (each write to the captured pipe wakes the runner)."""

    def __init__(self, fd: int) -> None:
        self.raw = open(fd, "w", buffering=1 << 16, closefd=False, errors="backslashreplace")  # noqa: SIM115

    def write(self, text: str) -> int:
        return self.raw.write(text)

    def flush(self) -> None:
        pass

    def really_flush(self) -> None:
        self.raw.flush()

    def __getattr__(self, name: str) -> object:
        return getattr(self.raw, name)


# ------------------------------------------------------------------------------------------------ the plugin


class TrustedReporter:
    """Registered before pytest parses anything; see the module docstring for what it proves."""

    def __init__(self, frames: Frames, guard: Guard, wanted: list[str], root: str,
                 provenance: repo_provenance.Provenance) -> None:
        self.frames, self.guard = frames, guard
        self.wanted = set(wanted)
        self.root, self.provenance = root, provenance
        self.test_files = [os.path.join(root, f) for f in dict.fromkeys(n.split("::", 1)[0] for n in wanted)]
        self.collect_errors: list[dict] = []
        self.evidence: set[str] = set()
        self.bad: dict[str, str] = {}  # nodeid -> why it cannot pass
        self.called: set[str] = set()
        self.started: dict[str, float] = {}
        self.reported = 0
        self.broken: str | None = None
        self.items: dict[str, object] = {}
        self.checked = 0.0
        self.created = time.perf_counter()

    def _integrity(self, where: str, hot_only: bool = False) -> None:
        if self.broken is None:
            problem = self.guard.problem(hot_only)
            if problem:
                self.broken = f"{problem} ({where})"
                self.frames.send("integrity", problem=self.broken)

    # -- set-up and collection

    def pytest_load_initial_conftests(self, early_config, parser, args) -> None:
        # Neither tryfirst nor trylast: after pytest's own tryfirst set-up, before its trylast conftest loader, so
        # before any package code: the listed test files are compiled here, and pytest's importer takes our code
        # for them (the guard, rebased after, keeps it so).
        rewritten = getattr(early_config.known_args_namespace, "assertmode", "plain") == "rewrite"  # as pytest
        self.provenance.prepare(self.test_files, early_config, rewritten)
        _pytest.assertion.rewrite._rewrite_test = self._rewrite_test
        _pytest.assertion.rewrite._read_pyc = self._read_pyc
        self.guard.rebase()

    def _rewrite_test(self, fn, config):
        """pytest's, except that pytest's own importer (no one else) gets our code of a listed test file, once."""
        path = str(fn)
        if GETFRAME(1).f_code is not HOOK_EXEC_CODE:
            return REWRITE_TEST(fn, config)
        code = self.provenance.rewritten_code(path)
        if code is None:
            return REWRITE_TEST(fn, config)
        source = self.provenance.files[path].source
        # pytest >= 8 keys its pyc cache by the source's hash, older ones by its stat (-B: never written here)
        return (importlib.util.source_hash(source) if PYC_BY_HASH else os.stat(path)), code

    def _read_pyc(self, source, pyc, trace=lambda x: None):
        """pytest's, except that a listed test file is never read from a cached pyc (our code is the evidence)."""
        return None if self.provenance.listed(str(source)) else READ_PYC(source, pyc, trace)

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors.append({"nodeid": report.nodeid, "message": _text(report)})

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items) -> None:
        keep = [item for item in items if item.nodeid in self.wanted]
        dropped = [item for item in items if item.nodeid not in self.wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session) -> None:
        untrusted = self._untrusted_plugins(session.config.pluginmanager)
        self.items = {item.nodeid: item for item in session.items}
        self.guard.seal(session.items, session.config.pluginmanager)
        self.frames.send("collected", items=list(self.items), errors=self.collect_errors[:200])
        if untrusted:
            self.broken = f"a pytest plugin outside pytest, the repository and its wheels: {untrusted}"
            self.frames.send("integrity", problem=self.broken)
        self._integrity("end of collection")
        if self.broken is None:
            try:
                problem = self._provenance_problem(session.items)
            except Exception as e:  # noqa: BLE001 - objects the package built that cannot even be inspected
                problem = f"the collected tests cannot be checked against the trusted files ({type(e).__name__})"
            if problem:
                self.broken = problem
                self.frames.send("integrity", problem=problem)

    def _provenance_problem(self, items: list) -> str | None:
        """Each collected test function, and its module, is the code compiled from the trusted test file's bytes,
        whatever the package did to the import system (sys.modules, finders, loaders, __path__, __code__)."""
        checked: set[tuple[int, str]] = set()
        for item in items:
            if not isinstance(item, pytest.Function):
                continue  # doctests and custom item kinds: the weaker evidence the README names
            path = os.path.join(self.root, item.nodeid.split("::", 1)[0])
            sealed = self.guard.sealed.get(item.nodeid, (None,))[0]
            try:
                module = item.module
            except Exception as e:  # noqa: BLE001 - a module that cannot be found is not the trusted one
                return f"the module of {item.nodeid} cannot be found ({type(e).__name__})"
            key = (id(module), path)
            problem = None
            if key not in checked:
                checked.add(key)
                problem = self.provenance.module_problem(module, path)
            problem = problem or self.provenance.function_problem(sealed) or self._name_problem(item, sealed, path)
            if problem:
                return f"the test {item.nodeid} is not the trusted test file's code: {problem}"
        return None

    def _name_problem(self, item, func, path: str) -> str | None:
        """A test the trusted file defines with a plain `def` runs that very function, not another of the file's."""
        compiled = self.provenance.compiled(path)
        cls = getattr(item, "cls", None)
        name = item.originalname or item.name  # pytest < 6 sets originalname for parametrized tests only
        qualname = f"{cls.__qualname__}.{name}" if cls is not None else name
        func = getattr(func, "__func__", func)
        if compiled is not None and qualname in compiled.defined:
            runs = compiled.qualname(func.__code__)
            if runs != qualname:
                return f"{item.nodeid} runs {runs or 'code of another file'}, not {qualname}"
        return None

    def _untrusted_plugins(self, pm) -> str | None:
        for plugin in pm.get_plugins():
            if plugin is not self and not self.guard.trusted_code(plugin):
                return repr(plugin)[:200]
        return None

    # -- running

    def pytest_runtest_logstart(self, nodeid, location) -> None:
        self.started[nodeid] = time.perf_counter()

    @pytest.hookimpl(tryfirst=True)
    def pytest_pyfunc_call(self, pyfuncitem) -> object | None:
        """Call the sealed test function ourselves: its normal return is the evidence of a pass."""
        sealed = self.guard.sealed.get(pyfuncitem.nodeid, (None,))[0]
        if sealed is None or isinstance(pyfuncitem, _pytest.unittest.TestCaseFunction):
            return None
        if inspect.iscoroutinefunction(sealed) or inspect.isasyncgenfunction(sealed):
            return None  # async plugins run these; the evidence is then the runtest call returning
        testfunction = pyfuncitem.obj  # a method bound to the test's instance, or the function itself
        if getattr(testfunction, "__func__", testfunction) is not sealed:
            pytest.fail(f"harness tampering: the test function of {pyfuncitem.nodeid} was replaced", pytrace=False)
        funcargs = pyfuncitem.funcargs
        result = testfunction(**{arg: funcargs[arg] for arg in pyfuncitem._fixtureinfo.argnames})
        if hasattr(result, "__await__") or hasattr(result, "__aiter__"):
            pytest.fail(f"{pyfuncitem.nodeid}: an awaitable returned by a sync test function", pytrace=False)
        self.evidence.add(pyfuncitem.nodeid)
        return True

    def _around_call(self, item, new_style: bool):
        """Around the test's call: the item unchanged, unittest's success recorded, and for item kinds whose
        evidence is the call returning, that it returned. new_style: pluggy >= 1.1 raises the call's exception at
        the yield and takes our return value; older pluggy sends an outcome (excinfo set when the call raised)."""
        problem = self.guard.item_problem(item)
        if problem:
            self.bad.setdefault(item.nodeid, f"harness tampering: {problem}")
        if isinstance(item, _pytest.unittest.TestCaseFunction):
            # pytest's own method, replaced on this one item on purpose: unittest's success is our evidence
            item.addSuccess = lambda testcase, nodeid=item.nodeid: self.evidence.add(nodeid)  # type: ignore[method-assign,misc]
        try:
            result = yield
        finally:
            if isinstance(item, _pytest.unittest.TestCaseFunction):
                item.__dict__.pop("addSuccess", None)
        returned = new_style or result.excinfo is None
        if returned and (not isinstance(item, pytest.Function) or self._runs_async(item)):
            self.evidence.add(item.nodeid)  # doctests, custom items, async tests: the call returned
        return result if new_style else None

    if NEW_STYLE_WRAPPERS:
        @pytest.hookimpl(wrapper=True, tryfirst=True)
        def pytest_runtest_call(self, item):
            return (yield from self._around_call(item, True))
    else:
        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_call(self, item):
            yield from self._around_call(item, False)

    def _runs_async(self, item) -> bool:
        sealed = self.guard.sealed.get(item.nodeid, (None,))[0]
        return inspect.iscoroutinefunction(sealed) or inspect.isasyncgenfunction(sealed)

    def pytest_runtest_logreport(self, report) -> None:
        nodeid = report.nodeid
        if report.failed or report.skipped:
            self.bad.setdefault(nodeid, f"{report.when}: {report.outcome}: {_text(report)}")
        if report.when == "call" and not hasattr(report, "context"):  # the test's own call, not a subtest
            self.called.add(nodeid)
        if report.when == "teardown":
            self._verdict(nodeid)

    def _provenance_kept(self, where: str) -> None:
        if self.broken is None and self.provenance.changed():
            self.broken = f"a function of a test file was replaced after collection ({where})"
            self.frames.send("integrity", problem=self.broken)

    def _verdict(self, nodeid: str) -> None:
        item = self.items.get(nodeid)
        self._provenance_kept(f"after {nodeid}")
        now = time.perf_counter()
        if now - self.checked >= CHECK_EVERY_S:  # a check costs ~0.1 ms: at most every 5 ms of tests
            self.checked = now
            self._integrity(f"after {nodeid}", hot_only=True)
        problem = self.broken or (self.guard.item_problem(item, with_function=False) if item is not None
                                  else "not collected")
        passed = not problem and nodeid in self.evidence and nodeid in self.called and nodeid not in self.bad
        if passed:
            status, message = "passed", ""
        elif problem:
            status, message = "failed", f"harness tampering: {problem}"
        elif nodeid in self.bad:
            why = self.bad[nodeid]
            status = "skipped" if ": skipped:" in why.split("\n", 1)[0] else "failed"
            message = why
        else:
            status, message = "failed", "the test never ran to completion"
        ms = (time.perf_counter() - self.started.get(nodeid, time.perf_counter())) * 1000
        self.reported += 1
        self.frames.send("case", name=nodeid, passed=passed, status=status, message=message[-MESSAGE_CAP:],
                         ms=round(ms, 3))

    def pytest_sessionstart(self, session) -> None:
        self.session_started = time.perf_counter()

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self._integrity("end of session")
        self._provenance_kept("end of session")
        now = time.perf_counter()
        started = getattr(self, "session_started", now)
        timings = {"pytest_startup_ms": round((started - self.created) * 1000, 3),
                   "session_ms": round((now - started) * 1000, 3)}  # this process's clock: information only
        self.frames.send("finish", reported=self.reported, exitstatus=int(exitstatus), broken=self.broken,
                         timings=timings)
        self.frames.flush()


def _text(report) -> str:
    try:
        text = report.longreprtext
    except Exception:  # noqa: BLE001 - a report we cannot render still fails its test
        text = ""
    return (text or "")[-MESSAGE_CAP:]


# ------------------------------------------------------------------------------------------------ entry point


def _read_config() -> dict:
    chunks = []
    while True:
        chunk = os.read(0, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # nothing of the config stays readable on stdin
    os.close(devnull)
    return json.loads(b"".join(chunks))


def _config_file(root: str) -> str | None:
    """The configuration file pytest finds for a run at root, if it is in root itself (None: pytest's defaults)."""
    findpaths = _pytest.config.findpaths
    if hasattr(findpaths, "locate_config"):
        takes_dir = len(inspect.signature(findpaths.locate_config).parameters) >= 2  # pytest >= 8
        found = (findpaths.locate_config(Path(root), [Path(root)]) if takes_dir
                 else findpaths.locate_config([Path(root)]))  # type: ignore[call-arg,arg-type]
        inipath = found[1]
    else:  # pytest < 6.1
        inipath = findpaths.getcfg([root])[1]  # type: ignore[attr-defined]
    return str(inipath) if inipath is not None and os.path.dirname(str(inipath)) == root else None


def main() -> None:
    """Run the listed tests under pytest with the TrustedReporter; exit without waiting for package threads."""
    cfg = _read_config()
    frames = Frames(REPORT_FD, cfg.pop("token"))
    root = cfg["root"]
    untrusted = {os.path.join(root, rel) for rel in cfg.get("changed", [])}

    def trusted_file(path: str) -> bool:
        real = os.path.abspath(path)
        return real not in untrusted and os.path.isfile(real)

    guard = GUARD if GUARD is not None else Guard()
    if GUARD is None:  # not started from a warm zygote (a debugging run): record now, still before any test code
        guard.record()
    guard.trusted_file = trusted_file
    sys.path[:0] = [p for p in cfg["sys_path"] if p not in sys.path]
    config_file = _config_file(root) or os.devnull
    reporter = TrustedReporter(frames, guard, cfg["tests"], root, repo_provenance.Provenance(trusted_file))
    frames.send("start", pytest=pytest.__version__, config=os.path.relpath(config_file, root)
                if config_file != os.devnull else None)
    stdout = sys.stdout = LazyStream(1)
    try:
        code = pytest.main(["-c", config_file, *cfg["args"]], plugins=[reporter])
    except BaseException as e:  # noqa: BLE001 - whatever happened, the runner learns it from the frames
        frames.send("crashed", error=f"{type(e).__name__}: {e}"[:MESSAGE_CAP])
        code = 3
    frames.flush()
    stdout.really_flush()
    sys.stderr.flush()
    os._exit(int(code) if isinstance(code, int) else 1)
