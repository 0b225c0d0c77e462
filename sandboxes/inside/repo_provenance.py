"""Provenance of the test code a repo job runs (stdlib + pytest). Imported by repo_reporter in the zygote.

pytest finds a test module through the import system (sys.modules, finders, loaders), which the repository's
package can change before collection: a fake module under the test module's name, a finder or loader of its own, a
package `__path__` pointing elsewhere, a test function's `__code__` swapped after import. So what pytest collected
is not evidence of what the trusted test file says. This module compiles the trusted bytes itself, with references
to `compile`, the file reads and pytest's assertion rewriter taken when it is imported (in the zygote, before any
job exists), and proves every collected test function, the functions it wraps and the functions the trusted file
defines in its module, to be code objects of that compilation, compared field by field over exact builtin values
(never `==` on anything the package could have built), with the real builtins.
"""

from __future__ import annotations

import ast
import builtins
import operator
import os
import sys
import types
from collections.abc import Callable
from typing import Any

import _pytest.assertion.rewrite
import _pytest.compat
import _pytest.fixtures

# Taken at import, before any package code: the package may rebind all of these later.
_compile = builtins.compile
_type = type
_id = id
_repr = repr
_len = len
_isinstance = isinstance
_sorted = sorted
_open, _read, _close, _realpath = os.open, os.read, os.close, os.path.realpath
_rewrite = _pytest.assertion.rewrite.rewrite_asserts
_ast_walk, _ast_parse_flag = ast.walk, ast.PyCF_ONLY_AST
_CodeType, _FunctionType, _MethodType = types.CodeType, types.FunctionType, types.MethodType
_Fixture = getattr(_pytest.fixtures, "FixtureFunctionDefinition", None)  # what @pytest.fixture makes (pytest >= 8.4)
# Before, @pytest.fixture returns a function of pytest's (`result`, made by wrap_function_to_error_out_if_called_
# directly) holding the fixture's function in a _PytestWrapper: that code object and class, taken now.
_wrap_fixture = getattr(_pytest.fixtures, "wrap_function_to_error_out_if_called_directly", None)
_FIXTURE_WRAPPER_CODE = next((c for c in getattr(getattr(_wrap_fixture, "__code__", None), "co_consts", ())
                              if type(c) is types.CodeType and c.co_name == "result"), None)
_PytestWrapper = getattr(_pytest.compat, "_PytestWrapper", None)
_BUILTINS = vars(builtins)
_is_not, _getitem, _code = operator.is_not, operator.getitem, operator.attrgetter("__code__")
_CLASSDEF, _FUNCDEFS = ast.ClassDef, (ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTION_BUILTINS = hasattr(types.FunctionType, "__builtins__")  # Python >= 3.10
_STR_NODES = (ast.Constant,) if sys.version_info >= (3, 8) else (ast.Constant, ast.Str)
_SIMPLE = {_id(t): t.__name__ for t in (str, bytes, int, bool, type(None), type(...))}
_BY_REPR = {_id(float): "float", _id(complex): "complex"}
READ_CAP = 16 << 20
# The fields of a code object that say what it executes, as far as this interpreter has them: the reporter runs in
# the task's own interpreter (an image's Python 3.7+), and co_posonlyargcount (3.8), co_linetable (3.10, before it
# co_lnotab), co_qualname and co_exceptiontable (3.11) are newer. Before 3.11 a code object has no qualname: ours
# are derived while compiling (Compiled.qualname), the way the compiler forms a function's __qualname__.
_CODE_FIELDS = tuple(f for f in ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_argcount",
                                 "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_stacksize", "co_nlocals",
                                 "co_name", "co_qualname", "co_firstlineno",
                                 "co_linetable" if hasattr(types.CodeType, "co_linetable") else "co_lnotab",
                                 "co_exceptiontable") if hasattr(types.CodeType, f))
_code_fields = operator.attrgetter(*_CODE_FIELDS)
_HAS_QUALNAME = "co_qualname" in _CODE_FIELDS
_CO_OPTIMIZED = 0x0001  # a function's (or lambda's, comprehension's) code; a class body's and a module's lack it
WRAP_DEPTH = 8


def fingerprint(code: object) -> tuple | None:
    """Everything a code object executes, as a tuple of exact builtin values (None: not a plain code object, or a
    constant the compiler never makes). The file name is left out: the caller finds the trusted file by it."""
    if _type(code) is not _CodeType:
        return None
    consts = []
    for c in code.co_consts:
        f = fingerprint(c) if _type(c) is _CodeType else _const(c)
        if f is None:
            return None
        consts.append(f)
    return (tuple(consts), *_code_fields(code))


