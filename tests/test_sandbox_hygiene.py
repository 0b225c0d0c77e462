"""Hygiene between jobs, and a pool that heals itself: each attack run for real on both backends (the `pool`
fixture), or against a real server.

- no job finds an earlier job's data (program, files, stdin, environment, test spec, reference) in its own memory;
- a job whose set-up fails ends alone: every later job gets its own verdict;
- the kernel's OOM killer takes the job, never the machinery; a sandbox whose machinery broke is replaced, and
  readiness says so meanwhile; results carry no trace of ours;
- the sandbox shows no fact of the host; sandboxes end when their owner dies, and a clean stop leaves nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sandboxes import Job, JudgeJob, Limits, LintJob, MeasureJob, RunJob, SandboxPool, Status
from sandboxes.backends.base import SOCKETS_ROOT

from .pool_helpers import in_every_sandbox, settle

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits(wall_s=5, total_s=10, cpu_s=5, memory_mb=512)


def halves() -> tuple[str, str]:
    """A marker in two halves: jobs that plant it hold both together, scanners only apart."""
    return "RBHA" + secrets.token_hex(8), "RBHB" + secrets.token_hex(8)


# ------------------------------------------------------------------------------------------------- 1. memory

# Counts the places in this process's own memory where A is directly followed by B. A and B arrive apart (their own
# literals or variables), so a hit is memory that held the whole marker: someone else's data.
SCAN_FUNCTION = r'''
def count_marker(a, b):
    import ctypes
    a, b = a.encode(), b.encode()
    found = 0
    with open("/proc/self/maps") as f:
        regions = f.read().splitlines()
    for line in regions:
        fields = line.split()
        name = fields[5] if len(fields) > 5 else ""
        if "r" not in fields[1] or name in ("[vvar]", "[vvar_vclock]", "[vsyscall]"):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if hi - lo > 1 << 28:
            continue
        data = ctypes.string_at(lo, hi - lo)
        i = data.find(a)
        while i >= 0:
            found += data[i + len(a): i + len(a) + len(b)] == b
            i = data.find(a, i + 1)
    return found
'''

SCANNING_RUN = SCAN_FUNCTION + '''
import os
print("found", count_marker(os.environ["MARK_A"], os.environ["MARK_B"]))
'''


def planting_jobs(mark: str) -> list[Job]:
    """Every kind of job data the marker can travel in: code, stdin, files, environment, candidate, test spec,
    expected values, lint source, a measuring job's reference, accounted judge and run jobs."""
    code = f"# {mark}\nimport sys\ndata = sys.stdin.read() + open('data.txt').read()\nprint(len(data))\n"
    candidate = f"SECRET = {mark!r}\ndef echo(x):\n    return x\n"
    spec = {"kind": "function", "entry_point": "echo", "cases": [{"args": [mark], "expected": mark}]}
    assert_spec = {"kind": "assert", "test_code": f"assert echo({mark!r}) == {mark!r}  # {mark}\n"}
    measure = {"programs": {"ref": {"code": f"print({mark!r})\n", "module": "solution"},
                            "cand": {"code": "print(1)\n", "module": "solution"}},
               "order": ["ref", "cand"], "points": [{"name": "p", "io": [mark]}], "rounds": 1}
    return [
        RunJob(program={"code": code}, stdin=mark, files={"data.txt": mark}, env={"MARK": mark}, limits=LIMITS),
        RunJob(program={"argv": ["/bin/cat", "data.txt"]}, files={"data.txt": mark}, limits=LIMITS),
        JudgeJob(candidate={"code": candidate, "module": "solution"}, judge=spec, limits=LIMITS),
        JudgeJob(candidate={"code": candidate, "module": "solution"}, judge=assert_spec, limits=LIMITS),
        # accounted jobs (efficiency from the tests stage) are cleaned before their reply, not after it
        JudgeJob(candidate={"code": candidate, "module": "solution"}, judge=spec, limits=LIMITS, account=True),
        RunJob(program={"code": code}, stdin=mark, files={"data.txt": mark}, limits=LIMITS, account=True),
        LintJob(code=f"MARK = {mark!r}\n", language="python", limits=LIMITS),
        MeasureJob(measure=measure, limits=LIMITS),
    ]


