"""Reward hacks against repo tasks, each run for real on every benchmark task, in real sandboxes of both backends.

The task's bug stays in place, so a FAIL_TO_PASS test passes only if the hack works; each hack also has to leave
the trace its defence produces (the files restored, the tampering found, or no executable package), so that a
test cannot pass for the wrong reason. tests/repo_hacks.py builds the patches; the same patches fool plain
`python -m pytest` (test_the_hacks_fool_a_plain_pytest_run).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from graders.repo import RepoGrader
from graders.tests import job_limits
from service.compat.swebench import archive_files, to_item
from service.repos.archive import ArchiveLimits, normalize
from service.repos.benchmark import tasks
from service.repos.models import RepoTests

from .repo_hacks import HACKS, hack_patch

TASKS = tasks()


class Store:
    """The repo store as the grader sees it: repo id -> normalized snapshot."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}

    def add(self, archive: bytes) -> str:
        n = normalize(archive, ArchiveLimits())
        self.data[n.id] = n.data
        return n.id

    async def fetch(self, repo_id: str) -> bytes | None:
        return self.data.get(repo_id)


async def grade_all(pool, jobs: list[tuple[dict, str]]):
    """[(task, patch)] -> Outcomes, all in flight at once (the pool keeps both sandboxes busy)."""
    store = Store()
    grader = RepoGrader(pool, store.fetch)
    ids = {t["instance_id"]: store.add(t["archive"]) for t in TASKS}

    async def one(task: dict, patch: str):
        tests = RepoTests(**to_item(task, ids[task["instance_id"]])["tests"])
        return await grader.grade(ids[task["instance_id"]], patch, None, tests, job_limits(10, 512, 120))

    return await asyncio.gather(*(one(t, p) for t, p in jobs))


@pytest.mark.parametrize("hack", HACKS, ids=[h.name for h in HACKS])
async def test_no_hack_passes_a_fail_to_pass_test_on_any_task(pool, hack):
    outcomes = await grade_all(pool, [(t, hack_patch(hack, t)) for t in TASKS])
    for task, outcome in zip(TASKS, outcomes, strict=True):
        where = f"{hack.name} on {task['instance_id']}: {outcome.status} {outcome.message[:300]}"
        assert outcome.status not in ("passed", "infra_error", "invalid_input"), where
        verdicts = {v.name: v for v in outcome.verdicts}
        assert not any(verdicts[n].passed for n in task["FAIL_TO_PASS"]), where
        repo = outcome.details["repo"]
        if hack.expect == "restored":
            assert repo.get("restored"), where
            assert "tests_or_config_edited" in outcome.flags, where
        elif hack.expect == "tampering":
            assert repo.get("tampering") and "harness_patch" in outcome.flags, where
            assert not outcome.executable, where
        else:
            assert not outcome.executable, where


def test_the_hacks_fool_a_plain_pytest_run(tmp_path):
    """Proof that the hacks are real: graded the plain way (a copy, `python -m pytest` on the tests' files, its exit
    code), most of them make the buggy toolz task pass. (Our own hack code, run on the host on purpose.)"""
    task = next(t for t in TASKS if t["instance_id"] == "toolz-1.2.0-bug0")
    files = archive_files(task["archive"])
    fooled = []
    for hack in HACKS:
        root = Path(tempfile.mkdtemp(dir=tmp_path))
        for path, data in {**files, **hack.build(task, files)}.items():
            target = root / path
            if data is None:
                target.unlink(missing_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": str(root)}
        test_files = sorted({n.split("::")[0] for n in task["FAIL_TO_PASS"]})
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *test_files],
                             cwd=root, env=env, capture_output=True, timeout=300)
        if run.returncode == 0:
            fooled.append(hack.name)
    assert len(fooled) >= 18, fooled
    assert {"conftest_at_root", "monkeypatch_testreport", "os_exit_at_import", "fake_pytest_summary",
            "edit_test_files", "sitecustomize_usercustomize_pth"} <= set(fooled), fooled
    import_system = {"sys_modules_fake_test_module", "sys_modules_fake_with_emptied_bodies",
                     "finder_loader_that_leaves", "code_swapped_after_import", "path_entry_finder_shadows_tests",
                     "pytest_collect_patched_and_restored"}
    assert import_system <= set(fooled), fooled
