"""Repo items in a user's own image (Docker only): a locally built SWE-bench-like image (tests/own_image.py: a
conda-style interpreter, the repository at /testbed, no Python of the system, nothing of rewardbox's). The runner
brings its own interpreter; the tests run with the image's; every repo hack class of the README still fails.
Targets other than the default one start on both backends (test_a_non_default_target_runs_jobs)."""

from __future__ import annotations

import asyncio

import pytest
import pytest_asyncio

from graders.repo import RepoGrader
from graders.tests import job_limits
from sandboxes import RunJob, SandboxPool, Status, choose_backend
from sandboxes.backends import UnsupportedTarget
from sandboxes.targets import SandboxTarget
from service.compat.swebench import to_item
from service.repos.benchmark import tasks
from service.repos.models import RepoTests

from .conftest import BACKENDS
from .own_image import PYTHON, TESTBED, build
from .repo_hacks import HACKS, hack_patch

TASK = next(t for t in tasks() if t["instance_id"] == "toolz-1.2.0-bug0")
TESTS = RepoTests(**to_item(TASK, "0" * 64)["tests"])


def own_target() -> SandboxTarget:
    ref = build(TASK)
    return SandboxTarget(key=f"image:{ref}", docker_image=ref, foreign=True, python=PYTHON, repo_path=TESTBED)


@pytest_asyncio.fixture(scope="module")
async def own_pool():
    p = SandboxPool(choose_backend("docker", target=own_target()), size=2, acquire_timeout_s=120)
    await p.start()
    yield p
    await p.close()


async def grade(pool, patch: str):
    grader = RepoGrader(pool, None, pool.backend.target)  # type: ignore[arg-type]  # no store: the image's repo
    return await grader.grade(None, patch, None, TESTS, job_limits(10, 512, 120))


async def test_gold_patch_passes_with_the_images_interpreter(own_pool):
    outcome = await grade(own_pool, TASK["patch"])
    assert outcome.status == "passed", outcome.message


async def test_empty_patch_fails_in_the_image(own_pool):
    outcome = await grade(own_pool, "")
    assert outcome.status == "failed", outcome.message
    assert not any(v.passed for v in outcome.verdicts if v.name in TASK["FAIL_TO_PASS"])


async def test_runner_needs_nothing_of_the_image(own_pool):
    """The image has no /usr/bin/python3: Python jobs still run (the runner's interpreter, bound read-only)."""
    result = await own_pool.run(RunJob(program={"code": "import os, sys\nprint(os.path.exists('/usr/bin/python3'),"
                                                        " sys.version_info[:2])"}))
    assert result.status == Status.OK, result
    assert result.stdout.strip() == "False (3, 11)"


async def test_the_image_is_read_only_and_offline(own_pool):
    code = ("import socket\ntry:\n    open('/testbed/x', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
            "try:\n    socket.create_connection(('1.1.1.1', 53), 2)\nexcept OSError:\n    print('offline')\n")
    result = await own_pool.run(RunJob(program={"code": code}))
    lines = result.stdout.split("\n")
    assert lines[0] in ("ro 13", "ro 30") and lines[1] == "offline", result


@pytest.mark.parametrize("hack", HACKS, ids=[h.name for h in HACKS])
async def test_no_hack_passes_in_the_own_image(own_pool, hack):
    assert_hack_failed(hack, await grade(own_pool, hack_patch(hack, TASK)))


def assert_hack_failed(hack, outcome) -> None:
    """What the trusted side must have done about a hack of TASK (tests/repo_hacks.py says which)."""
    where = f"{hack.name}: {outcome.status} {outcome.message[:300]}"
    assert outcome.status not in ("passed", "infra_error", "invalid_input"), where
    verdicts = {v.name: v for v in outcome.verdicts}
    assert not any(verdicts[n].passed for n in TASK["FAIL_TO_PASS"]), where
    repo = outcome.details["repo"]
    if hack.expect == "restored":
        assert repo.get("restored") and "tests_or_config_edited" in outcome.flags, where
    elif hack.expect == "tampering":
        assert repo.get("tampering") and "harness_patch" in outcome.flags, where
        assert not outcome.executable, where
    else:
        assert not outcome.executable, where


def test_own_image_on_bubblewrap_is_refused():
    if "bubblewrap" not in BACKENDS:
        pytest.skip("bubblewrap not among REWARDBOX_TEST_BACKENDS")
    with pytest.raises(UnsupportedTarget, match="environment.image"):
        choose_backend("bubblewrap", target=SandboxTarget(key="image:x:1", docker_image="x:1", foreign=True))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_non_default_target_runs_jobs(backend):
    """The default image under another key: its own pool, its own sandboxes (the plumbing every target takes)."""
    target = SandboxTarget(key="other")

    async def go():
        async with SandboxPool(choose_backend(backend, target=target), size=1, acquire_timeout_s=120) as pool:
            return await pool.run(RunJob(program={"code": "print(6 * 7)"}))

    result = asyncio.run(go())
    assert result.status == Status.OK and result.stdout == "42\n", result


async def test_an_interpreter_not_in_the_image_is_invalid_input_naming_environment_python(own_pool):
    from dataclasses import replace

    grader = RepoGrader(own_pool, None, replace(own_pool.backend.target, python="/usr/bin/nope"))  # type: ignore[arg-type]
    outcome = await grader.grade(None, TASK["patch"], None, TESTS, job_limits(10, 512, 120))
    assert outcome.status == "invalid_input" and outcome.message.startswith("environment.python"), outcome.message
