"""Pure logic of repo tasks, no sandbox: archive checks, the in-sandbox workspace helpers on a temporary directory,
the runner's check of the report stream, verdicts into Outcomes, request validation, the cache key, the stores."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tarfile

import pytest

from graders.repo import added_flags, outcome_from, strip_level
from rewardbox.archive import repo_archive
from sandboxes import Result, Status
from sandboxes.backends.base import RUNNER_DIR
from service.cache import cache_key
from service.models import RewardItem
from service.repos.archive import ArchiveLimits, BadArchive, normalize
from service.repos.models import RepoTests
from service.repos.snapshots import MemoryRepoStore, RedisRepoStore, RepoSettings

from .distributed import RedisServer

sys.path.insert(0, str(RUNNER_DIR))  # the in-sandbox modules import each other by plain name
import repo_diff  # noqa: E402
import repo_judge  # noqa: E402
import repo_workspace as ws  # noqa: E402

sys.path.remove(str(RUNNER_DIR))

LIMITS = ArchiveLimits()


def tgz(entries: list[tuple[str, bytes, int, int]]) -> bytes:
    """(name, data, mtime, uid) regular files."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data, mtime, uid in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uid = len(data), mtime, uid
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def members(normalized: bytes) -> dict[str, bytes | str]:
    with tarfile.open(fileobj=io.BytesIO(normalized), mode="r:gz") as tar:
        return {m.name: (tar.extractfile(m).read() if m.isreg() else m.type.decode()) for m in tar}


def test_one_top_folder_is_stripped_and_the_normal_form_ignores_times_and_owners():
    a = normalize(tgz([("proj-1.0/pkg/m.py", b"x = 1\n", 5, 0), ("proj-1.0/README", b"hi\n", 5, 0)]), LIMITS)
    b = normalize(tgz([("proj-1.0/README", b"hi\n", 99, 1000), ("proj-1.0/pkg/m.py", b"x = 1\n", 7, 42)]), LIMITS)
    assert a.stripped == "proj-1.0" and a.data == b.data and a.id != b.id
    assert members(a.data) == {"README": b"hi\n", "pkg/m.py": b"x = 1\n"}
    two_tops = normalize(tgz([("a/x", b"1", 0, 0), ("b/y", b"2", 0, 0)]), LIMITS)
    assert two_tops.stripped is None and set(members(two_tops.data)) == {"a/x", "b/y"}


def test_a_hard_link_inside_becomes_a_copy():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        info = tarfile.TarInfo("r/f")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"abc"))
        link = tarfile.TarInfo("r/g")
        link.type, link.linkname = tarfile.LNKTYPE, "r/f"
        tar.addfile(link)
    assert members(normalize(out.getvalue(), LIMITS).data) == {"f": b"abc", "g": b"abc"}


def test_the_same_path_twice_is_refused():
    with pytest.raises(BadArchive, match="twice"):
        normalize(tgz([("r/f", b"1", 0, 0), ("r/f", b"2", 0, 0)]), LIMITS)


def test_the_sandbox_refuses_what_the_normalizer_never_produces():
    with pytest.raises(ws.BadSnapshot):
        ws.load(tgz([("../escape", b"x", 0, 0)]))
    snap = ws.load(normalize(repo_archive({"a/b.py": b"x"}), LIMITS).data)
    assert snap.file("a/b.py") == b"x" and snap.entries["a"].kind == "d"


def test_workspace_writes_replace_planted_links_and_never_follow_them(tmp_path):
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "tests").symlink_to(outside)  # a link where a trusted directory goes
    (root / "conftest.py").symlink_to(outside / "target")
    ws.write_over(str(root), "tests/test_x.py", b"trusted\n")
    ws.write_over(str(root), "conftest.py", b"# trusted\n")
    assert (root / "tests").is_dir() and not (root / "tests").is_symlink()
    assert (root / "tests" / "test_x.py").read_bytes() == b"trusted\n"
    assert not (root / "conftest.py").is_symlink() and list(outside.iterdir()) == []
    (root / "d").symlink_to(outside)
    with pytest.raises(ws.WorkspaceError):
        ws.write_inside(str(root), "d/x.py", b"through a link")
    tree = ws.scan(str(root))
    assert tree["d"] == "l" and tree["tests/test_x.py"] == "f"
    os.chmod(root / "tests" / "test_x.py", 0o600)
    ws.make_readable(str(root), tree)
    assert (root / "tests" / "test_x.py").stat().st_mode & 0o777 == 0o644
    assert ws.is_protected("pkg/conftest.py") and ws.is_protected("x.pth") and ws.is_protected("tox.ini")
    assert not ws.is_protected("pkg/tox.ini") and not ws.is_protected("pkg/core.py")