def scanning_jobs(a: str, b: str) -> list[tuple[str, Job]]:
    """The places a job's code runs: a run job, a judge job's candidate, a judge's own test code, and a measuring
    job's candidate (after a reference that carries the whole marker, in the same job)."""
    candidate = SCAN_FUNCTION + f"\nFOUND = count_marker({a!r}, {b!r})\ndef found():\n    return FOUND\n"
    judge_scan = {"kind": "assert", "test_code": SCAN_FUNCTION + f"\nassert count_marker({a!r}, {b!r}) == 0\n"}
    spec = {"kind": "function", "entry_point": "found", "cases": [{"args": [], "expected": 0}]}
    mark = a + b
    measure = {"programs": {"ref": {"code": f"print({mark!r})\n", "module": "solution"},
                            "cand": {"code": candidate + "\nimport sys\nsys.exit(3 if FOUND else 0)\n",
                                     "module": "solution"}},
               "order": ["ref", "cand"], "points": [{"name": "p", "io": [""]}], "rounds": 2}
    return [
        ("run", RunJob(program={"code": SCANNING_RUN}, env={"MARK_A": a, "MARK_B": b}, limits=LIMITS)),
        ("candidate", JudgeJob(candidate={"code": candidate, "module": "solution"}, judge=spec, limits=LIMITS)),
        ("judge", JudgeJob(candidate={"code": "def f():\n    return 1\n", "module": "solution"},
                           judge=judge_scan, limits=LIMITS)),
        ("measured candidate", MeasureJob(measure=measure, limits=LIMITS)),
    ]


def scan_clean(kind: str, result) -> bool:
    if kind == "run":
        return result.status == Status.OK and result.stdout == "found 0\n"
    if kind == "measured candidate":
        runs = [r for r in result.runs if r["program"] == "cand"]
        return result.status == Status.OK and bool(runs) and all(r["status"] == "ok" for r in runs)
    cases = [e for e in result.events if e.get("event") == "case"]
    return result.status == Status.OK and len(cases) == 1 and cases[0]["passed"]


async def test_no_job_finds_an_earlier_job_s_data_in_its_own_memory(pool: SandboxPool) -> None:
    a, b = halves()
    for job in planting_jobs(a + b):
        for result in await in_every_sandbox(pool, job):
            assert result.status == Status.OK, result
    for kind, job in scanning_jobs(a, b):
        for result in await in_every_sandbox(pool, job):
            assert scan_clean(kind, result), f"the {kind} found the earlier jobs' data in its memory: {result}"


def test_the_scan_finds_a_marker_that_is_in_memory() -> None:
    """The scanner itself works: in a process that holds the whole marker, it finds it."""
    a, b = halves()
    code = SCAN_FUNCTION + f"\nheld = {a!r} + {b!r}\nprint(count_marker({a!r}, {b!r}) > 0)\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout == "True\n", out


def test_no_item_of_a_reward_batch_finds_another_item_s_data_in_memory(api) -> None:
    a, b = halves()
    mark = a + b
    planting = {"code": f"# {mark}\nprint(input())\n", "tests": {"kind": "io", "cases": [{"stdin": mark,
                                                                                        "stdout": mark}]},
                "reference_code": f"MARK = {mark!r}\nprint(input())\n"}
    scanning = {"code": SCAN_FUNCTION + f"\nprint(count_marker({a!r}, {b!r}))\n",
                "tests": {"kind": "io", "cases": [{"stdin": "", "stdout": "0"}]}}
    items = [{**planting, "id": f"plant-{i}"} for i in range(4)]
    first = api.post("/reward/batch", json={"items": items})
    assert first.status_code == 200, first.text
    assert [r["status"] for r in first.json()["results"]] == ["passed"] * 4, first.json()
    mixed = [{**(planting if i % 2 == 0 else scanning), "id": f"mixed-{i}"} for i in range(8)]
    second = api.post("/reward/batch", json={"items": mixed})
    assert second.status_code == 200, second.text
    results = second.json()["results"]
    scans = [r for r in results if r["id"] in {f"mixed-{i}" for i in range(1, 8, 2)}]
    assert [r["status"] for r in scans] == ["passed"] * 4, [(r["status"], r["execution"]["stdout"]) for r in scans]


