"""Pure logic of agent sessions, no sandbox: the host's workspace overlay (paths, links, directories, diff), forks
as copies, the admission caps and the end of a session (410 vs 404)."""

from __future__ import annotations

import asyncio
import base64

import pytest
from prometheus_client import CollectorRegistry

from service.errors import Overloaded
from service.sessions.manager import SessionGone, SessionManager, SessionSettings
from service.sessions.models import SessionLimits
from service.sessions.workspace import Node, PathError, Workspace

SNAP = {"pkg/__init__.py": Node("f"), "pkg/calc.py": Node("f", b"def add(a, b):\n    return a - b\n"),
        "link": Node("l", b"pkg/calc.py"), "run.sh": Node("f", b"echo\n", True)}


def test_reads_go_through_directories_only_never_links():
    ws = Workspace.of(SNAP)
    assert ws.read("pkg/calc.py").data.startswith(b"def add")
    assert ws.node("pkg").kind == "d"  # archives need not list directories
    for path, status in (("link", 422), ("pkg", 422), ("missing", 404), ("../x", 422), ("/etc/passwd", 422)):
        with pytest.raises(PathError) as e:
            ws.read(path)
        assert e.value.status == status, path
    ws.delta["evil"] = {"k": "l", "b64": base64.b64encode(b"/etc").decode()}
    with pytest.raises(PathError, match="link"):
        ws.read("evil/passwd")
    with pytest.raises(PathError, match="link"):
        ws.write("evil/new", b"x")


def test_writing_back_the_snapshot_content_leaves_no_change_and_keeps_the_executable_bit():
    ws = Workspace.of(SNAP)
    ws.write("pkg/calc.py", b"changed\n")
    assert set(ws.delta) == {"pkg/calc.py"}
    ws.write("pkg/calc.py", SNAP["pkg/calc.py"].data)
    assert ws.delta == {}
    ws.write("run.sh", b"echo hi\n")
    assert ws.read("run.sh").executable


def test_the_diff_applies_as_git_style_and_lists_what_it_cannot_carry():
    ws = Workspace.of(SNAP)
    ws.write("pkg/calc.py", b"def add(a, b):\n    return a + b\n")
    ws.write("new.txt", b"no newline")
    ws.delta["pkg/__init__.py"] = {"k": "-"}
    ws.delta["blob.bin"] = {"k": "f", "b64": base64.b64encode(b"\xff\xfe").decode()}
    ws.delta["link"] = {"k": "l", "b64": base64.b64encode(b"elsewhere").decode()}
    patch, skipped = ws.diff()
    assert "+++ b/pkg/calc.py" in patch and "new file mode" in patch and "\\ No newline at end of file" in patch
    assert "diff --git a/pkg/__init__.py b/pkg/__init__.py\ndeleted file mode" in patch
    assert skipped == ["blob.bin", "link"]


def test_a_fork_is_a_copy_that_changes_apart():
    ws = Workspace.of(SNAP)
    ws.write("a.txt", b"1")
    kid = ws.fork()
    kid.write("a.txt", b"2")
    kid.write("b.txt", b"3")
    assert ws.read("a.txt").data == b"1" and ws.node("b.txt") is None and kid.read("a.txt").data == b"2"


def _manager(**settings) -> SessionManager:
    async def fetch(repo_id: str) -> bytes | None:
        from rewardbox.archive import repo_archive
        from service.repos.archive import ArchiveLimits, normalize

        return normalize(repo_archive({"a": b"x" * 100}), ArchiveLimits()).data

    async def score(items):
        raise AssertionError("not scored here")

    return SessionManager(pool=None, fetch=fetch, score=score, registry=CollectorRegistry(),  # type: ignore[arg-type]
                          settings=SessionSettings(**settings))


def test_admission_counts_open_sessions_and_bytes_and_ended_sessions_answer_410():
    async def main() -> None:
        m = _manager(max_open=2, max_bytes=250)
        a = await m.create("r" * 64, 600, SessionLimits())
        await m.create("r" * 64, 600, SessionLimits())
        with pytest.raises(Overloaded, match="sessions open"):
            await m.create("r" * 64, 600, SessionLimits())
        with pytest.raises(Overloaded):
            await m.fork(a.id, 1)
        await m.delete(a.id)
        with pytest.raises(SessionGone) as gone:
            m.get(a.id)
        assert gone.value.status == 410 and "deleted" in str(gone.value)
        with pytest.raises(SessionGone) as never:
            m.get("nope")
        assert never.value.status == 404
        m2 = _manager(max_open=10, max_bytes=150)
        await m2.create("r" * 64, 600, SessionLimits())
        with pytest.raises(Overloaded, match="bytes"):
            await m2.create("r" * 64, 600, SessionLimits())

    asyncio.run(main())


def test_an_expired_session_is_gone_at_once():
    async def main() -> None:
        m = _manager()
        s = await m.create("r" * 64, 0.05, SessionLimits())
        await asyncio.sleep(0.1)
        with pytest.raises(SessionGone, match="expired"):
            m.get(s.id)
        assert await m.list_open() == []

    asyncio.run(main())


# ------------------------------------------------------------------------------- the session's git state


def test_the_workspace_refuses_paths_in_its_git_folder():
    ws = Workspace.of({"a.py": Node("f", b"x")})
    for path in (".git", ".git/config", ".git/hooks/pre-commit"):
        with pytest.raises(PathError, match="git"):
            ws.write(path, b"evil")
        with pytest.raises(PathError, match="git"):
            ws.read(path)


def test_a_git_folder_in_the_snapshot_is_left_out_of_the_workspace():
    ws = Workspace.of({"a.py": Node("f", b"x"), ".git": Node("d"), ".git/config": Node("f", b"[core]")})
    assert set(ws.snapshot) == {"a.py"}


def test_git_state_never_reaches_the_diff():
    ws = Workspace.of({"a.py": Node("f", b"x\n")})
    ws.state = {"git": {".git/config": {"k": "f", "b64": "W2NvcmVdCg==", "x": False}}, "site": {}}
    ws.delta[".git/hooks/pre-commit"] = {"k": "f", "b64": "ZXZpbAo=", "x": True}  # never sent; never graded
    assert ws.diff() == ("", [])


def test_a_fork_copies_the_git_and_site_state_and_counts_it_in_its_size():
    ws = Workspace.of({"a.py": Node("f", b"x\n")})
    ws.state = {"git": {".git/index": {"k": "f", "b64": "AAAA", "x": False}}, "site": {}}
    child = ws.fork()
    assert child.state == ws.state and child.state["git"] is not ws.state["git"]
    assert ws.size() == 3 + len(".git/index")
