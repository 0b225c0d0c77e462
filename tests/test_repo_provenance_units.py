"""The repo reporter's proof that collected tests are the trusted test file's code (sandboxes/inside/
repo_provenance.py), on files in a temporary directory: what an honest import gives passes, every way of putting
other code under the test's name fails. The import-system hacks themselves run in real sandboxes in
tests/test_repo_hack_resistance.py."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib.util
import sys
import textwrap
import types
from pathlib import Path

import pytest

from sandboxes.backends.base import RUNNER_DIR

sys.path.insert(0, str(RUNNER_DIR))  # the in-sandbox modules import each other by plain name
import repo_provenance  # noqa: E402

sys.path.remove(str(RUNNER_DIR))

TESTS = textwrap.dedent('''
    import functools

    import pytest


    @pytest.fixture
    def data():
        return [1, 2, 3]


    def test_sum(data):
        assert sum(data) == 6


    def test_len(data):
        assert len(data) == 3


    class TestThings:
        @pytest.mark.parametrize("x", [1, 2])
        def test_positive(self, x):
            assert x > 0


    def _wrap(f):
        @functools.wraps(f)
        def wrapper(*a, **k):
            return f(*a, **k)
        return wrapper
''')


def _import(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def repo(tmp_path: Path):
    """(provenance, path of the trusted test file, its module as a plain import makes it); helper.py is a file the
    change touched."""
    path = tmp_path / "test_things.py"
    path.write_text(TESTS)
    (tmp_path / "helper.py").write_text("def noop(*a, **k):\n    pass\n")
    changed = {str(tmp_path / "helper.py")}
    prov = repo_provenance.Provenance(lambda p: p not in changed and Path(p).is_file())
    prov.prepare([str(path)], None, rewritten=False)
    return prov, str(path), _import(path, "test_things_honest")


def test_an_honestly_imported_test_module_is_the_trusted_code(repo):
    prov, path, module = repo
    assert prov.module_problem(module, path) is None
    for func in (module.test_sum, module.test_len, module.TestThings.test_positive, module.TestThings().test_positive):
        assert prov.function_problem(func) is None


def test_a_wrapper_from_a_trusted_file_around_the_trusted_test_is_accepted(repo):
    prov, _, module = repo
    assert prov.function_problem(module._wrap(module.test_sum)) is None


def test_a_test_replaced_by_a_no_op_from_the_package_is_refused(repo, tmp_path):
    prov, path, module = repo
    helper = _import(tmp_path / "helper.py", "helper_changed")
    module.test_sum = helper.noop
    assert "left alone" in prov.function_problem(module.test_sum)
    assert "not the function the file defines" not in (prov.module_problem(module, path) or "")
    assert prov.module_problem(module, path) is not None


def test_a_no_op_of_a_trusted_file_wrapped_to_look_like_the_test_is_refused(repo):
    prov, path, module = repo
    module.test_sum = functools.wraps(module.test_sum)(lambda *a, **k: None)  # code of this (unchanged) file
    assert "is not the code compiled" in prov.module_problem(module, path)


def test_a_body_compiled_under_the_trusted_name_and_lines_is_refused(repo):
    prov, path, module = repo
    emptied = TESTS.replace("assert sum(data) == 6", "pass")
    namespace: dict = {}
    exec(compile(emptied, path, "exec", dont_inherit=True), namespace)
    assert namespace["test_sum"].__code__.co_qualname == "test_sum"
    assert "not the code compiled" in prov.function_problem(namespace["test_sum"])
    module.test_sum.__code__ = namespace["test_sum"].__code__
    assert "not the code compiled" in prov.module_problem(module, path)


def test_another_test_of_the_same_file_under_the_tests_name_is_refused(repo):
    prov, path, module = repo
    module.test_sum = module.test_len
    assert "is not the code compiled" in prov.module_problem(module, path)


def test_a_fake_module_made_from_the_trusted_bytes_with_its_own_builtins_is_refused(repo):
    prov, path, _ = repo
    fake = types.ModuleType("test_things")
    fake.__dict__["__builtins__"] = {**vars(builtins), "sum": lambda x: 6}
    exec(compile(Path(path).read_bytes(), path, "exec", dont_inherit=True), fake.__dict__)
    assert "builtins of its own" in prov.function_problem(fake.test_sum)
    assert "builtins of its own" in prov.module_problem(fake, path)


def test_a_trusted_wrapper_around_a_no_op_is_refused(repo, tmp_path):
    prov, _, module = repo
    helper = _import(tmp_path / "helper.py", "helper_changed2")
    assert "left alone" in prov.function_problem(module._wrap(helper.noop))


def test_constants_the_compiler_never_makes_are_refused(repo):
    class AlwaysEqual:
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    prov, _, module = repo
    code = module.test_sum.__code__
    forged = code.replace(co_consts=tuple(AlwaysEqual() for _ in code.co_consts))
    assert repo_provenance.fingerprint(forged) is None
    module.test_sum.__code__ = forged
    assert prov.function_problem(module.test_sum) is not None


def test_the_rewritten_compilation_is_the_one_handed_to_pytest(tmp_path):
    """With assertion rewriting, the code pytest's importer gets for a listed test file is ours, so an honest
    import runs our very code objects (checked by identity, no second compilation)."""
    path = tmp_path / "test_things.py"
    path.write_text(TESTS)
    prov = repo_provenance.Provenance(lambda p: Path(p).is_file())

    class Config:
        def getini(self, name: str) -> bool:
            return False

    prov.prepare([str(path)], Config(), rewritten=True)
    code = prov.rewritten_code(str(path))
    assert code is not None and "@pytest_ar" in code.co_names
    module = types.ModuleType("test_things")
    module.__file__ = str(path)
    exec(code, module.__dict__)
    assert prov.module_problem(module, str(path)) is None
    assert prov.function_problem(module.test_sum) is None
    assert any(c is module.test_sum.__code__ for c in prov.compiled(str(path)).index[("test_sum", 12)])
    assert prov.rewritten_code(str(tmp_path / "other.py")) is None
    assert prov.rewritten_code(str(path)) is None  # once: whoever asks next gets pytest's own compilation


def test_a_listed_file_pytest_rewrites_accepts_only_the_code_objects_it_was_given(tmp_path):
    """A fake module compiled from the trusted bytes exactly as pytest would (field by field equal) is still not the
    module pytest's importer made with our code: refused."""
    path = tmp_path / "test_things.py"
    path.write_text(TESTS)

    class Config:
        def getini(self, name: str) -> bool:
            return False

    prov = repo_provenance.Provenance(lambda p: Path(p).is_file())
    prov.prepare([str(path)], Config(), rewritten=True)
    from _pytest.assertion.rewrite import _rewrite_test

    _, same = _rewrite_test(path, Config())  # pytest's own compilation: equal, not identical
    fake = types.ModuleType("test_things")
    exec(same, fake.__dict__)
    assert repo_provenance.fingerprint(fake.test_sum.__code__) in {
        repo_provenance.fingerprint(c) for c in prov.compiled(str(path)).index[("test_sum", 12)]}
    assert "not the code compiled" in prov.function_problem(fake.test_sum)
    assert "not the code compiled" in prov.module_problem(fake, str(path))