# ------------------------------------------------------------------------------------------------- 2. set-up faults

BAD_INPUTS = {
    "lone surrogate in stdin": {"stdin": "ok \ud800 not text"},
    "lone surrogate in a file": {"files": {"data.txt": "\udfff"}},
    "NUL in a file name": {"files": {"a\x00b": "x"}},
    "a file and a folder of one name": {"files": {"d": "x", "d/e": "y"}},
    "dot": {"files": {".": "x"}},
    "trailing slash": {"files": {"d/": "x"}},
    "more files than inodes": {"files": {f"f{i}": "" for i in range(5000)}},
    "bad base64": {"files": {"b.bin": {"b64": "abc"}}},
    "missing binary": {"program": {"argv": ["/nonexistent/binary"]}},
}


@pytest.mark.parametrize("what", list(BAD_INPUTS))
async def test_a_job_whose_set_up_fails_ends_alone_and_later_jobs_get_their_own_verdicts(
    pool: SandboxPool, what: str
) -> None:
    await settle(pool)
    replaced = pool.stats.replaced
    bad = BAD_INPUTS[what]
    job = RunJob(program=bad.get("program", {"code": "print('never')"}), stdin=bad.get("stdin", ""),
                 files=bad.get("files"), limits=LIMITS)
    result = await pool.run(job)
    assert result.status == Status.SANDBOX_ERROR, result
    assert result.stdout == "" and result.exit_code is None, result
    for text in ("Traceback", "/opt/rewardbox", "runner.py", "/scratch"):
        assert text not in (result.error or ""), result.error
    # Concurrent jobs with their own exit codes and outputs, enough to visit every sandbox several times.
    codes = [f"import sys\nprint({i}, sys.stdin.read())\nsys.exit({i % 7})" for i in range(pool.size * 6)]
    results = await asyncio.gather(*(pool.run(RunJob(program={"code": c}, stdin=f"in{i}", limits=LIMITS))
                                     for i, c in enumerate(codes)))
    assert [(r.stdout, r.exit_code) for r in results] == [(f"{i} in{i}\n", i % 7) for i in range(len(codes))]
    assert [r.status for r in results] == [Status.OK if i % 7 == 0 else Status.RUNTIME_ERROR
                                           for i in range(len(codes))]
    judged = await pool.run(JudgeJob(candidate={"code": "def f(x):\n    return x + 1\n", "module": "solution"},
                                     judge={"kind": "function", "entry_point": "f",
                                            "cases": [{"args": [1], "expected": 2}]}, limits=LIMITS))
    assert [e["passed"] for e in judged.events if e.get("event") == "case"] == [True], judged
    await settle(pool)
    assert pool.stats.replaced == replaced, "a set-up failure of one job cost a sandbox"
    assert pool.stats.health_checks > 0 and pool.snapshot()["warm"], pool.snapshot()


