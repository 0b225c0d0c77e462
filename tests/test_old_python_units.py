"""The code rewardbox loads into a task's OWN interpreter (an image's Python 3.7+, pytest 5+: repo_reporter and
what it imports) holds to that floor, and its per-interpreter logic agrees with the interpreter we run: the
qualnames derived for Python < 3.11 are the compiler's, the builtins rule for Python < 3.10 catches what
__builtins__ catches, and the pytest configuration file is found as pytest finds it. The whole reporter runs in a
Python 3.9 / pytest 5.4.3 image in tests/test_old_python_image.py."""

from __future__ import annotations

import ast
import builtins
import sys
import textwrap
import types
from pathlib import Path

import pytest

from sandboxes.backends.base import RUNNER_DIR

sys.path.insert(0, str(RUNNER_DIR))  # the in-sandbox modules import each other by plain name
import repo_provenance  # noqa: E402
import repo_reporter  # noqa: E402

sys.path.remove(str(RUNNER_DIR))

FLOOR = (3, 7)
# Runtime features newer than the floor that feature_version does not reject: attributes of 3.8+ objects.
NEWER_ATTRIBUTES = {"co_qualname", "co_linetable", "co_exceptiontable", "co_posonlyargcount", "removeprefix",
                    "removesuffix", "send_fds", "recv_fds", "stdlib_module_names", "bit_count"}


def loaded_in_the_task_interpreter() -> list[Path]:
    """repo_reporter and every module of ours it imports, transitively."""
    ours = {p.stem for p in RUNNER_DIR.glob("*.py")}
    seen, todo = set(), ["repo_reporter"]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse((RUNNER_DIR / f"{name}.py").read_text())):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name in ours]
            elif isinstance(node, ast.ImportFrom) and node.module in ours and not node.level:
                todo.append(node.module)
    return sorted(RUNNER_DIR / f"{n}.py" for n in seen)


def floor_problems(source: str) -> list[str]:
    """What in source needs a Python newer than FLOOR at run time (annotations are never evaluated: the modules
    import annotations from __future__)."""
    tree = ast.parse(source, feature_version=FLOOR)  # walrus, positional-only, match, except* ...
    skip = {id(n) for node in ast.walk(tree) for n in _annotation_nodes(node) + _guarded_nodes(node)}
    problems = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr) and _is_type_union(node):
            problems.append(f"line {node.lineno}: X | Y of types (3.10)")
        if isinstance(node, ast.keyword) and node.arg == "strict":
            problems.append(f"line {node.lineno}: zip(strict=) (3.10)")
        if isinstance(node, ast.Attribute) and node.attr in NEWER_ATTRIBUTES:
            problems.append(f"line {node.lineno}: .{node.attr}")
    return problems


# Flags the modules set from what the interpreter has: what runs only when one is true may use that feature.
FEATURE_FLAGS = {"_HAS_QUALNAME", "_FUNCTION_BUILTINS"}


def _guarded_nodes(node: ast.AST) -> list[ast.AST]:
    """The nodes of `A if FLAG else B` / `if FLAG: ...` that run only when FLAG is true."""
    if isinstance(node, (ast.IfExp, ast.If)) and isinstance(node.test, ast.Name) and node.test.id in FEATURE_FLAGS:
        body = node.body if isinstance(node.body, list) else [node.body]
        return [n for part in body for n in ast.walk(part)]
    return []


def _annotation_nodes(node: ast.AST) -> list[ast.AST]:
    roots: list[ast.AST] = []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        roots += [a.annotation for a in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs,
                                         node.args.vararg, node.args.kwarg] if a is not None and a.annotation]
        roots += [node.returns] if node.returns else []
    elif isinstance(node, ast.AnnAssign):
        roots.append(node.annotation)
    return [n for root in roots for n in ast.walk(root)]


BUILTIN_TYPES = {"type", "classmethod", "staticmethod", "property", "int", "str", "bytes", "float", "list", "dict",
                 "tuple", "set", "frozenset"}


def _is_type_union(node: ast.BinOp) -> bool:
    """An `|` whose operands look like types (attributes of modules, capitalised names, None), not ints."""
    def typeish(x: ast.expr) -> bool:
        if isinstance(x, ast.BinOp):
            return typeish(x.left) and typeish(x.right)
        if isinstance(x, ast.Attribute):
            return (x.attr[:1].isupper() and not x.attr.isupper()) or x.attr.endswith("Type")  # not os.O_RDONLY
        if isinstance(x, ast.Name):
            return (x.id[:1].isupper() and not x.id.isupper()) or x.id in BUILTIN_TYPES
        return isinstance(x, ast.Constant) and x.value is None
    return typeish(node.left) and typeish(node.right)


def test_the_reporter_and_what_it_imports_are_the_modules_checked():
    assert {p.stem for p in loaded_in_the_task_interpreter()} == {"repo_reporter", "repo_provenance", "wire"}


# Functions of those modules the reporter never calls: wire's descriptor passing is the runner's (Python 3.11).
RUNNER_ONLY = {"wire.py": {"send_fds", "recv_fds"}}