def test_a_function_of_the_test_file_changed_after_collection_is_seen(repo):
    prov, path, module = repo
    assert prov.module_problem(module, path) is None
    assert not prov.changed()
    fixture = module.data._fixture_function if hasattr(module.data, "_fixture_function") else module.data
    original = fixture.__code__
    fixture.__code__ = (lambda: [6]).__code__
    assert prov.changed()
    fixture.__code__ = original
    assert not prov.changed()
    module.test_len = module.test_sum
    assert prov.changed()


def test_functions_the_file_rebinds_are_not_required_to_be_their_def(tmp_path):
    """Honest files that rebind a def (an alias, a later assignment, a `global` in a function, a class attribute set
    at the module's level) still pass: only plain or pytest-decorated defs bound once are held to their code."""
    source = textwrap.dedent('''
        import pytest

        def test_a():
            pass

        test_a = pytest.mark.skip(test_a)

        def test_b():
            pass

        def _swap():
            global test_b
            test_b = lambda: None

        class TestC:
            def test_c(self):
                pass

            def test_d(self):
                pass

        TestC.test_c = lambda self: None
        setattr(TestC, "test_d", lambda self: None)

        @staticmethod
        def test_e():
            pass

        @pytest.fixture(autouse=True)
        def test_f():
            pass
    ''').encode()
    tree = compile(source, "t.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    assert set(repo_provenance._plain_defs(tree, source)) == {"_swap", "test_f"}
    path = tmp_path / "test_rebinds.py"
    path.write_bytes(source)
    prov = repo_provenance.Provenance(lambda p: Path(p).is_file())
    prov.prepare([str(path)], None, rewritten=False)
    assert prov.module_problem(_import(path, "test_rebinds"), str(path)) is None