async def test_a_candidate_whose_set_up_fails_ends_its_judge_job_alone(pool: SandboxPool) -> None:
    spec = {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": 1}]}
    bad = JudgeJob(candidate={"code": "def f():\n    return 1\n", "module": "solution", "files": {"d": "x",
                                                                                                "d/e": "y"}},
                   judge=spec, limits=LIMITS)
    result = await pool.run(bad)
    assert result.status == Status.SANDBOX_ERROR, result
    good = JudgeJob(candidate={"code": "def f():\n    return 1\n", "module": "solution"}, judge=spec,
                    limits=LIMITS)
    for r in await asyncio.gather(*(pool.run(good) for _ in range(pool.size * 2))):
        assert r.status == Status.OK and [e["passed"] for e in r.events if e.get("event") == "case"] == [True], r


ZYGOTE_CHANNEL = r"""
import socket, sys
sys.path.insert(0, sys.argv[1])
import runner, wire
ours, theirs = socket.socketpair()
zygote = runner.Zygote("zygote", ours, 0)
job_id = zygote.send({"role": "job"})
assert wire.recv(theirs)["id"] == job_id
wire.send(theirs, {"id": job_id - 1, "pid": 4242, "status": 0})  # an earlier job's exit report
for what in ("out of step", "gone"):
    try:
        zygote.reply(job_id)
        print("accepted")
    except runner.SandboxFault as e:
        print(e)
    theirs.close()
"""


def test_a_zygote_reply_about_another_job_is_a_fault_of_the_sandbox() -> None:
    """The runner's side of a zygote channel: a frame whose id is not the job's is never taken as its answer."""
    out = subprocess.run([sys.executable, "-c", ZYGOTE_CHANNEL, str(ROOT / "sandboxes" / "inside")],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == ["the zygote answered out of step", "the zygote is gone"], out


async def test_a_runner_answer_about_another_request_is_not_taken_as_the_result(tmp_path) -> None:
    """The host's side: the answer must carry the id of the request, or the sandbox is replaced."""
    from sandboxes.connection import HEADER, RunnerConnection, RunnerGone

    path = str(tmp_path / "runner.sock")

    async def fake_runner(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def send(obj: dict) -> None:
            data = json.dumps(obj).encode()
            writer.write(HEADER.pack(len(data)) + data)

        send({"ready": True})
        (length,) = HEADER.unpack(await reader.readexactly(HEADER.size))
        request = json.loads(await reader.readexactly(length))
        send({"id": request["id"] + 1, "status": "ok", "exit_code": 0})
        await writer.drain()

    server = await asyncio.start_unix_server(fake_runner, path)
    async with server:
        conn = await RunnerConnection.open(path, 10)
        with pytest.raises(RunnerGone, match="out of step"):
            await conn.request({"op": "run", "job": {}})
        conn.close()


# ------------------------------------------------------------------------------------------------- 3. OOM, health

MEMFD_FILL = r"""
import os, sys
if sys.argv[1:] == ["lower"]:  # a process of its own binary is dumpable: it would own its /proc files
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("0")
        print("lowered", flush=True)
    except OSError as e:
        print("could not lower:", e.strerror, flush=True)
print("score", open("/proc/self/oom_score_adj").read().strip(), flush=True)
chunk = b"x" * (1 << 20)
fds = []
while True:  # pages of memfds belong to no process's RSS, but count against the sandbox's memory cgroup
    fd = os.memfd_create("fill")
    fds.append(fd)
    for _ in range(60):
        os.write(fd, chunk)
"""


def _children(pid: int) -> list[int]:
    kids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            kids += [int(x) for x in f.read().split()]
    return kids


def _started(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def runner_host_pid(sandbox) -> int:
    handle = sandbox.handle
    if hasattr(handle, "container_id"):
        out = subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", handle.container_id], capture_output=True,
                             text=True, check=True, timeout=30).stdout
        return int(out)
    (runner,) = _children(handle.proc.pid)  # bwrap's monitor, outside; the runner is the sandbox's pid 1
    return runner


def zygote_host_pid(sandbox) -> int:
    """The runner's first child: the zygote of run jobs (forked before the others at start-up)."""
    return min(_children(runner_host_pid(sandbox)), key=_started)


def machinery(pool: SandboxPool) -> dict[str, list[int]]:
    """Host pids of every sandbox's runner and its root-owned children (zygotes, watchdog)."""
    out = {}
    for sb in list(pool._all):
        runner = runner_host_pid(sb)
        out[sb.handle.id] = [runner, *sorted(p for p in _children(runner) if os.stat(f"/proc/{p}").st_uid == 0)]
    return out


@pytest.mark.parametrize("how", ["python", "exec-and-lower-its-score"])
async def test_memory_that_no_process_owns_gets_the_job_killed_not_the_machinery(pool: SandboxPool, how) -> None:
    await settle(pool)
    before = machinery(pool)
    replaced = pool.stats.replaced
    limits = Limits(wall_s=20, total_s=20, cpu_s=20, memory_mb=256, file_size_mb=64, nofile=64)
    program = ({"code": MEMFD_FILL} if how == "python" else
               {"argv": ["/usr/bin/python3", "-c", MEMFD_FILL, "lower"]})
    result = await pool.run(RunJob(program=program, limits=limits))
    assert result.status == Status.MEMORY_LIMIT, result
    assert "score 1000" in result.stdout and "lowered" not in result.stdout.replace("could not lower", ""), result
    await settle(pool)
    assert pool.stats.replaced == replaced, "the machinery of a sandbox was killed"
    assert machinery(pool) == before, "a runner or zygote was killed"
    for r in await asyncio.gather(*(pool.run(RunJob(program={"code": "print(6 * 7)"}, limits=LIMITS))
                                    for _ in range(pool.size * 3))):
        assert r.status == Status.OK and r.stdout == "42\n", r


async def test_a_sandbox_whose_zygote_dies_while_idle_is_replaced_and_readiness_shows_it(pool: SandboxPool) -> None:
    await settle(pool)
    replaced = pool.stats.replaced
    victim = next(iter(pool._all))
    os.kill(zygote_host_pid(victim), signal.SIGKILL)
    saw_unready = False
    deadline = time.monotonic() + 120
    while victim in pool._all or not pool.snapshot()["warm"]:
        saw_unready = saw_unready or not pool.snapshot()["warm"]
        assert time.monotonic() < deadline, f"the broken sandbox was never replaced: {pool.snapshot()}"
        await asyncio.sleep(0.005)
    assert saw_unready, "readiness never reflected the broken sandbox"
    assert pool.stats.replaced == replaced + 1
    results = await asyncio.gather(*(pool.run(RunJob(program={"code": "print(1)"}, limits=LIMITS))
                                     for _ in range(pool.size * 3)))
    assert all(r.status == Status.OK for r in results), results
    assert victim.handle.id not in {r.sandbox_id for r in results}


async def test_a_zygote_killed_during_a_job_fails_that_job_alone_without_our_trace(pool: SandboxPool) -> None:
    await settle(pool)
    replaced = pool.stats.replaced
    sleeper = asyncio.create_task(pool.run(RunJob(program={"code": "import time\ntime.sleep(3)"},
                                                  limits=LIMITS)))
    deadline = time.monotonic() + 30
    while pool.snapshot()["busy"] < 1:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.5)  # the job is running
    busy = [sb for sb in pool._all if not sb.broken and sb not in pool._idle_now]
    assert len(busy) == 1
    os.kill(zygote_host_pid(busy[0]), signal.SIGKILL)
    result = await sleeper
    assert result.status == Status.SANDBOX_ERROR, result
    assert result.error and "zygote" in result.error, result
    for text in ("Traceback", "File \"", "/opt/rewardbox", ".py"):
        assert text not in result.error, result.error
    await settle(pool)
    assert pool.stats.replaced == replaced + 1
    assert busy[0].handle.id not in {sb.handle.id for sb in pool._all}
    results = await asyncio.gather(*(pool.run(RunJob(program={"code": "print(2)"}, limits=LIMITS))
                                     for _ in range(pool.size * 2)))
    assert all(r.status == Status.OK and r.stdout == "2\n" for r in results), results


def test_a_sandbox_fault_is_infra_error_never_cached_and_readiness_drops_meanwhile() -> None:
    """End to end over HTTP: the zygotes of the server's sandboxes die while an item runs."""
    import concurrent.futures

    import httpx

    from .conftest import start_server, stop_server

    proc, url = start_server({"REWARDBOX_BACKEND": "docker"})
    try:
        owner = f"rewardbox.owner={os.uname().nodename}:{proc.pid}"
        containers = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", f"label={owner}"],
                                    capture_output=True, text=True, check=True, timeout=30).stdout.split()
        assert len(containers) == 2, containers
        code = "import time\ntime.sleep(2)\nprint(input())\n"
        item = {"code": code, "profile": "binary", "tests": {"kind": "io", "cases": [{"stdin": "x", "stdout": "x"}]}}
        with httpx.Client(base_url=url, timeout=120) as client, concurrent.futures.ThreadPoolExecutor(1) as threads:
            first = threads.submit(client.post, "/reward", json=item)
            time.sleep(1.0)  # the item's job is running
            for container in containers:
                pid = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", container], capture_output=True,
                                         text=True, check=True, timeout=30).stdout)
                zygotes = _children(pid)
                # the first zygote, and the zygote the item's job process was forked from (io cases: the lean one)
                for zygote in {min(zygotes, key=_started), *(z for z in zygotes if _children(z))}:
                    os.kill(zygote, signal.SIGKILL)
            codes = []
            deadline = time.monotonic() + 120
            while not codes or codes[-1] != 200 or 503 not in codes:
                assert time.monotonic() < deadline, f"readiness never dropped and came back: {codes[-20:]}"
                codes.append(client.get("/readyz").status_code)
                time.sleep(0.01)
            broken = first.result().json()
            assert broken["status"] == "infra_error" and broken["reward"] is None, broken
            again = client.post("/reward", json=item).json()
        assert again["status"] == "passed" and again["reward"] == 1.0, again
        assert not (again.get("details") or {}).get("cache_hit"), "a result of the broken sandbox was cached"
    finally:
        stop_server(proc)