def _const(c: object) -> tuple | None:
    t = _id(_type(c))
    if t in _SIMPLE:
        return (_SIMPLE[t], c)
    if t in _BY_REPR:
        return (_BY_REPR[t], _repr(c))
    if _type(c) is tuple or _type(c) is frozenset:
        items = [_const(x) for x in c]
        if any(x is None for x in items):
            return None
        return ("tuple", tuple(items)) if _type(c) is tuple else ("frozenset", tuple(_sorted(map(_repr, items))))
    return None


class Compiled:
    """One trusted file and its code: compiled the way pytest imports it (assertions rewritten, or plain), the
    other way on demand; every code object by (qualname, first line), and its qualname; the functions its module
    and its top-level classes bind with a plain `def`. The rewritten module code is handed to pytest's importer
    (rewritten_code), so an honest import runs these very code objects and pays no second compilation."""

    def __init__(self, path: str, source: bytes, config: object | None, rewritten: bool) -> None:
        self.path, self.source, self.config = path, source, config
        self.index: dict[tuple[str, int], list[types.CodeType]] = {}
        self.fingerprints: dict[tuple[str, int], dict[tuple, types.CodeType]] = {}
        self.qualnames: dict[int, str] = {}  # id of each of our code objects (kept alive by index) -> its qualname
        self.built: dict[bool, types.CodeType | None] = {}
        self.handed_out = False  # our rewritten code went to pytest's importer (once, and only to it)
        self.strict = False  # a listed test file pytest rewrites: only our very code objects are its code
        tree = _compile(source, path, "exec", _ast_parse_flag, dont_inherit=True)
        self.defined = _plain_defs(tree, source)
        self.tree: ast.Module | None = tree
        self.build(rewritten)

    def build(self, rewritten: bool) -> types.CodeType | None:
        if rewritten not in self.built:
            code = None
            if not rewritten:
                code = _compile(self.source, self.path, "exec", dont_inherit=True)
            elif self.config is not None:
                tree = self.tree if self.tree is not None else _compile(self.source, self.path, "exec",
                                                                        _ast_parse_flag, dont_inherit=True)
                self.tree = None  # rewrite_asserts changes it in place
                try:
                    _rewrite(tree, self.source, self.path, self.config)  # type: ignore[arg-type]
                    code = _compile(tree, self.path, "exec", dont_inherit=True)
                except Exception:  # noqa: BLE001 - pytest could not import it either; the plain compile stands
                    code = None
            self.built[rewritten] = code
            stack = [(code, "")] if code is not None else []  # (code, its qualname's prefix)
            while stack:
                c, prefix = stack.pop()
                qualname = c.co_qualname if _HAS_QUALNAME else prefix + c.co_name
                self.qualnames[_id(c)] = qualname
                self.index.setdefault(_key(c), []).append(c)
                inner = ("" if c is code else qualname + (".<locals>." if c.co_flags & _CO_OPTIMIZED else "."))
                stack.extend((x, inner) for x in c.co_consts if _type(x) is _CodeType)
            self.fingerprints.clear()
        return self.built[rewritten]

    def has(self, code: types.CodeType) -> bool:
        """code is one of ours (pytest imported the file through us), or equal to one field by field."""
        return self.match(code) is not None

    def match(self, code: types.CodeType) -> types.CodeType | None:
        """Our code object that code is (or, unless strict, equals field by field); None: not this file's code."""
        key = _key(code)
        for c in self.index.get(key, ()):
            if c is code:
                return c
        if self.strict:  # pytest's importer runs our code: another compilation of the file is not its module
            return None
        fp = fingerprint(code)
        if fp is None:
            return None
        for rewritten in (False, True):
            self.build(rewritten)
            if key not in self.fingerprints:
                self.fingerprints[key] = {f: c for c in self.index.get(key, ())
                                          for f in (fingerprint(c),) if f is not None}
            found = self.fingerprints[key].get(fp)
            if found is not None:
                return found
        return None

    def qualname(self, code: types.CodeType) -> str | None:
        """The qualified name the compiler gave code (one of ours, or equal to one), or None."""
        found = self.match(code)
        return None if found is None else self.qualnames.get(_id(found))


def _key(code: types.CodeType) -> tuple[str, int]:
    return (code.co_qualname if _HAS_QUALNAME else code.co_name, code.co_firstlineno)


def _qualname_or_name(code: types.CodeType) -> str:
    """For messages only."""
    return code.co_qualname if _HAS_QUALNAME else code.co_name