def test_modules_added_under_a_standard_library_name_at_an_import_root_are_found():
    shadows = {rel: repo_judge._stdlib_shadow(rel) for rel in ["decimal.py", "fractions/__init__.py",
                                                               "src/json/x.py", "pytest.py", "pkg/decimal.py",
                                                               "mylib.py"]}
    assert shadows == {"decimal.py": "decimal.py", "fractions/__init__.py": "fractions", "src/json/x.py": "src/json",
                       "pytest.py": "pytest.py", "pkg/decimal.py": None, "mylib.py": None}


def test_the_strip_level_follows_the_diffs_paths():
    assert strip_level("diff --git a/x b/x\n--- a/x\n+++ b/x\n") == 1
    assert strip_level("--- x.py\n+++ x.py\n@@ -1 +1 @@\n") == 0
    assert strip_level("") == 1


def test_changed_statements_only_are_flagged_and_old_constructs_do_not_count():
    old = "import sys\n\n\ndef a():\n    sys.exit(1)\n\n\ndef b():\n    return 1\n"
    new = old.replace("return 1", "return sys._getframe()")
    before, after = repo_judge._changed_parts(old, new)
    assert after.startswith("def b") and "exit" not in after
    assert added_flags([[before, after]]) == {"introspection"}


def test_repo_diff_marks_missing_newlines_and_refuses_binary():
    patch = repo_diff.unified_diff({"f": b"a\nb"}, {"f": b"a\nc"})
    assert patch.endswith("-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n")
    assert repo_diff.unified_diff({"same": b"x"}, {"same": b"x"}) == ""
    with pytest.raises(repo_diff.NotText):
        repo_diff.unified_diff({"bin": None}, {"bin": b"\xff\xfe"})


# ---------------------------------------------------------------------------------- the runner's stream check


def frame(n: int, event: str, token: str = "tok", **fields) -> dict:
    return {"t": token, "n": n, "event": event, **fields}


def test_the_report_stream_is_rejected_on_any_frame_the_reporter_did_not_send():
    listed = ["t.py::a", "t.py::b"]
    cases = {
        "wrong token": [frame(1, "start", token="guess")],
        "a gap in the numbers": [frame(1, "start"), frame(3, "collected", items=listed)],
        "an uncollected case": [frame(1, "start"), frame(2, "collected", items=["t.py::a"]),
                                frame(3, "case", name="t.py::b", passed=True)],
        "a test judged twice": [frame(1, "start"), frame(2, "collected", items=listed),
                                frame(3, "case", name="t.py::a", passed=False),
                                frame(4, "case", name="t.py::a", passed=True)],
        "a final count that disagrees": [frame(1, "start"), frame(2, "collected", items=listed),
                                         frame(3, "case", name="t.py::a", passed=True),
                                         frame(4, "finish", reported=2, exitstatus=0)],
        "tests not asked for": [frame(1, "start"), frame(2, "collected", items=["t.py::zzz"])],
        "not a frame at all": ["hello"],
    }
    for why, frames in cases.items():
        stream = repo_judge.Frames("tok", listed)
        for f in frames:
            stream.take(f)
        assert stream.tampered, why
        verdicts = repo_judge._verdicts(stream, listed, ["t.py"], None, {"status": "ok", "exit_code": 0})
        assert not any(v["passed"] for v in verdicts["verdicts"]), why


def test_an_honest_stream_gives_its_verdicts_and_names_the_running_test():
    listed = ["t.py::a", "t.py::b", "t.py::c"]
    stream = repo_judge.Frames("tok", listed)
    for f in [frame(1, "start"), frame(2, "collected", items=listed), frame(3, "case", name="t.py::a", passed=True,
                                                                            status="passed")]:
        stream.take(f)
    assert not stream.tampered and stream.running() == "t.py::b"
    out = repo_judge._verdicts(stream, listed, ["t.py"], "t.py::b", {"status": "timeout", "exit_code": None})
    assert [(v["passed"], v["status"]) for v in out["verdicts"]] == [(True, "passed"), (False, "timeout"),
                                                                      (False, "not_run")]
    assert out["executable"]  # collected, then stopped by our time limit


# ---------------------------------------------------------------------------------- verdicts into Outcomes


def repo_result(event: dict, status: Status = Status.OK) -> Result:
    return Result(status=status, events=[{"event": "repo", "patch": {"ok": True}, **event}])