# ------------------------------------------------------------------------------------------------- 6. host facts

HOST_FACTS = r"""
import json, os
out = {"nodename": os.uname().nodename}
for path in ("/proc/1/cmdline", "/proc/1/environ", "/proc/self/mountinfo", "/proc/self/cgroup", "/etc/hostname",
             "/etc/hosts", "/etc/resolv.conf", "/proc/self/environ"):
    try:
        with open(path, "rb") as f:
            out[path] = f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError as e:
        out[path] = "denied: " + type(e).__name__
print(json.dumps(out))
"""


def _host_nameservers() -> list[str]:
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return []
    return [line.split()[1] for line in lines if line.startswith(("nameserver", "search")) and len(line.split()) > 1]


async def test_the_sandbox_shows_no_fact_of_the_host(pool: SandboxPool) -> None:
    result = await pool.run(RunJob(program={"code": HOST_FACTS}, limits=LIMITS))
    assert result.status == Status.OK, result
    seen = json.loads(result.stdout)
    everything = "\n".join(seen.values())
    assert seen["nodename"] == "sandbox" and seen["/etc/hostname"].strip() == "sandbox", seen
    assert seen["/proc/1/cmdline"].startswith("/usr/bin/python3 -s /opt/rewardbox/runner.py "), seen
    assert seen["/proc/1/environ"].startswith("denied"), seen
    assert {line.split(":", 2)[2] for line in seen["/proc/self/cgroup"].splitlines()} == {"/"}, seen
    host = socket.gethostname()
    # Fixed paths of our own (/tmp/rewardbox-sockets, /opt/rewardbox) say nothing; the owner's pid in a folder name,
    # the checkout's location, cgroup names and the host's resolver would.
    facts = {"the checkout": str(ROOT), "the owner's pid": f"{SOCKETS_ROOT}/{os.getpid()}",
             "the cgroup names": "rewardbox/o-"}
    facts |= {f"the host's resolver {ns}": ns for ns in _host_nameservers() if ns not in ("127.0.0.1", ".")}
    for what, text in facts.items():
        assert text not in everything, f"{what} ({text!r}) is visible in the sandbox: {seen}"
    if host != "sandbox":
        for path in ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/proc/1/cmdline"):
            assert host not in seen[path].split(), (path, seen[path])


