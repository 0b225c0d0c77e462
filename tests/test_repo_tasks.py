"""Repo tasks against real sandboxes on both backends: the benchmark's gold and empty patches, patches that do not
apply, whole-file changes, time limits, missing tests, wheels, the once-per-sandbox snapshot, diffs made by
repo_diff, and a clean sandbox afterwards."""

from __future__ import annotations

import asyncio
import io
import zipfile

import pytest

from graders.repo import RepoGrader
from graders.tests import job_limits
from rewardbox.archive import repo_archive
from service.compat.swebench import archive_files, to_item
from service.repos.benchmark import apply_bug
from service.repos.models import RepoTests

from .repo_hacks import repo_diff
from .test_repo_hack_resistance import TASKS, Store, grade_all
from .test_sandbox_security import assert_nothing_left

TOOLZ = next(t for t in TASKS if t["instance_id"] == "toolz-1.2.0-bug0")


async def grade_repo(pool, files: dict[str, bytes], tests: dict, patch: str | None = None,
                     change: dict[str, str] | None = None, timeout_s: float = 10):
    store = Store()
    repo_id = store.add(repo_archive(files))
    spec = RepoTests(kind="repo", **tests)
    return await RepoGrader(pool, store.fetch).grade(repo_id, patch, change, spec, job_limits(timeout_s, 512, 60))


async def test_every_gold_patch_passes_and_every_empty_patch_fails(pool):
    outcomes = await grade_all(pool, [(t, p) for t in TASKS for p in (t["patch"], "")])
    for i, task in enumerate(TASKS):
        gold, empty = outcomes[2 * i], outcomes[2 * i + 1]
        listed = list(dict.fromkeys(task["FAIL_TO_PASS"] + task["PASS_TO_PASS"]))
        assert gold.status == "passed" and gold.executable, (task["instance_id"], gold.message, gold.verdicts[:3])
        assert [v.name for v in gold.verdicts] == listed
        assert gold.details["repo"]["fail_to_pass"] == {"passed": len(task["FAIL_TO_PASS"]),
                                                        "total": len(task["FAIL_TO_PASS"])}
        assert empty.status == "failed" and empty.executable, (task["instance_id"], empty.message)
        by_name = {v.name: v for v in empty.verdicts}
        assert not any(by_name[n].passed for n in task["FAIL_TO_PASS"])
        assert all(by_name[n].passed for n in task["PASS_TO_PASS"]), task["instance_id"]
        assert empty.details["repo"]["pass_to_pass"]["passed"] == len(task["PASS_TO_PASS"])
        assert not gold.flags and not empty.flags


BROKEN_PATCHES = {
    "context_mismatch": "--- a/toolz/functoolz.py\n+++ b/toolz/functoolz.py\n@@ -1,3 +1,3 @@\n-no such line\n"
                        "+still none\n no such context\n",
    "garbage": "this is not a diff at all\n",
    "outside_the_repo": "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -0,0 +1 @@\n+root::0:0::/:/bin/sh\n",
}


@pytest.mark.parametrize("kind", sorted(BROKEN_PATCHES))
async def test_a_patch_that_does_not_apply_is_the_programs_patch_error(pool, kind):
    (outcome,) = await grade_all(pool, [(TOOLZ, BROKEN_PATCHES[kind])])
    assert outcome.status == "patch_error", (outcome.status, outcome.message)
    assert not outcome.executable and outcome.pass_rate == 0
    assert "does not apply" in outcome.message and "patch" in outcome.message.lower()
    assert all(v.status == "not_run" for v in outcome.verdicts)


async def test_whole_files_instead_of_a_patch(pool):
    bug = TOOLZ["bug"]
    fixed = archive_files(TOOLZ["archive"])
    fixed[bug["path"]] = apply_bug(fixed[bug["path"]], {**bug, "before": bug["after"], "after": bug["before"]})
    store = Store()
    repo_id = store.add(TOOLZ["archive"])
    tests = RepoTests(**to_item(TOOLZ, repo_id)["tests"])
    grader = RepoGrader(pool, store.fetch)
    good = await grader.grade(repo_id, None, {TOOLZ["bug"]["path"]: fixed[TOOLZ["bug"]["path"]].decode()}, tests,
                              job_limits(10, 512, 60))
    assert good.status == "passed", good.message
    through_a_file = await grader.grade(repo_id, None, {"toolz/functoolz.py/x.py": "x = 1\n"}, tests,
                                        job_limits(10, 512, 60))
    assert through_a_file.status == "patch_error" and "not a directory" in through_a_file.message


LIB = {"lib/__init__.py": b"def double(x):\n    return x * 2\n\n\ndef spin():\n    return 1\n",
       "tests/test_lib.py": b"import lib\n\n\ndef test_double():\n    assert lib.double(2) == 4\n\n\n"
                            b"def test_spin():\n    assert lib.spin() == 1\n\n\ndef test_after():\n    assert True\n"}
LIB_TESTS = ["tests/test_lib.py::test_double", "tests/test_lib.py::test_spin", "tests/test_lib.py::test_after"]


async def test_a_hanging_test_is_killed_at_its_limit_and_the_tests_after_it_did_not_run(pool):
    hang = repo_diff.unified_diff({"lib/__init__.py": LIB["lib/__init__.py"]},
                                  {"lib/__init__.py": LIB["lib/__init__.py"].replace(b"return 1", b"while True: pass")})
    outcome = await grade_repo(pool, LIB, {"pass_to_pass": LIB_TESTS}, patch=hang, timeout_s=1.5)
    by_name = {v.name: v for v in outcome.verdicts}
    assert outcome.status == "timeout", outcome.message
    assert by_name["tests/test_lib.py::test_double"].passed
    assert by_name["tests/test_lib.py::test_spin"].status == "timeout"
    assert by_name["tests/test_lib.py::test_after"].status == "not_run"
    assert outcome.executable  # the package imported and its tests collected: the time limit stopped it
    assert outcome.wall_ms < 20_000