def test_outcomes_of_repo_jobs():
    f2p, p2p = ["t.py::a"], ["t.py::b"]
    ok = [{"name": "t.py::a", "passed": True, "status": "passed"}, {"name": "t.py::b", "passed": True,
                                                                     "status": "passed"}]
    passed = outcome_from(repo_result({"verdicts": ok, "executable": True}), f2p, p2p)
    assert passed.status == "passed" and passed.executable and passed.pass_rate == 1.0
    half = [ok[0] | {"passed": False, "status": "failed"}, ok[1]]
    failed = outcome_from(repo_result({"verdicts": half, "executable": True, "restored": ["t.py"],
                                       "edited_tests": ["t.py"]}), f2p, p2p)
    assert failed.status == "failed" and failed.pass_rate == 0.5 and failed.flags == ["tests_or_config_edited"]
    # The test_patch's files restored over a change that left them alone: the trusted side's step, no flag.
    honest = outcome_from(repo_result({"verdicts": ok, "executable": True, "restored": ["t.py"], "edited_tests": []}),
                          f2p, p2p)
    assert honest.status == "passed" and honest.flags == []
    assert failed.details["repo"]["fail_to_pass"] == {"passed": 0, "total": 1}
    tampered = outcome_from(repo_result({"verdicts": half, "executable": True, "tampered": "x"}), f2p, p2p)
    assert tampered.status == "failed" and not tampered.executable and "harness_patch" in tampered.flags
    crashed = outcome_from(repo_result({"verdicts": half, "executable": False}), f2p, p2p)
    assert crashed.status == "runtime_error"
    memory = outcome_from(repo_result({"verdicts": half, "executable": True}, Status.MEMORY_LIMIT), f2p, p2p)
    assert memory.status == "memory_limit"
    bad_patch = Result(status=Status.OK, events=[{"event": "repo", "patch": {"ok": False, "message": "Hunk #1"}}])
    patch_error = outcome_from(bad_patch, f2p, p2p)
    assert patch_error.status == "patch_error" and not patch_error.executable and "Hunk" in patch_error.message
    assert outcome_from(Result.infra("boom"), f2p, p2p).status == "infra_error"


# ---------------------------------------------------------------------------------- requests


def repo_item(**fields) -> dict:
    return {"tests": {"kind": "repo", "fail_to_pass": ["t.py::a"]}, "repo": {"id": "a" * 64}, "patch": "", **fields}


def test_repo_items_validate_their_fields():
    item = RewardItem.model_validate(repo_item())
    assert item.code == "" and item.tests.listed() == ["t.py::a"]
    for bad, words in [(repo_item(patch=None), "exactly one of patch"), (repo_item(code="x"), "code"),
                       (repo_item(files={"/etc/x": ""}, patch=None), "relative path"),
                       (repo_item(repo={"id": "a" * 64, "archive_b64": "x"}), "exactly one of repo.id"),
                       (repo_item(language="rust"), "python"),
                       ({"code": "x", "patch": ""}, "only for tests.kind 'repo'")]:
        with pytest.raises(ValueError, match=words):
            RewardItem.model_validate(bad)
    assert RepoTests(kind="repo", fail_to_pass=["a.py::t"], command="python -m pytest -x -p foo").pytest_args() == [
        "-x", "-p", "foo"]
    with pytest.raises(ValueError, match="must run pytest"):
        RepoTests(kind="repo", fail_to_pass=["a.py::t"], command="make test")
    with pytest.raises(ValueError, match="at least one node id"):
        RepoTests(kind="repo")


def test_the_result_cache_key_tells_patches_files_and_repos_apart():
    versions = {"v": "1"}
    keys = {cache_key(RewardItem.model_validate(i), versions) for i in [
        repo_item(), repo_item(patch="--- a/x\n"), repo_item(patch=None, files={"x.py": ""}),
        repo_item(repo={"id": "b" * 64})]}
    assert len(keys) == 4


# ---------------------------------------------------------------------------------- stores


def normalized(seed: int, size: int = 40 << 10):
    import random

    return normalize(repo_archive({"blob": random.Random(seed).randbytes(size)}, f"r{seed}"), LIMITS)


def test_the_memory_store_evicts_the_least_recently_used_beyond_its_budget():
    async def run() -> list[bool]:
        store = MemoryRepoStore(RepoSettings(LIMITS, store_bytes=100 << 10))
        a, b, c = normalized(1), normalized(2), normalized(3)
        assert await store.put(a) and await store.put(b) and not await store.put(a)
        await store.data(a.id)  # a used: b is the oldest
        await store.put(c)
        return [await store.info(x.id) is not None for x in (a, b, c)]

    assert asyncio.run(run()) == [True, False, True]


def test_the_redis_store_keeps_its_budget_atomically_and_serves_workers_from_a_local_copy():
    server = RedisServer()
    server.start()
    try:
        async def run():
            settings = RepoSettings(LIMITS, store_bytes=100 << 10)
            api, worker = (RedisRepoStore(server.url, "rbtest-repos", settings) for _ in range(2))
            a, b, c = normalized(1), normalized(2), normalized(3)
            assert await api.put(a) and await api.put(b) and not await api.put(a)
            assert await worker.data(a.id) == a.data  # fetched, kept locally, and touched: b is now the oldest
            await api.put(c)
            stored = [await worker.info(x.id) is not None for x in (a, b, c)]
            used = int(await api.redis.get("rbtest-repos:repos-bytes"))
            return stored, used, sum(len(x.data) for x in (a, c))

        stored, used, expected = asyncio.run(run())
        assert stored == [True, False, True] and used == expected
    finally:
        server.stop()
