"""Repo items in a user's image with an OLD Python and an old pytest (Docker only): Debian bullseye's Python 3.9 with
pytest 5.4.3 (pluggy 0.13) or pytest 7.4.4 (pluggy 1.0) at SWE-bench's conda path (tests/old_python_image.py), as
most SWE-bench instance images hold. The tests run with that interpreter, rewardbox's reporter loaded into it; the
gold patch resolves, the empty one does not, and every repo hack class of the README fails there as in the default
image."""

from __future__ import annotations

import pytest
import pytest_asyncio

from graders.repo import RepoGrader
from graders.tests import job_limits
from sandboxes import SandboxPool, choose_backend
from sandboxes.targets import SandboxTarget

from .old_python_image import PYTESTS, PYTHON, PYVER, TESTBED, build, mirror_problem
from .repo_hacks import HACKS, hack_patch
from .test_own_image import TASK, TESTS, assert_hack_failed, grade


def old_target(pytest_version: str) -> SandboxTarget:
    problem = mirror_problem()
    if problem:
        pytest.skip(problem)
    ref = build(TASK, pytest_version)
    return SandboxTarget(key=f"image:{ref}", docker_image=ref, foreign=True, python=PYTHON, repo_path=TESTBED)


@pytest_asyncio.fixture(scope="module", params=PYTESTS, ids=[f"pytest{v}" for v in PYTESTS])
async def old_pool(request):
    p = SandboxPool(choose_backend("docker", target=old_target(request.param)), size=2, acquire_timeout_s=120)
    p.pytest_version = request.param  # type: ignore[attr-defined]
    await p.start()
    yield p
    await p.close()


async def test_gold_patch_passes_with_python_3_9_and_old_pytest(old_pool):
    outcome = await grade(old_pool, TASK["patch"])
    assert outcome.status == "passed", outcome.message


async def test_empty_patch_fails_with_python_3_9_and_old_pytest(old_pool):
    outcome = await grade(old_pool, "")
    assert outcome.status == "failed", outcome.message
    assert not any(v.passed for v in outcome.verdicts if v.name in TASK["FAIL_TO_PASS"])


async def test_the_tests_run_with_the_images_interpreter_and_pytest(old_pool):
    """A trusted test that passes only under the image's Python and pytest, graded with the gold patch."""
    path, source = next(iter(TESTS.test_files.items()))
    probe = (f"\n\ndef test_runs_on_the_images_python():\n    import sys\n    import pytest\n"
             f"    assert sys.version_info[:2] == {tuple(map(int, PYVER.split('.')))}, sys.version\n"
             f"    assert pytest.__version__ == {old_pool.pytest_version!r}, pytest.__version__\n")
    tests = TESTS.model_copy(update={"fail_to_pass": [*TESTS.fail_to_pass, f"{path}::test_runs_on_the_images_python"],
                                     "test_files": {**TESTS.test_files, path: source + probe}})
    grader = RepoGrader(old_pool, None, old_pool.backend.target)  # type: ignore[arg-type]
    outcome = await grader.grade(None, TASK["patch"], None, tests, job_limits(10, 512, 120))
    assert outcome.status == "passed", outcome.message


@pytest.mark.parametrize("hack", HACKS, ids=[h.name for h in HACKS])
async def test_no_hack_passes_with_python_3_9_and_old_pytest(old_pool, hack):
    assert_hack_failed(hack, await grade(old_pool, hack_patch(hack, TASK)))


KINDS = '''
import unittest

import pytest


class TestUnit(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(1, 1)

    def test_bad(self):
        self.assertEqual(1, 2)


class TestPlain:
    def test_method(self):
        assert True


@pytest.mark.parametrize("x", [1, 2])
def test_param(x):
    assert x


def test_fails():
    assert False


@pytest.mark.xfail(reason="expected")
def test_xfail():
    assert False
'''


async def test_each_item_kind_needs_its_own_evidence_on_old_pytest(old_pool):
    """unittest (our addSuccess), class methods, parametrized tests (pytest < 6 names only these originally) pass
    on the reporter's evidence; failures and an xfail do not."""
    folder = next(iter(TESTS.test_files)).rpartition("/")[0]
    path = f"{folder}/test_rb_kinds.py"
    good = ["TestUnit::test_ok", "TestPlain::test_method", "test_param[1]", "test_param[2]"]
    bad = ["TestUnit::test_bad", "test_fails", "test_xfail"]
    tests = TESTS.model_copy(update={"fail_to_pass": [f"{path}::{n}" for n in good + bad], "pass_to_pass": [],
                                     "test_files": {path: KINDS}})
    grader = RepoGrader(old_pool, None, old_pool.backend.target)  # type: ignore[arg-type]
    outcome = await grader.grade(None, TASK["patch"], None, tests, job_limits(10, 512, 120))
    passed = {v.name.split("::", 1)[1] for v in outcome.verdicts if v.passed}
    assert passed == set(good), [(v.name, v.status, v.message[:200]) for v in outcome.verdicts]


FIXTURES = '''
import logging
import os
import sys
import warnings

import pytest


@pytest.fixture(params=[1, 2])
def number(request):
    request.addfinalizer(lambda: None)
    return request.param


def test_capture(capsys):
    print("out")
    sys.stderr.write("err")
    assert capsys.readouterr() == ("out\\n", "err")


def test_capture_fd(capfd):
    os.write(1, b"fd")
    assert capfd.readouterr().out == "fd"


def test_logs_and_warnings(caplog, recwarn):
    logging.getLogger("x").warning("logged")
    warnings.warn("careful", UserWarning)
    assert "logged" in caplog.text and len(recwarn) == 1
    with pytest.warns(UserWarning):
        warnings.warn("again", UserWarning)


def test_monkeypatch_and_paths(monkeypatch, tmpdir, tmp_path):
    monkeypatch.setattr(os, "getcwd", lambda: "/nowhere")
    monkeypatch.setenv("RB_X", "1")
    assert os.getcwd() == "/nowhere" and os.environ["RB_X"] == "1"
    tmpdir.join("a").write("x")
    (tmp_path / "b").write_text("y")
    assert tmpdir.join("a").read() == "x" and (tmp_path / "b").read_text() == "y"


def test_raises_and_approx(number):
    with pytest.raises(ZeroDivisionError):
        number / 0
    assert 0.1 + 0.2 == pytest.approx(0.3)
'''


async def test_pytests_own_fixtures_pass_on_old_pytest_without_tampering_alarms(old_pool):
    """What honest test suites use (capture, logging, warnings, monkeypatch, temporary paths, parametrized
    fixtures) changes nothing the guard watches: every such test passes, no harness_patch."""
    folder = next(iter(TESTS.test_files)).rpartition("/")[0]
    path = f"{folder}/test_rb_fixtures.py"
    names = ["test_capture", "test_capture_fd", "test_logs_and_warnings", "test_monkeypatch_and_paths",
             "test_raises_and_approx[1]", "test_raises_and_approx[2]"]
    tests = TESTS.model_copy(update={"fail_to_pass": [f"{path}::{n}" for n in names], "pass_to_pass": [],
                                     "test_files": {path: FIXTURES}})
    grader = RepoGrader(old_pool, None, old_pool.backend.target)  # type: ignore[arg-type]
    outcome = await grader.grade(None, TASK["patch"], None, tests, job_limits(10, 512, 120))
    assert outcome.status == "passed", [(v.name, v.status, v.message[-600:]) for v in outcome.verdicts if not v.passed]
    assert "harness_patch" not in outcome.flags
