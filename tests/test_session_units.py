"""Pure logic of agent sessions, no sandbox: the host's workspace overlay (paths, links, directories, diff), forks
as copies, the admission caps, admission by the wait for a sandbox, and the end of a session (410 vs 404)."""

from __future__ import annotations

import asyncio
import base64

import pytest
from prometheus_client import CollectorRegistry

from sandboxes import Result, Status
from service.errors import Overloaded
from service.session_models import SessionLimits
from service.session_workspace import Node, PathError, Workspace
from service.sessions import FIRST_GUESS_S, SessionGone, SessionManager, SessionSettings

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


class HeldPool:
    """Stands in for the session pool (a SandboxPool, tested for real in tests/test_sessions.py): `size`
    sandboxes, each job held until the test lets it go."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.running = 0
        self.go = asyncio.Event()

    async def run(self, job) -> Result:
        self.running += 1
        await self.go.wait()
        return Result(status=Status.OK, exit_code=0, events=[{"event": "session", "delta": {}}])


async def running(pool: HeldPool, n: int) -> None:
    """Until n jobs are in the pool (each command takes a few turns of the event loop to get there)."""
    for _ in range(1000):
        if pool.running >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"{pool.running} jobs running, {n} expected")


def _manager(pool=None, **settings) -> SessionManager:
    async def fetch(repo_id: str) -> bytes | None:
        from rewardbox.archive import repo_archive
        from service.repo_archive import ArchiveLimits, normalize

        return normalize(repo_archive({"a": b"x" * 100}), ArchiveLimits()).data

    async def score(items):
        raise AssertionError("not scored here")

    return SessionManager(pool=pool or HeldPool(2), fetch=fetch, score=score, registry=CollectorRegistry(),  # type: ignore[arg-type]
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


def test_a_command_that_would_wait_past_the_bound_is_refused_at_once_and_so_is_a_new_session():
    async def main() -> None:
        pool = HeldPool(2)
        m = _manager(pool, max_wait_s=1.5 * FIRST_GUESS_S)  # 2 running, 4 queued: a wait of 2 guesses
        sids = [(await m.create("r" * 64, 600, SessionLimits())).id for _ in range(7)]
        admitted = [asyncio.create_task(m.exec(sid, "sleep 9", 30, None)) for sid in sids[:6]]
        await running(pool, 2)
        with pytest.raises(Overloaded, match="queued ahead") as refused:
            await m.exec(sids[6], "true", 30, None)
        assert refused.value.retry_after_s >= 1
        with pytest.raises(Overloaded, match="queued ahead"):
            await m.create("r" * 64, 600, SessionLimits())
        pool.go.set()
        assert [a["status"] for a in await asyncio.gather(*admitted)] == ["ok"] * 6
        assert (await m.exec(sids[6], "true", 30, None))["status"] == "ok"  # the line moved: admitted again

    asyncio.run(main())


def test_the_commands_queued_on_one_session_count_in_its_next_commands_wait():
    async def main() -> None:
        pool = HeldPool(4)
        m = _manager(pool, max_wait_s=2.5 * FIRST_GUESS_S)
        sid = (await m.create("r" * 64, 600, SessionLimits())).id
        first = [asyncio.create_task(m.exec(sid, "sleep 9", 30, None)) for _ in range(3)]  # run one at a time
        await running(pool, 1)
        with pytest.raises(Overloaded):
            await m.exec(sid, "true", 30, None)  # 3 s of this session's commands ahead, sandboxes free or not
        other = (await m.create("r" * 64, 600, SessionLimits())).id
        pool.go.set()
        assert (await m.exec(other, "true", 30, None))["status"] == "ok"
        await asyncio.gather(*first)

    asyncio.run(main())


def test_a_command_not_given_a_sandbox_within_twice_the_bound_is_refused_and_nothing_runs():
    async def main() -> None:
        pool = HeldPool(1)
        m = _manager(pool, max_wait_s=0.05)
        a, b = [(await m.create("r" * 64, 600, SessionLimits())).id for _ in range(2)]
        m.line.hold("exec").observe(1, 0.001)  # learned: commands are quick, so the next is admitted
        held = asyncio.create_task(m.exec(a, "sleep 9", 30, None))
        await running(pool, 1)
        with pytest.raises(Overloaded, match="did not get a sandbox"):
            await m.exec(b, "true", 30, None)
        assert pool.running == 1 and m.get(b).execs == 0
        pool.go.set()
        await held

    asyncio.run(main())