def _plain_defs(tree: ast.Module, source: bytes) -> dict[str, list[str]]:
    """qualname -> [] for each function the module (or a class at its top level) binds with a `def` whose
    decorators are pytest's own (marks, fixtures) or none, and that no other statement rebinds (in its scope, by a
    `global` in a function, or as `Class.name = ...` / `setattr(Class, "name", ...)` at the module's level)."""
    out: dict[str, list[str]] = {}
    whole = b"global" in source  # a function may rebind a module name: look inside every function then

    def scope(body: list, prefix: str) -> None:
        counts: dict[str, int] = {}
        stack: list[ast.AST] = list(body)
        while stack:
            node = stack.pop()
            for name in _bound_names(node):
                counts[name] = counts.get(name, 0) + 1
            if not prefix:
                for name in _attribute_bound(node):
                    counts[name] = counts.get(name, 0) + 1
            if whole and not prefix or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                       ast.Lambda)):
                stack.extend(ast.iter_child_nodes(node))
        for node in body:
            if _isinstance(node, _FUNCDEFS) and counts.get(node.name) == 1 and all(map(_pytest_decorator,
                                                                                        node.decorator_list)):
                out[prefix + node.name] = []
            elif (_isinstance(node, _CLASSDEF) and not prefix and counts.get(node.name) == 1
                  and all(map(_pytest_decorator, node.decorator_list))):
                scope(node.body, node.name + ".")
        if not prefix:
            for name in counts:
                if "." in name:  # Class.name rebound at the module's level
                    out.pop(name, None)

    scope(tree.body, "")
    return out


def _attribute_bound(node: ast.AST) -> list[str]:
    """`C.name = ...` / `del C.name` / `setattr(C, "name", ...)`: the qualname C.name."""
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)) and isinstance(node.value,
                                                                                                      ast.Name):
        return [f"{node.value.id}.{node.attr}"]
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
            and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and _str_value(node.args[1]) is not None):
        return [f"{node.args[0].id}.{_str_value(node.args[1])}"]
    return []


def _str_value(node: ast.AST) -> str | None:
    """A string literal's value (Python 3.7's parser makes ast.Str nodes, later ones ast.Constant)."""
    value = getattr(node, "value", None) if isinstance(node, ast.Constant) else getattr(node, "s", None)
    return value if isinstance(value, str) and isinstance(node, _STR_NODES) else None


def _bound_names(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).split(".")[0]]
    return []