async def test_listed_tests_that_do_not_exist_or_skip_count_as_failed(pool):
    files = {**LIB, "tests/test_lib.py": LIB["tests/test_lib.py"] + b"\n\nimport pytest\n\n\n@pytest.mark.skip\n"
                                                                    b"def test_skipped():\n    pass\n"}
    listed = ["tests/test_lib.py::test_double", "tests/test_lib.py::test_nope", "tests/missing.py::test_x",
              "tests/test_lib.py::test_skipped"]
    outcome = await grade_repo(pool, files, {"fail_to_pass": listed}, patch="")
    by_name = {v.name: v for v in outcome.verdicts}
    assert by_name["tests/test_lib.py::test_double"].passed
    assert by_name["tests/test_lib.py::test_nope"].status == "not_run"
    assert "not found" in by_name["tests/missing.py::test_x"].message
    assert by_name["tests/test_lib.py::test_skipped"].status == "skipped"
    assert outcome.pass_rate == 0.25 and outcome.status == "failed"


def _wheel(name: str, files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr(f"{name}-1.0.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        whl.writestr(f"{name}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return out.getvalue()


async def test_pure_python_dependencies_come_from_the_snapshots_wheels_folder(pool):
    files = {"app.py": b"import depdep\n\n\ndef answer():\n    return depdep.VALUE\n",
             "wheels/depdep-1.0-py3-none-any.whl": _wheel("depdep", {"depdep/__init__.py": b"VALUE = 42\n"}),
             "test_app.py": b"import app\n\n\ndef test_answer():\n    assert app.answer() == 42\n"}
    outcome = await grade_repo(pool, files, {"fail_to_pass": ["test_app.py::test_answer"]}, patch="")
    assert outcome.status == "passed", (outcome.message, outcome.stdout[-500:])


async def test_the_tasks_command_passes_its_options_to_pytest(pool):
    files = {"lib.py": b"X = 1\n", "test_lib.py": b"import lib\n\n\ndef check_x():\n    assert lib.X == 1\n"}
    tests = {"fail_to_pass": ["test_lib.py::check_x"], "command": "pytest -o python_functions=check_*"}
    assert (await grade_repo(pool, files, tests, patch="")).status == "passed"
    default = await grade_repo(pool, files, {"fail_to_pass": ["test_lib.py::check_x"]}, patch="")
    assert default.verdicts[0].status == "not_run"  # pytest's default python_functions does not collect it


async def test_repo_diff_output_round_trips_through_gnu_patch_in_the_sandbox(pool):
    """Created, deleted, CRLF and newline-less files: the diff sessions will hand in applies byte for byte."""
    old = {"a.txt": b"one\ntwo\nthree\n", "gone.txt": b"bye\n", "crlf.txt": b"x\r\ny\r\n", "tail.txt": b"no newline",
           "check_test.py": b""}
    new = {"a.txt": b"one\n2\nthree\n", "crlf.txt": b"x\r\nY\r\n", "tail.txt": b"still no newline",
           "new/dir/file.txt": b"fresh\n"}
    expected = {**new, "gone.txt": None}
    checks = [f"    assert not os.path.exists({p!r})\n" if data is None else
              f"    assert open({p!r}, 'rb').read() == {data!r}\n" for p, data in sorted(expected.items())]
    test = "import os\n\n\ndef test_files():\n" + "".join(checks)
    patch = repo_diff.unified_diff({k: v for k, v in old.items() if k != "check_test.py"}, new)
    outcome = await grade_repo(pool, old, {"fail_to_pass": ["check_test.py::test_files"],
                                           "test_files": {"check_test.py": test}}, patch=patch)
    assert outcome.status == "passed", (outcome.message, outcome.details["repo"]["patch"])


async def test_the_snapshot_travels_until_every_sandbox_holds_it_then_only_its_id(pool):
    store = Store()
    repo_id = store.add(TOOLZ["archive"])
    grader = RepoGrader(pool, store.fetch)
    tests = RepoTests(**to_item(TOOLZ, repo_id)["tests"])

    async def wave(n: int):
        return await asyncio.gather(*(grader.grade(repo_id, TOOLZ["patch"], None, tests, job_limits(10, 512, 60))
                                      for _ in range(n)))

    first = await wave(pool.size)
    assert all(o.status == "passed" for o in first)
    while len(grader.holders[repo_id]) < pool.size:  # two items of the wave may have landed on one sandbox
        await wave(1)
    later = await wave(2 * pool.size)
    assert all(o.status == "passed" for o in later)
    assert not any(o.details["repo"]["snapshot_sent"] for o in later)


async def test_a_repo_job_leaves_nothing_behind_in_the_sandbox(pool):
    litter = repo_diff.unified_diff({"lib/__init__.py": LIB["lib/__init__.py"]}, {
        "lib/__init__.py": LIB["lib/__init__.py"] + b"\nimport os, subprocess\nopen('/tmp/litter', 'w').write('x')\n"
                           b"subprocess.Popen(['sleep', '60'])\n"})
    outcome = await grade_repo(pool, LIB, {"pass_to_pass": LIB_TESTS}, patch=litter)
    assert outcome.status == "passed", outcome.message
    await assert_nothing_left(pool, outcome.details["repo"]["sandbox"])
