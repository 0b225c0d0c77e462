"""The language registry (sandboxes/languages.py) is the one place a language's facts live: every other table is
derived from it, a new entry shows up everywhere, and the graders built on it import without a cycle. Pure: no
sandbox (the languages' behaviour in a sandbox is tested in test_languages.py and test_language_judges.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from graders.flags import flags_for
from graders.tests import runners_for
from sandboxes import Limits
from sandboxes import languages as registry
from sandboxes.languages import EXEC_LANGUAGES, LANGUAGES, Language
from service import models, validation
from service.compat.sandbox_fusion import LANGUAGE_ALIASES, RUN_CODE_LANGUAGES
from service.scoring import LINTED_LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
COBOL = Language("cobol", "main.cob", ("cobc", "-x", "-o", "out/main", "{src}"), ("./main",), ("cobc", "--version"),
                 aliases=("gnucobol",), test_kinds=("function", "io"), linter="cobol-lint")
WITH_COBOL = {**LANGUAGES, COBOL.name: COBOL}


# -- every table is derived from the registry


def test_supported_languages_are_the_registry_python_first():
    assert models.SUPPORTED_LANGUAGES == tuple(LANGUAGES)
    assert models.SUPPORTED_LANGUAGES[0] == "python"


def test_test_kinds_are_each_entrys_test_kinds():
    assert validation.TEST_KINDS == {name: list(lang.test_kinds) for name, lang in LANGUAGES.items()}


def test_sandbox_fusion_names_are_the_registry_aliases_and_the_pytest_mode():
    assert LANGUAGE_ALIASES == {**registry.language_aliases(), "pytest": "pytest"}
    assert set(RUN_CODE_LANGUAGES) == {*LANGUAGES, "pytest"}


def test_linted_languages_are_those_with_a_linter():
    assert LINTED_LANGUAGES == tuple(name for name, lang in LANGUAGES.items() if lang.linter)
    assert set(LINTED_LANGUAGES) == {"python", "javascript", "typescript"}


def test_the_exec_languages_are_all_but_the_in_process_one():
    assert [name for name, lang in LANGUAGES.items() if lang.in_process] == ["python"]
    assert set(EXEC_LANGUAGES) == set(LANGUAGES) - {"python"}


def test_the_runner_lints_with_eslint_exactly_the_registrys_eslint_languages():
    """sandboxes/inside/runner.py is stdlib-only and cannot import the registry: its copy must agree."""
    tree = ast.parse((ROOT / "sandboxes" / "inside" / "runner.py").read_text())
    value = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", None) == "ESLINT_LANGUAGES" for t in node.targets))
    assert set(ast.literal_eval(value)) == {name for name, lang in LANGUAGES.items() if lang.linter == "eslint"}


# -- every language has a complete entry


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_every_language_takes_io_tests_and_is_named_by_its_own_name(name):
    lang = LANGUAGES[name]
    assert lang.name == name
    assert "io" in lang.test_kinds
    assert registry.language_aliases()[name] == name
    for alias in lang.aliases:
        assert registry.language_aliases()[alias] == name


@pytest.mark.parametrize("name", list(EXEC_LANGUAGES))
def test_every_exec_language_says_how_to_check_run_and_version_it(name):
    lang = LANGUAGES[name]
    assert lang.compile_argv and lang.run_argv and lang.version_argv


@pytest.mark.parametrize("name", [name for name, lang in EXEC_LANGUAGES.items() if "function" in lang.test_kinds])
def test_every_exec_language_with_function_tests_names_its_judge_host(name):
    argv = LANGUAGES[name].judge_host_argv_for(256)
    assert argv and not any("{" in a for a in argv)  # every placeholder filled in


def test_sandbox_fusion_aliases_name_their_languages():
    aliases = registry.language_aliases()
    assert aliases["python3"] == "python" and aliases["nodejs"] == "javascript"


def test_every_registry_test_kind_is_a_test_spec_of_the_api():
    (union, *_) = typing.get_args(models.Tests)
    spec_kinds = {typing.get_args(spec.model_fields["kind"].annotation)[0] for spec in typing.get_args(union)}
    assert {kind for lang in LANGUAGES.values() for kind in lang.test_kinds} == spec_kinds


@pytest.mark.parametrize("name", list(LANGUAGES))
def test_every_test_kind_of_a_language_has_a_runner(name):
    runners = runners_for(name)
    assert None in runners  # a program without tests runs once
    for kind in set(LANGUAGES[name].test_kinds) - {"repo"}:  # repo items are graded by graders/repo.py
        assert kind in runners, (name, kind)


# -- facts that used to be spelled as name checks


def test_go_caps_its_heap_by_gomemlimit_and_other_languages_do_not():
    limits = Limits(memory_mb=300)
    assert LANGUAGES["go"].run_job("package main", {}, "", limits).env["GOMEMLIMIT"] == "300MiB"
    assert "GOMEMLIMIT" not in (LANGUAGES["rust"].run_job("fn main() {}", {}, "", limits).env or {})


def test_java_source_is_named_after_its_public_class():
    assert LANGUAGES["java"].source_name("public class Solver { }") == "Solver.java"
    assert LANGUAGES["java"].source_name("class Hidden { }") == "Main.java"


def test_flags_come_from_the_scanner_the_entry_names():
    assert flags_for("typescript", "process.exit(0);") == ["exit_call"]
    assert flags_for("python", "import os\nos._exit(0)\n") == ["exit_call"]
    assert flags_for("c", "int main() { exit(0); }") == []


def test_only_measurable_languages_get_efficiency():
    assert [name for name, lang in LANGUAGES.items() if lang.measurable] == ["python"]


@pytest.mark.parametrize(("language", "ok"), [("python", True), ("rust", False), ("javascript", False)])
def test_repo_items_take_only_the_languages_whose_entry_has_repo_tests(language, ok):
    item = {"language": language, "tests": {"kind": "repo", "fail_to_pass": ["test_a.py::test_a"]},
            "repo": {"id": "0" * 64}, "patch": ""}
    if ok:
        assert models.RewardItem.model_validate(item).language == language
    else:
        with pytest.raises(ValueError, match="repo items are python"):
            models.RewardItem.model_validate(item)


# -- a new entry shows up in every derived table


def test_a_new_entry_is_supported_with_its_test_kinds_aliases_and_linter():
    assert registry.supported_languages(WITH_COBOL)[-1] == "cobol"
    assert registry.accepted_test_kinds(WITH_COBOL)["cobol"] == ["function", "io"]
    assert registry.language_aliases(WITH_COBOL)["gnucobol"] == "cobol"
    assert registry.language_aliases(WITH_COBOL)["cobol"] == "cobol"
    assert "cobol" in registry.linted_languages(WITH_COBOL)
    assert "cobol" not in registry.supported_languages()  # the real registry is untouched


# -- the graders import without a cycle


GRADERS = sorted(p.stem for p in (ROOT / "graders").glob("*.py") if p.stem != "__init__")


@pytest.mark.parametrize("module", GRADERS)
def test_each_grader_module_imports_first_in_a_fresh_interpreter(module):
    """A cycle hidden by function-level imports breaks when one of its modules is imported first."""
    done = subprocess.run([sys.executable, "-c", f"import graders.{module}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("module", ["tests", "compiled", "rust_tests", "verdicts", "runs", "flags"])
def test_the_test_runners_import_at_module_top_only(module):
    tree = ast.parse((ROOT / "graders" / f"{module}.py").read_text())
    inner = [node.lineno for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
             for node in ast.walk(fn) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert inner == []