def _pytest_decorator(node: ast.expr) -> bool:
    while isinstance(node, (ast.Call, ast.Attribute)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and node.id == "pytest"


class Provenance:
    """The trusted files of one job, compiled on first use; the listed test files before any package code runs."""

    def __init__(self, trusted_file: Callable[[str], bool]) -> None:
        self.trusted_file = trusted_file
        self.config: object | None = None
        self.rewritten = False
        self.files: dict[str, Compiled | None] = {}
        # What module_problem proved, for changed(): the bindings (namespace, name, value) and functions' code.
        self.spaces: list[Any] = []
        self.names: list[str] = []
        self.values: list[object] = []
        self.functions: list[types.FunctionType] = []
        self.codes: list[types.CodeType] = []

    def changed(self) -> bool:
        """Whether a binding or a function's code proved at collection has changed since (C-level passes: this
        runs after every test)."""
        try:
            if any(map(_is_not, map(_getitem, self.spaces, self.names), self.values)):
                return True
        except KeyError:
            return True
        return any(map(_is_not, map(_code, self.functions), self.codes))

    def prepare(self, paths: list[str], config: object, rewritten: bool) -> None:
        """Before any package code: the listed test files, compiled the way pytest will import them."""
        self.config, self.rewritten = config, rewritten
        for path in paths:
            compiled = self.compiled(path)
            if compiled is not None and rewritten and compiled.built.get(True) is not None:
                compiled.strict = True

    def compiled(self, path: str) -> Compiled | None:
        if _type(path) is str and path in self.files:  # the name we compiled under (co_filename, mostly)
            return self.files[path]
        real = _realpath(path)
        if real not in self.files:
            source = _read_file(real) if self.trusted_file(real) else None
            try:
                self.files[real] = None if source is None else Compiled(real, source, self.config, self.rewritten)
            except (SyntaxError, ValueError):
                self.files[real] = None
        return self.files[real]

    def rewritten_code(self, path: str) -> types.CodeType | None:
        """For pytest's importer, once: our rewritten code of a listed test file (None: not one, or asked before;
        pytest compiles it then, and that module's functions will not be ours)."""
        compiled = self.files.get(path) if _type(path) is str else None
        if compiled is None or compiled.handed_out or compiled.built.get(True) is None:
            return None
        compiled.handed_out = True
        return compiled.built[True]

    def listed(self, path: str) -> bool:
        return _type(path) is str and self.files.get(path) is not None

    def function_problem(self, func: object, depth: int = 0) -> str | None:
        """Why func is not code compiled from a trusted file (with the real builtins), or None. Wrappers' wrapped
        functions (their closures' functions and __wrapped__) are held to the same rule."""
        if _type(func) is _MethodType:
            func = func.__func__
        if _type(func) is not _FunctionType:
            return f"{_type(func).__name__} object, not a function"
        code = func.__code__
        where = f"{_qualname_or_name(code)} ({code.co_filename}:{code.co_firstlineno})"
        compiled = self.compiled(code.co_filename) if _type(code.co_filename) is str else None
        if compiled is None:
            return f"{where} is not code of a file the change left alone"
        if not compiled.has(code):
            return f"{where} is not the code compiled from that file"
        if not self._real_builtins(func):
            return f"{where} runs with builtins of its own"
        if depth < WRAP_DEPTH:
            inner = [cell.cell_contents for cell in func.__closure__ or () if _cell_function(cell)]
            wrapped = vars(func).get("__wrapped__")
            if _type(wrapped) is _FunctionType or _type(wrapped) is _MethodType:
                inner.append(wrapped)
            for f in inner:
                problem = self.function_problem(f, depth + 1)
                if problem:
                    return problem
        return None

    def _real_builtins(self, func: types.FunctionType) -> bool:
        """func runs with the real builtins. Python >= 3.10 fixes a function's builtins when it is made; before,
        each call takes its module's `__builtins__`, so that binding is proved now and watched (changed())."""
        if _FUNCTION_BUILTINS:
            return func.__builtins__ is _BUILTINS  # type: ignore[attr-defined,unused-ignore]
        space = func.__globals__
        value = space.get("__builtins__")
        if value is not _BUILTINS and value is not builtins:
            return False
        self.spaces.append(space)
        self.names.append("__builtins__")
        self.values.append(value)
        return True

    def module_problem(self, module: object, path: str) -> str | None:
        """Every function the trusted file at path binds with a plain (or pytest-decorated) `def`, in its module
        and its top-level classes, is the code compiled from that file, in that module's namespace."""
        compiled = self.compiled(path)
        if compiled is None:
            return f"the test file {path} could not be compiled"
        namespace: Any = getattr(module, "__dict__", None)
        if _type(namespace) is not dict:
            return f"the module of {path} has no namespace"
        for qualname in compiled.defined:
            owner, _, name = qualname.rpartition(".")
            space: Any = namespace
            if owner:
                cls = namespace.get(owner)
                space = vars(cls) if _isinstance(cls, type) else {}
            value: Any = _unwrap(space.get(name))
            if _type(value) is not _FunctionType:
                return f"{qualname} of {path} is not the function the file defines"
            code = value.__code__
            if not _same_file(code.co_filename, compiled.path) or compiled.qualname(code) != qualname:
                return f"{qualname} of {path} is not the code compiled from that file"
            if value.__globals__ is not namespace:
                return f"{qualname} of {path} does not belong to the module pytest collected"
            if not self._real_builtins(value):
                return f"{qualname} of {path} runs with builtins of its own"
            self.spaces.append(space)
            self.names.append(name)
            self.values.append(space[name])
            self.functions.append(value)
            self.codes.append(code)
        return None


def _same_file(name: object, path: str) -> bool:
    return _type(name) is str and (name == path or _realpath(name) == path)


def _unwrap(value: object) -> object:
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if _Fixture is not None and _type(value) is _Fixture:
        value = getattr(value, "_fixture_function", None)
    elif (_FIXTURE_WRAPPER_CODE is not None and _type(value) is _FunctionType
          and value.__code__ is _FIXTURE_WRAPPER_CODE):
        wrapped: Any = vars(value).get("__pytest_wrapped__")
        value = wrapped.obj if _PytestWrapper is not None and _type(wrapped) is _PytestWrapper else None
    return value


def _cell_function(cell: object) -> bool:
    try:
        return _type(cell.cell_contents) is _FunctionType  # type: ignore[attr-defined]
    except ValueError:  # an empty cell
        return False


def _read_file(path: str) -> bytes | None:
    try:
        fd = _open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        chunks, total = [], 0
        while True:
            chunk = _read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            total += _len(chunk)
            if total > READ_CAP:
                return None
        return b"".join(chunks)
    finally:
        _close(fd)