@pytest.mark.parametrize("path", loaded_in_the_task_interpreter(), ids=lambda p: p.name)
def test_code_loaded_into_the_tasks_interpreter_runs_on_python_3_7(path):
    allowed = {f"line {n}: .{attr}" for attr in RUNNER_ONLY.get(path.name, ())
               for n, line in enumerate(path.read_text().splitlines(), 1) if f".{attr}(" in line}
    assert [p for p in floor_problems(path.read_text()) if p not in allowed] == []


@pytest.mark.parametrize("snippet", ["isinstance(x, int | str)", "isinstance(x, types.FunctionType | type)",
                                     "zip(a, b, strict=True)", "c.co_qualname"])
def test_the_floor_check_finds_newer_runtime_features(snippet):
    assert floor_problems(snippet) != []


@pytest.mark.parametrize("snippet", ["x = a if (b := 1) else c", "def f(a, /): pass"])
def test_the_floor_check_finds_newer_syntax(snippet):
    with pytest.raises(SyntaxError):
        floor_problems(snippet)


def test_the_floor_check_leaves_annotations_guards_and_flags_alone():
    assert floor_problems("def f(a: int | None) -> str | None:\n    x: dict | None = None\n"
                          "y = c.co_qualname if _HAS_QUALNAME else c.co_name\nz = os.O_RDONLY | os.O_NOFOLLOW\n") == []


SOURCE = textwrap.dedent('''
    import pytest

    def test_a():
        squares = [i * i for i in range(3)]
        key = lambda x: x
        def inner():
            def deeper():
                return {k: v for k, v in ()}
            return deeper
        return squares, key, inner

    class TestThing:
        def test_m(self):
            return (x for x in ())

        class Nested:
            def test_n(self):
                pass

    @pytest.mark.skip
    def test_b():
        class Local:
            def method(self):
                pass
        return Local
''').encode()


def test_qualnames_derived_before_python_3_11_are_the_compilers(monkeypatch, tmp_path):
    path = tmp_path / "test_q.py"
    path.write_bytes(SOURCE)
    real = _codes(repo_provenance.Compiled(str(path), SOURCE, None, False).built[False])
    monkeypatch.setattr(repo_provenance, "_HAS_QUALNAME", False)
    derived = repo_provenance.Compiled(str(path), SOURCE, None, False)
    made = _codes(derived.built[False])
    assert len(real) == len(made) > 10
    assert [derived.qualname(c) for c in made] == [c.co_qualname for c in real]
    assert derived.qualname(real[1]) == real[1].co_qualname  # another compilation's code, equal field by field


def _codes(code: types.CodeType) -> list[types.CodeType]:
    out, stack = [], [code]
    while stack:
        c = stack.pop(0)
        out.append(c)
        stack += [x for x in c.co_consts if isinstance(x, types.CodeType)]
    return out


def test_a_code_object_of_another_file_has_no_qualname_here(tmp_path):
    path = tmp_path / "test_q.py"
    path.write_bytes(SOURCE)
    compiled = repo_provenance.Compiled(str(path), SOURCE, None, False)
    other = compile(SOURCE.replace(b"return squares", b"return None"), str(path), "exec")
    test_a = next(c for c in _codes(other) if c.co_name == "test_a")
    assert compiled.qualname(test_a) is None


def test_without_function_builtins_the_modules_binding_is_proved_and_watched(monkeypatch):
    """Python < 3.10: a call takes its module's __builtins__, so that binding must be the real one, and stay."""
    monkeypatch.setattr(repo_provenance, "_FUNCTION_BUILTINS", False)
    prov = repo_provenance.Provenance(lambda path: True)
    honest: dict = {"__builtins__": builtins}
    exec("def f():\n    return len('x')\n", honest)
    assert prov._real_builtins(honest["f"])
    assert not prov.changed()
    honest["__builtins__"] = {**vars(builtins), "len": lambda x: 0}
    assert prov.changed()
    forged: dict = {"__builtins__": {**vars(builtins)}}
    exec("def g():\n    pass\n", forged)
    assert not prov._real_builtins(forged["g"])


def test_string_literals_of_any_parser_version_name_setattr_targets():
    call = ast.parse("setattr(TestX, 'test_y', None)").body[0].value  # type: ignore[attr-defined]
    assert repo_provenance._attribute_bound(call) == ["TestX.test_y"]
    assert repo_provenance._str_value(ast.Constant(3)) is None


@pytest.mark.parametrize(("files", "expected"), [
    ({"pytest.ini": "[pytest]\n"}, "pytest.ini"),
    ({"setup.cfg": "[metadata]\nname = x\n", "tox.ini": "[pytest]\naddopts = -q\n"}, "tox.ini"),
    ({"setup.cfg": "[metadata]\nname = x\n"}, None),
    ({}, None),
])
def test_the_configuration_file_is_the_one_pytest_finds_in_the_root(tmp_path, files, expected):
    root = tmp_path / "repo"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    found = repo_reporter._config_file(str(root))
    assert found == (str(root / expected) if expected else None)


def test_the_installed_pluggy_takes_new_style_wrappers():
    """Our pytest 9 / pluggy 1.x: the new-style wrapper is the one registered (the old style is for pluggy < 1.1)."""
    assert repo_reporter.NEW_STYLE_WRAPPERS and repo_reporter.PYC_BY_HASH
    impl = repo_reporter.TrustedReporter.pytest_runtest_call
    assert impl.pytest_impl["wrapper"] and not impl.pytest_impl.get("hookwrapper")  # type: ignore[attr-defined]