# ------------------------------------------------------------------------------------------------- 7. owner's death

OWNER = r"""
import asyncio, json, os, sys, time
sys.path.insert(0, sys.argv[1])
from sandboxes import RunJob, SandboxPool, choose_backend
from sandboxes.backends.base import socket_root

async def main(backend, mode):
    pool = SandboxPool(choose_backend(backend), size=2, acquire_timeout_s=120)
    await pool.start()
    result = await pool.run(RunJob(program={"code": "print('up')"}))
    handles = [sb.handle for sb in pool._all]
    root = str(socket_root())
    if mode == "close":
        await pool.close()
        print(json.dumps({"ok": result.stdout, "socket_root": root, "exists": os.path.exists(root),
                          "left": os.listdir(os.path.dirname(root)) if os.path.exists(root) else []}), flush=True)
        return
    ids = [getattr(h, "container_id", None) or h.proc.pid for h in handles]
    print(json.dumps({"ok": result.stdout, "ids": ids, "socket_root": root}), flush=True)
    if mode == "busy":  # the owner dies while both sandboxes run a long job
        asyncio.ensure_future(asyncio.gather(*(pool.run(RunJob(program={"code": "import time\ntime.sleep(60)"}))
                                               for _ in range(2))))
    await asyncio.sleep(3600)

asyncio.run(main(sys.argv[2], sys.argv[3]))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _descendants(pid: int) -> list[int]:
    try:
        kids = _children(pid)
    except OSError:
        return []
    return kids + [d for k in kids for d in _descendants(k)]


def _container_running(container_id: str) -> bool:
    out = subprocess.run(["docker", "inspect", "-f", "{{.State.Running}}", container_id], capture_output=True,
                         text=True, timeout=30)
    return out.returncode == 0 and out.stdout.strip() == "true"


@pytest.mark.parametrize("mode", ["idle", "busy"])
async def test_sandboxes_end_by_themselves_within_seconds_of_their_owner_s_death(pool: SandboxPool, mode) -> None:
    backend = pool.backend.name
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(ROOT), backend, mode], stdout=subprocess.PIPE,
                             text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(owner.stdout.readline), 180)
        started = json.loads(line)
        assert started["ok"] == "up\n", started
        if mode == "busy":
            await asyncio.sleep(1.0)  # both long jobs are running
        if backend == "docker":
            ids = started["ids"]
            assert all(_container_running(c) for c in ids)
        else:
            ids = [p for bwrap in started["ids"] for p in [bwrap, *_descendants(bwrap)]]
            assert len(ids) >= 2 * 4 and all(_alive(p) for p in ids)  # bwrap, runner, zygotes, watchdog
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
    deadline = time.monotonic() + 20  # "within seconds", generous for a loaded machine
    alive = _container_running if backend == "docker" else _alive
    while any(alive(i) for i in ids):
        assert time.monotonic() < deadline, f"sandboxes outlived their owner: {[i for i in ids if alive(i)]}"
        await asyncio.sleep(0.1)
    if backend == "docker":
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, timeout=60)
    subprocess.run(["rm", "-rf", started["socket_root"]], timeout=30)


async def test_a_clean_stop_leaves_no_socket_folder(pool: SandboxPool) -> None:
    out = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", OWNER, str(ROOT), pool.backend.name, "close"],
                                  capture_output=True, text=True, timeout=300)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["ok"] == "up\n", report
    assert not report["exists"], f"{report['socket_root']} is left behind: {report['left']}"
