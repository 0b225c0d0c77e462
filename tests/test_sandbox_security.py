"""Attacks against the sandbox, each run for real through ``pool.run(Job(...))`` on both backends (see conftest.py).

Every test asserts four things:
- the status the attack must end with (or "ok" with the attack having had no effect),
- that the job ended within its own limit plus the pool's overhead (SLACK_S),
- that the pool is still healthy afterwards (follow-up jobs return ok),
- that nothing of the attack is left behind: follow-up probes run until they have covered every sandbox of the pool,
  including the attacked one, and find no process of a job uid, no file in /tmp or the working directory, no System V
  IPC object, and the scratch file systems empty again.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from sandboxes import Job, JudgeJob, Limits, Result, RunJob, SandboxPool, SandboxSpec, Status

from .pool_helpers import settle

# Set at import, i.e. at collection, before the session pools start: no sandbox may ever see it.
HOST_SECRET = "RBSECRET" + secrets.token_hex(16)
os.environ["REWARDBOX_TEST_SECRET"] = HOST_SECRET

LIMITS = Limits(wall_s=2, total_s=4, cpu_s=2, memory_mb=256, output_bytes=64 << 10, file_size_mb=16, nofile=64,
                nproc=64)
SLACK_S = 1.5  # the pool's own overhead on top of a job's limit: dispatch, result transfer, a kill landing
PROBE_LIMITS = Limits(wall_s=5, total_s=5, cpu_s=5, memory_mb=256)

X86_64 = platform.machine() in ("x86_64", "AMD64")


# ------------------------------------------------------------------------------------------------- helpers


async def run_timed(pool: SandboxPool, job: Job) -> tuple[Result, float]:
    started = time.monotonic()
    result = await pool.run(job)
    return result, time.monotonic() - started


def run_job(code: str, limits: Limits = LIMITS, **kw) -> Job:
    return RunJob(program={"code": code}, limits=limits, **kw)


def assert_in_time(elapsed: float, job: Job) -> None:
    own = job.limits.total_s if job.op == "judge" else job.limits.wall_s
    assert elapsed <= own + SLACK_S, f"the job took {elapsed:.2f}s, limit {own}s (+{SLACK_S}s)"


def report_of(result: Result) -> dict:
    assert result.stdout, f"no report from the job: {result}"
    return json.loads(result.stdout.strip().splitlines()[-1])


# A job that looks at what an earlier job may have left: processes of any non-root uid (every job uid is non-root;
# the runner and its zygotes are root), files in /tmp, /mnt, the working directory, /dev/shm and /dev/mqueue, System V
# IPC objects, and the fill level of the scratch file systems.
PROBE = r"""
import json, os, time
time.sleep(float(os.environ.get("PROBE_DELAY", "0")))
me = os.getpid()
procs = []
# The processes meant to outlive jobs: the runner's warm linters (node_lint.py), each under its own uid: eslint
# (job uid + 2) and pylint (job uid + 3).
# Each is told apart by its uid and its script (the interpreter's path and flags are the runner's business).
LINTERS = {os.getuid() + 2: "/opt/rewardbox/eslint_server.js ", os.getuid() + 3: "/opt/rewardbox/lint_server.py "}
for name in os.listdir("/proc"):
    if not name.isdigit() or int(name) == me:
        continue
    try:
        with open(f"/proc/{name}/status") as f:
            status = f.read()
    except OSError:
        continue
    uid = int(status.split("Uid:")[1].split()[0])
    if uid != 0:
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            cmd = "?"
        if not (uid in LINTERS and cmd.endswith(LINTERS[uid])):
            procs.append([int(name), uid, status.split("State:")[1].split()[0], cmd])

def listing(root):
    found = []
    if not os.path.lexists(root):
        return found
    for dirpath, dirnames, filenames in os.walk(root, onerror=lambda e: found.append("unreadable: " + str(e))):
        found += [os.path.join(dirpath, n) for n in dirnames + filenames]
    return found

def usage(path):
    st = os.statvfs(path)
    return {"used_blocks": st.f_blocks - st.f_bfree, "blocks": st.f_blocks, "used_inodes": st.f_files - st.f_ffree}

ipc = []  # System V IPC objects outlive their creator: none may exist
for kind in ("shm", "msg", "sem"):
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            ipc += [kind + ": " + line.strip() for line in f.readlines()[1:]]
    except OSError:
        pass
print(json.dumps({"uid": os.getuid(), "cwd": os.getcwd(), "procs": procs, "ipc": ipc,
                  "left": sum((listing(d) for d in ("/tmp", "/mnt", ".", "/dev/shm", "/dev/mqueue")), []),
                  "tmp": usage("/tmp"), "mnt": usage("/mnt"), "scratch": usage(".")}))
"""


async def probe(pool: SandboxPool, delay_s: float = 0.0) -> tuple[Result, dict]:
    job = run_job(PROBE, PROBE_LIMITS, env={"PROBE_DELAY": str(delay_s)})
    result = await pool.run(job)
    assert result.status == Status.OK, f"follow-up job failed: {result}"
    return result, report_of(result)


async def assert_nothing_left(pool: SandboxPool, attacked: str | None, delay_s: float = 0.0) -> None:
    """Healthy pool, and the attack left nothing behind, in the attacked sandbox in particular.

    Once every sandbox is idle again, the pool hands them out in FIFO order, so serial probes visit every sandbox;
    keep going (at least pool.size * 2 probes) until the attacked sandbox has been seen too: had it been replaced
    (its runner could not clean up), it would never come back and the test fails. `delay_s` lets a delayed action of a
    leftover process (a daemon writing a file later) happen before the probe looks."""
    await settle(pool)  # the attacked sandbox's clean-up is over: it is back in the queue (or was replaced)
    seen: set[str] = set()
    runs = 0
    while runs < pool.size * 2 or attacked not in seen:
        assert runs < pool.size * 4, f"never got the attacked sandbox {attacked} back (saw {seen})"
        result, report = await probe(pool, delay_s)
        runs += 1
        seen.add(result.sandbox_id)
        where = f"sandbox {result.sandbox_id}"
        assert report["procs"] == [], f"{where}: processes left behind: {report['procs']}"
        assert report["left"] == [], f"{where}: files left behind: {report['left']}"
        assert report["ipc"] == [], f"{where}: System V IPC objects left behind: {report['ipc']}"
        for fs in ("tmp", "mnt", "scratch"):
            # an empty tmpfs still counts a few blocks and the working directory's inode
            assert report[fs]["used_blocks"] <= 64, f"{where}: {fs} still holds data: {report[fs]}"
            assert report[fs]["used_inodes"] <= 8, f"{where}: {fs} still holds inodes: {report[fs]}"
    await settle(pool)  # every sandbox back in the pool: none was lost


# ------------------------------------------------------------------------------------------------- resource bombs

FORK_BOMB = r"""
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


FORK_BOMB_ESCAPING = r"""
import os
# every child leaves the job's process group and session: the kill of the group cannot reach it
while True:
    try:
        if os.fork() == 0:
            os.setsid()
    except OSError:
        pass
"""


# Busy processes outside the job's process group and session, as many as nproc allows: on a 2-core box they outnumber
# the runner and its zygotes 60 to 1 for the CPU, so the deadline's kill and its report must not wait on the scheduler.
BUSY_ESCAPED_CHILDREN = r"""
import os
for _ in range(60):
    try:
        if os.fork() == 0:
            os.setsid()
            while True:
                pass
    except OSError:
        break
while True:
    pass
"""


THREAD_BOMB = r"""
import threading, time
started = 0
while True:
    try:
        threading.Thread(target=time.sleep, args=(1000,), daemon=False).start()
        started += 1
    except (RuntimeError, MemoryError):
        pass
"""


# Each runs until the wall limit: it must end as a timeout on time (the kill and its report not waiting on a
# scheduler the bomb saturates) and leave no process or file behind.
PROCESS_BOMBS = {"fork": FORK_BOMB, "fork-leaving-the-group": FORK_BOMB_ESCAPING,
                 "busy-leaving-the-session": BUSY_ESCAPED_CHILDREN, "threads": THREAD_BOMB}


@pytest.mark.parametrize("bomb", PROCESS_BOMBS)
async def test_process_bomb_is_stopped_within_the_wall_limit_and_cleaned_up(pool: SandboxPool, bomb: str) -> None:
    job = run_job(PROCESS_BOMBS[bomb])
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.TIMEOUT, result
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


MEMORY_BOMB = r"""
hoard = []
while True:
    hoard.append(bytearray(8 << 20))
"""


async def test_memory_bomb_stops_at_the_address_space_limit(pool: SandboxPool) -> None:
    job = run_job(MEMORY_BOMB)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.MEMORY_LIMIT, result
    assert result.peak_memory_kb <= LIMITS.memory_mb * 1024, result.peak_memory_kb
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


# Each child stays below RLIMIT_AS (MB < memory_mb), but together they need far more than the sandbox's memory
# cgroup allows: the kernel's OOM killer, not the rlimit, has to stop them.
MEMORY_BOMB_MANY = r"""
import json, mmap, os, time
N, MB = int(os.environ["N"]), int(os.environ["MB"])
kids = []
for _ in range(N):
    pid = os.fork()
    if pid == 0:
        try:
            m = mmap.mmap(-1, MB << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE)
        except (MemoryError, OSError):
            os._exit(3)  # the rlimit stopped it: the test is mis-sized
        time.sleep(0.3)
        os._exit(0)
    kids.append(pid)
print(json.dumps({"statuses": [os.waitpid(p, 0)[1] for p in kids]}))
"""


async def test_memory_bomb_of_many_processes_is_stopped_by_the_sandbox_memory_cgroup(pool: SandboxPool) -> None:
    per_child_mb, children = 600, 4
    total_mb = per_child_mb * children
    assert total_mb > SandboxSpec().memory_mb * 1.4, "the attack must overshoot the sandbox's memory limit"
    # Generous time: under a busy host the kernel can spend seconds reclaiming before its OOM killer acts.
    limits = Limits(wall_s=10, total_s=10, cpu_s=10, memory_mb=per_child_mb + 100)
    job = run_job(MEMORY_BOMB_MANY, limits, env={"N": str(children), "MB": str(per_child_mb)})
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.MEMORY_LIMIT, result
    statuses = report_of(result)["statuses"]
    assert 3 << 8 not in statuses, "a child hit RLIMIT_AS: the cgroup was not what stopped the attack"
    assert 9 in statuses, f"no child was OOM-killed: {statuses}"  # WTERMSIG == SIGKILL
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- file systems

FILL = r"""
import errno, json, os
chunk = b"\1" * (4 << 20)  # below RLIMIT_FSIZE: the file system, not the rlimit, has to say no
out = {}
for root in ("/tmp", "/mnt", os.getcwd()):
    written, err = 0, None
    try:
        for i in range(1000):
            with open(os.path.join(root, f"fill{i}"), "wb") as f:
                f.write(chunk)
            written += len(chunk)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    out[root] = {"written_mb": written >> 20, "error": err}
print(json.dumps(out))
"""


async def test_filling_tmp_and_scratch_stops_at_the_tmpfs_size_and_is_wiped(pool: SandboxPool) -> None:
    job = run_job(FILL)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    for root, fill in report.items():
        assert fill["error"] == "ENOSPC", (root, fill)
        assert fill["written_mb"] <= SandboxSpec().tmpfs_mb, (root, fill)
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


DEV_SHM = r"""
import errno, json, os
out = {"exists": os.path.exists("/dev/shm"), "written": 0, "error": None, "shm_open": None}
try:
    with open("/dev/shm/fill", "wb") as f:
        for _ in range(64):
            f.write(b"\1" * (1 << 20))
            f.flush()
            out["written"] += 1 << 20
except OSError as e:
    out["error"] = errno.errorcode.get(e.errno, str(e.errno))
try:  # POSIX shared memory, as multiprocessing uses it
    import _posixshmem
    _posixshmem.shm_open("/rb-test", os.O_CREAT | os.O_RDWR, 0o600)
    out["shm_open"] = "created"
except OSError as e:
    out["shm_open"] = errno.errorcode.get(e.errno, str(e.errno))
# /dev itself must not be a writable file system either
for path in ("/dev/fill", "/dev/mqueue/fill"):
    try:
        open(path, "wb").close()
        out[path] = "created"
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
"""


async def test_dev_shm_is_missing_or_not_writable(pool: SandboxPool) -> None:
    job = run_job(DEV_SHM)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    assert report["written"] == 0, report
    assert report["error"] in ("ENOENT", "EACCES", "EROFS"), report
    assert report["shm_open"] != "created", report
    assert report["/dev/fill"] != "created", report
    assert report["/dev/mqueue/fill"] != "created", report
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


INODE_FILL = r"""
import errno, json, os
out = {}
for root in ("/tmp", "/mnt", os.getcwd()):
    n, err = 0, None
    try:
        while n < 200000:
            os.close(os.open(os.path.join(root, f"i{n}"), os.O_CREAT | os.O_WRONLY, 0o600))
            n += 1
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    out[root] = {"files": n, "error": err}
print(json.dumps(out))
"""


async def test_inode_fill_stops_at_the_tmpfs_inode_limit_and_is_wiped(pool: SandboxPool) -> None:
    job = run_job(INODE_FILL)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    for root, fill in report_of(result).items():
        assert fill["error"] == "ENOSPC", (root, fill)
        assert fill["files"] <= SandboxSpec().tmpfs_inodes, (root, fill)
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


DEEP_TREE = r"""
import json, os
# Past PATH_MAX (4096) and past Python's recursion limit: neither may let a part of the tree survive the wipe.
depths = {}
for root, name, depth in (("/tmp", "d" * 200, 40), (os.getcwd(), "e", 3000)):
    os.chdir(root)
    for _ in range(depth):
        os.mkdir(name)
        os.chdir(name)
    with open("leftover", "w") as f:
        f.write("state for the next job")
    os.chmod(".", 0)  # and unreadable for good measure
    depths[root] = len(root) + depth * (len(name) + 1)
print(json.dumps(depths))
"""


async def test_a_tree_deeper_than_path_max_is_wiped_after_the_job(pool: SandboxPool) -> None:
    job = run_job(DEEP_TREE)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    assert all(length > 4096 for length in report_of(result).values()), result.stdout
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- output

OUTPUT_FLOOD = r"""
import os, sys
stream = sys.stdout if os.environ["STREAM"] == "stdout" else sys.stderr
block = "x" * 65536
while True:
    stream.write(block)
"""

SIDE_CHANNEL_FLOOD = r"""
import json, os, time
# Try every way to reach a host-side log: the runner's own stdout/stderr (docker logs, runner.log), the console,
# the kernel log. None may open; write hard through whatever does, for the whole wall time.
targets = ["/dev/console", "/dev/kmsg", "/dev/tty", "/proc/1/fd/1", "/proc/1/fd/2"]
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        targets += [f"/proc/{name}/fd/1", f"/proc/{name}/fd/2"]
opened = []
for path in targets:
    try:
        opened.append((path, os.open(path, os.O_WRONLY)))
    except OSError:
        pass
print(json.dumps({"opened": [p for p, _ in opened]}), flush=True)
block = b"y" * 65536
deadline = time.monotonic() + 1.5
while time.monotonic() < deadline and opened:
    for _, fd in opened:
        try:
            os.write(fd, block)
        except OSError:
            pass
"""


def _host_log_usage(pool: SandboxPool) -> dict[str, int]:
    usage = {"tmp": shutil.disk_usage(tempfile.gettempdir()).used}
    if pool.backend.name == "docker" and os.path.isdir("/var/lib/docker"):
        usage["docker"] = shutil.disk_usage("/var/lib/docker").used
    sock_root = Path(tempfile.gettempdir()) / "rewardbox-sockets"
    usage["runner_logs"] = sum(p.stat().st_size for p in sock_root.glob("*/runner.log"))
    return usage


def _assert_docker_logs_go_nowhere(pool: SandboxPool) -> None:
    if pool.backend.name != "docker":
        return
    from sandboxes.backends.base import owner_tag

    containers = pool.backend.client.containers.list(filters={"label": f"rewardbox.owner={owner_tag()}"})
    assert containers, "no sandbox container found"
    for c in containers:
        assert c.attrs["HostConfig"]["LogConfig"]["Type"] == "none", c.attrs["HostConfig"]["LogConfig"]


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
async def test_output_flood_is_cut_at_the_output_cap_without_touching_the_host_disk(
    pool: SandboxPool, stream: str
) -> None:
    _assert_docker_logs_go_nowhere(pool)
    before = _host_log_usage(pool)
    job = run_job(OUTPUT_FLOOD, env={"STREAM": stream})
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OUTPUT_LIMIT, result
    captured = result.stdout if stream == "stdout" else result.stderr
    assert len(captured.encode()) == LIMITS.output_bytes
    assert set(captured) == {"x"}
    assert (result.stdout_truncated, result.stderr_truncated) == (stream == "stdout", stream == "stderr")
    assert_in_time(elapsed, job)

    job = run_job(SIDE_CHANNEL_FLOOD)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    assert report_of(result)["opened"] == [], "a job could open a host-side log"
    assert_in_time(elapsed, job)

    after = _host_log_usage(pool)
    assert after["runner_logs"] <= before["runner_logs"] + 4096, (before, after)
    for key in ("tmp", "docker"):
        if key in before:
            assert after[key] - before[key] < 8 << 20, f"host disk grew during the flood: {before} -> {after}"
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- time

INFINITE_LOOP = "while True:\n    pass\n"


async def test_infinite_loop_times_out_within_the_limit(pool: SandboxPool) -> None:
    job = run_job(INFINITE_LOOP)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.TIMEOUT, result
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


SLEEP_IGNORING_SIGTERM = r"""
import signal, time
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):
    signal.signal(sig, signal.SIG_IGN)
print("sleeping", flush=True)
time.sleep(1000)
"""


async def test_sleep_with_sigterm_ignored_times_out_within_the_wall_limit(pool: SandboxPool) -> None:
    job = run_job(SLEEP_IGNORING_SIGTERM)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.TIMEOUT, result
    assert result.stdout == "sleeping\n"
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


DAEMON = r"""
import os, sys, time
KEEP_PIPES = os.environ["KEEP_PIPES"] == "1"
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        if not KEEP_PIPES:
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
        # a daemon that, if it survived the job, would leave traces for the next jobs
        for i in range(100):
            time.sleep(0.1)
            for d in ("/tmp", "/scratch/c"):
                try:
                    with open(f"{d}/daemon-was-here-{i}", "w") as f:
                        f.write("alive")
                except OSError:
                    pass
        os._exit(0)
    os._exit(0)
os.wait()
print("parent done", flush=True)
if os.environ["PARENT_HANGS"] == "1":
    time.sleep(1000)
"""


@pytest.mark.parametrize(
    "keep_pipes,parent_hangs",
    [("0", "0"), ("1", "0"), ("1", "1")],
    ids=["detached", "holding-the-pipes", "holding-the-pipes-parent-times-out"],
)
async def test_double_forked_daemon_does_not_survive_the_job(
    pool: SandboxPool, keep_pipes: str, parent_hangs: str
) -> None:
    job = run_job(DAEMON, env={"KEEP_PIPES": keep_pipes, "PARENT_HANGS": parent_hangs})
    result, elapsed = await run_timed(pool, job)
    assert result.status == (Status.TIMEOUT if parent_hangs == "1" else Status.OK), result
    assert result.stdout == "parent done\n"
    assert_in_time(elapsed, job)
    # the probes wait long enough for a surviving daemon to have written its files
    await assert_nothing_left(pool, result.sandbox_id, delay_s=0.3)


# ------------------------------------------------------------------------------------------------- network

NETWORK = r"""
import errno, json, os, socket
out = {}

def attempt(key, fn):
    try:
        fn()
        out[key] = "succeeded"
    except OSError as e:
        out[key] = errno.errorcode.get(e.errno, type(e).__name__) if e.errno else type(e).__name__

for family, host, port in json.loads(os.environ["TARGETS"]):
    def connect(family=family, host=host, port=port):
        s = socket.socket(getattr(socket, family), socket.SOCK_STREAM)
        s.settimeout(1.0)
        try:
            s.connect((host, port))
        finally:
            s.close()
    attempt(f"tcp {host}:{port}", connect)

def dns():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1.0)
    query = bytes.fromhex("abcd01000001000000000000076578616d706c6503636f6d0000010001")  # A example.com
    s.sendto(query, ("8.8.8.8", 53))
    s.recvfrom(512)
attempt("udp 8.8.8.8:53", dns)
attempt("resolve example.com", lambda: socket.getaddrinfo("example.com", 80))
attempt("raw icmp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
attempt("raw tcp", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP).close())
attempt("packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3)).close())

def abstract():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    s.connect(os.environ["ABSTRACT"].encode().replace(b"@", b"\0", 1))
attempt("abstract unix", abstract)

def runner():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect("/run/rewardbox/runner.sock")
attempt("runner socket", runner)
interfaces = [name for _, name in socket.if_nameindex()]
out["interfaces"] = interfaces
print(json.dumps(out))
"""


def _host_addresses() -> list[tuple[str, str]]:
    """(family, address) of every address of this host: loopback and the others."""
    addrs = [("AF_INET", "127.0.0.1")]
    if socket.has_ipv6:
        addrs.append(("AF_INET6", "::1"))
    try:
        out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[2] in ("inet", "inet6"):
            addr = parts[3].split("/")[0]
            fam = "AF_INET" if parts[2] == "inet" else "AF_INET6"
            if (fam, addr) not in addrs and not addr.startswith("fe80"):
                addrs.append((fam, addr))
    return addrs


async def test_no_network_egress_from_a_job(pool: SandboxPool) -> None:
    listeners = []
    targets = []
    for fam, addr in _host_addresses():
        try:
            srv = socket.socket(getattr(socket, fam), socket.SOCK_STREAM)
            srv.bind((addr, 0))
        except OSError:
            continue
        srv.listen(16)
        srv.setblocking(False)
        listeners.append(srv)
        targets.append((fam, addr, srv.getsockname()[1]))
    assert any(t[1] == "127.0.0.1" for t in targets)
    abstract_name = "@rewardbox-test-" + secrets.token_hex(8)
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(abstract_name.encode().replace(b"@", b"\0", 1))
    abstract.listen(4)
    abstract.setblocking(False)
    listeners.append(abstract)
    try:
        job = run_job(NETWORK, env={"TARGETS": json.dumps(targets), "ABSTRACT": abstract_name})
        result, elapsed = await run_timed(pool, job)
        assert result.status == Status.OK, result
        report = report_of(result)
        for _fam, addr, port in targets:
            assert report[f"tcp {addr}:{port}"] != "succeeded", report
        for key in ("udp 8.8.8.8:53", "resolve example.com", "abstract unix", "runner socket"):
            assert report[key] != "succeeded", (key, report)
        for key in ("raw icmp", "raw tcp", "packet"):
            assert report[key] == "EPERM", (key, report)
        assert report["interfaces"] == ["lo"], report  # nothing but the sandbox's own loopback
        for srv in listeners:  # and nothing reached any host listener
            with pytest.raises(BlockingIOError):
                srv.accept()
        assert_in_time(elapsed, job)
    finally:
        for srv in listeners:
            srv.close()
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- host data

HOST_FILES = r"""
import json, os, stat
PREFIX = "RBCAN" + "ARY"  # never spelled out whole here, so the search cannot find this program
hits, opened = [], []
for path in json.loads(os.environ["PATHS"]):
    try:
        with open(path, "rb") as f:
            opened.append(path)
            if PREFIX.encode() in f.read():
                hits.append(path)
    except OSError:
        pass
try:
    with open("/etc/shadow", "rb") as f:
        shadow = f.read().decode(errors="replace")
except OSError as e:
    shadow = "denied: " + type(e).__name__
scanned = 0
for dirpath, dirnames, filenames in os.walk("/"):
    if dirpath in ("/proc", "/sys", "/dev"):
        dirnames[:] = []
        continue
    for name in dirnames + filenames:
        if PREFIX in name:
            hits.append(os.path.join(dirpath, name))
    for name in filenames:
        path = os.path.join(dirpath, name)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_size <= 1 << 20:
                with open(path, "rb") as f:
                    if PREFIX.encode() in f.read():
                        hits.append(path)
                scanned += 1
        except OSError:
            pass
# every process this job can see: environment and command line, where readable
for pid in os.listdir("/proc"):
    for what in ("environ", "cmdline"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                data = f.read()
            if PREFIX.encode() in data or b"RBSECRET" in data:
                hits.append(f"/proc/{pid}/{what}")
        except OSError:
            pass
print(json.dumps({"hits": hits, "opened": opened, "shadow": shadow, "scanned": scanned}))
"""


async def test_host_files_are_not_reachable_from_a_job(pool: SandboxPool) -> None:
    token = "RBCANARY" + secrets.token_hex(16)
    canaries = [Path("/root") / f"rewardbox-canary-{token}", Path(tempfile.gettempdir()) / f"rb-canary-{token}",
                Path("/var/tmp") / f"rb-canary-{token}"]
    # each sandbox's private socket directory on the host, seen as /run/rewardbox inside
    canaries += [Path(sb.handle.sock_dir) / "canary" for sb in list(pool._all)]
    for path in canaries:
        path.write_text(f"host secret {token}\n")
    try:
        paths = [str(p) for p in canaries] + ["/run/rewardbox/canary", "/proc/1/root/etc/shadow",
                                              "/proc/1/environ", "/proc/1/cwd/canary"]
        # The walk reads every small file of the image (~26,000 entries with the compilers): time for a loaded box.
        limits = Limits(wall_s=20, total_s=20, cpu_s=20, memory_mb=256, output_bytes=1 << 20)
        job = run_job(HOST_FILES, limits, env={"PATHS": json.dumps(paths)})
        result, elapsed = await run_timed(pool, job)
    finally:
        for path in canaries:
            path.unlink(missing_ok=True)
    assert result.status == Status.OK, result
    report = report_of(result)
    assert report["scanned"] > 1000, "the walk did not get far"
    assert report["hits"] == [], report["hits"]
    assert report["opened"] == [], report["opened"]
    assert token not in result.stdout
    host_shadow = Path("/etc/shadow").read_text()
    assert report["shadow"].startswith("denied") or report["shadow"] != host_shadow, report["shadow"]
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


ENVIRON = r"""
import json, os
others = {}
for pid in os.listdir("/proc"):
    if pid.isdigit() and int(pid) != os.getpid():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                others[pid] = f.read().decode(errors="replace")
        except OSError as e:
            others[pid] = "denied: " + type(e).__name__
print(json.dumps({"env": dict(os.environ), "others": others, "cwd": os.getcwd()}))
"""

JOB_ENV_KEYS = {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED"}


async def test_job_environment_holds_nothing_of_the_host(pool: SandboxPool) -> None:
    assert os.environ["REWARDBOX_TEST_SECRET"] == HOST_SECRET  # the pools started with it in our environment
    job = run_job(ENVIRON, env={"JOB_VAR": "mine"})
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    env = report["env"]
    assert HOST_SECRET not in result.stdout
    assert set(env) == JOB_ENV_KEYS | {"JOB_VAR"}, env
    assert env["JOB_VAR"] == "mine"
    assert env["HOME"] == env["TMPDIR"] == report["cwd"] != "/root"
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    leaked = {k: v for k, v in os.environ.items() if k not in ("LANG", "PYTHONDONTWRITEBYTECODE") and k in env}
    assert not any(env[k] == v for k, v in leaked.items()), f"host variables in the job: {leaked}"
    for pid, text in report["others"].items():  # the runner's and the zygotes' environments are not readable
        assert text.startswith("denied") or not text, (pid, text)
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- other jobs

VICTIM = r"""
import json, os, time
started = time.time()
with open("/tmp/victim-secret", "w") as f:
    f.write(os.environ["VICTIM_SECRET"])
data = open("secret.txt").read() + input()
time.sleep(2.0)
print(json.dumps({"started": started, "ended": time.time(), "len": len(data)}))
"""

SNOOPER = r"""
import json, os, time
time.sleep(0.5)
seen = time.time()
found = []

def grab(path):
    try:
        if os.path.isdir(path):
            found.append([path, sorted(os.listdir(path))])
        else:
            with open(path, "rb") as f:
                found.append([path, f.read(65536).decode(errors="replace")])
    except OSError:
        pass

pids = [p for p in os.listdir("/proc") if p.isdigit()]
for pid in pids:
    if int(pid) == os.getpid():  # its own pipes it may reopen (reading its stdout back would only block itself)
        continue
    for what in ("cmdline", "environ", "fd", "cwd", "root", "maps", "status"):
        grab(f"/proc/{pid}/{what}")
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            grab(f"/proc/{pid}/fd/{fd}")
    except OSError:
        pass
for top in ("/tmp", "/scratch", "/run/rewardbox", "/dev/shm"):
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames:
            grab(os.path.join(dirpath, name))
print(json.dumps({"seen_at": seen, "pids": pids, "found": found}))
"""


async def test_a_job_cannot_see_a_concurrent_job(pool: SandboxPool) -> None:
    await settle(pool)
    secret = "RBVICTIM" + secrets.token_hex(16)
    limits = Limits(wall_s=4, total_s=4, cpu_s=4, memory_mb=256, output_bytes=4 << 20)
    victim = run_job(VICTIM, limits, env={"VICTIM_SECRET": secret}, files={"secret.txt": secret}, stdin=secret)
    snooper = run_job(SNOOPER, limits)
    started = time.monotonic()
    (v, s) = await asyncio.gather(pool.run(victim), pool.run(snooper))
    elapsed = time.monotonic() - started
    assert v.status == Status.OK and s.status == Status.OK, (v, s)
    assert v.sandbox_id != s.sandbox_id, "the two jobs must run in different sandboxes"
    vr, sr = report_of(v), report_of(s)
    assert vr["started"] < sr["seen_at"] < vr["ended"], "the snooper did not run while the victim ran"
    assert secret not in s.stdout, "the snooper saw the victim's data"
    # its own sandbox's only: the runner, its five zygotes, the owner watchdog, a linter, the snooper's own
    assert len(sr["pids"]) < 12, f"the snooper sees too many processes: {sr['pids']}"
    assert elapsed <= limits.wall_s + SLACK_S
    await assert_nothing_left(pool, v.sandbox_id)
    await assert_nothing_left(pool, s.sandbox_id)


# The candidate of a judge job, at import: find every process that is not its own (the judge above all), try to
# signal it and to read its descriptors, environment and memory, and look for the test's secret everywhere it can
# read. It reports on fd 2 (the candidate's stderr, captured in the result) and then behaves.
SNOOPING_CANDIDATE = r"""
import json, os, signal, sys, time
me = os.getuid()
report = {"uid": me, "others": [], "signalled": [], "opened": [], "found_secret": []}
needle = ("JUDGE" + "SECRET").encode()

def others():
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/status") as f:
                    uid = int(f.read().split("Uid:")[1].split()[0])
            except OSError:
                continue
            if uid != me:
                found[int(name)] = uid
    return found

deadline = time.monotonic() + 1.0  # the runner forks the judge right after this process
procs = others()
while me + 1 not in procs.values() and time.monotonic() < deadline:
    time.sleep(0.005)
    procs = others()
report["others"] = sorted(procs.items())
for pid, uid in procs.items():
    for sig in (signal.SIGSTOP, signal.SIGKILL, signal.SIGTERM, 0):
        try:
            os.kill(pid, sig)
            report["signalled"].append([pid, sig])
        except OSError:
            pass
    paths = [f"/proc/{pid}/{w}" for w in ("environ", "mem", "maps", "cwd", "root", "syscall", "stack", "auxv",
                                          "pagemap", "io", "fdinfo/0")]
    paths += [f"/proc/{pid}/fd/{n}" for n in range(8)]
    for path in paths:
        try:
            with open(path, "rb") as f:
                data = f.read(1 << 20)
            report["opened"].append(path)
            if needle in data:
                report["found_secret"].append(path)
        except OSError:
            pass
    for path in (f"/proc/{pid}/fd", f"/proc/{pid}/cwd", f"/proc/{pid}/root"):
        try:
            os.listdir(path)
            report["opened"].append(path + "/")
        except OSError:
            pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if needle in f.read():
                report["found_secret"].append(f"/proc/{pid}/cmdline")
    except OSError:
        pass
for d in ("/scratch/j", "/scratch", "/tmp", "/run/rewardbox"):
    try:
        for name in os.listdir(d):
            try:
                with open(os.path.join(d, name), "rb") as f:
                    if needle in f.read():
                        report["found_secret"].append(os.path.join(d, name))
            except OSError:
                pass
    except OSError:
        pass
os.write(2, (json.dumps(report) + "\n").encode())

def add(a, b):
    return a + b
"""

JUDGE_TEST = """
def check(candidate):
    # JUDGESECRET-{token}: the expected values below are the secret the candidate must not find
    assert candidate(20, 22) == 42
    assert candidate(-1, 1) == 0
    assert candidate(7, 8) == 15
"""


async def test_candidate_cannot_snoop_on_or_signal_the_judge(pool: SandboxPool) -> None:
    token = secrets.token_hex(16)
    job = JudgeJob(candidate={"code": SNOOPING_CANDIDATE, "module": "solution"},
                   judge={"kind": "assert", "entry_point": "add", "test_code": JUDGE_TEST.format(token=token)},
                   limits=LIMITS)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    assert result.error is None and result.spec_error is None, result
    cases = [e for e in result.events if e.get("event") == "case"]
    assert len(cases) == 3 and all(c["passed"] for c in cases), result.events
    report = json.loads(result.stderr.strip().splitlines()[-1])
    judge_uid = report["uid"] + 1
    assert judge_uid in [uid for _, uid in report["others"]], f"the judge was never visible: {report}"
    assert report["signalled"] == [], report
    assert report["opened"] == [], report
    assert report["found_secret"] == [], report
    assert token not in result.stderr + result.stdout
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- privileges

WRITES = r"""
import errno, json, os
targets = ["/x", "/usr/x", "/usr/lib/python3/dist-packages/x.py", "/usr/local/lib/python3.11/dist-packages/x.py",
           "/opt/rewardbox/x", "/opt/rewardbox/runner.py", "/run/rewardbox/x", "/run/rewardbox/runner.sock",
           "/etc/passwd", "/etc/x", "/root/x", "/var/tmp/x", "/home/x", "/bin/x", "/scratch/x", "/scratch/j/x",
           "/proc/1/oom_score_adj", "/proc/sys/kernel/hostname", "/sys/fs/cgroup/memory/memory.limit_in_bytes",
           "/sys/kernel/x"]
out = {}
for path in targets:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.close(fd)
        out[path] = "opened"
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
for path in ("/x-dir", "/usr/x-dir", "/opt/rewardbox/x-dir", "/run/rewardbox/x-dir", "/scratch/x-dir"):
    try:
        os.mkdir(path)
        out[path] = "opened"
    except OSError as e:
        out[path] = errno.errorcode.get(e.errno, str(e.errno))
try:  # lowering its own OOM priority needs CAP_SYS_RESOURCE
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
    out["oom_score_adj"] = "lowered"
except OSError as e:
    out["oom_score_adj"] = errno.errorcode.get(e.errno, str(e.errno))
writable = []
for dirpath, dirnames, filenames in os.walk("/"):
    if dirpath in ("/proc", "/sys"):
        dirnames[:] = []
        continue
    if os.access(dirpath, os.W_OK):
        writable.append(dirpath)
out["writable_dirs"] = writable
print(json.dumps(out))
"""


async def test_writes_outside_the_scratch_dir_fail(pool: SandboxPool) -> None:
    job = run_job(WRITES, Limits(wall_s=5, total_s=5, cpu_s=5, memory_mb=256))
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    writable = report.pop("writable_dirs")
    assert report.pop("oom_score_adj") != "lowered"
    assert {path: e for path, e in report.items() if e == "opened"} == {}, report
    allowed = {"/tmp", "/mnt", "/scratch/c"}  # each a private tmpfs, wiped after the job
    # /dev/mqueue is world-writable under Docker, but RLIMIT_MSGQUEUE = 0 keeps it empty (test_dev_shm...)
    assert set(writable) - allowed <= {"/dev/mqueue"}, writable
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


PTRACE_AND_KILL = r"""
import ctypes, errno, json, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
targets = {}
for name in os.listdir("/proc"):
    if name.isdigit() and int(name) != os.getpid():
        try:
            with open(f"/proc/{name}/status") as f:
                uid = int(f.read().split("Uid:")[1].split()[0])
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if uid == 0:
            targets[int(name)] = cmd.decode(errors="replace")
out = {"targets": sorted(targets), "runner_seen": any("runner.py" in c for c in targets.values()),
       "killed": [], "traced": [], "read": []}
for pid in sorted(set(targets) | {1}):
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP, signal.SIGSEGV):
        try:
            os.kill(pid, sig)
            out["killed"].append([pid, sig])
        except OSError:
            pass
    try:
        pgid = os.getpgid(pid)
        if pgid > 1:  # killpg(1) would be kill(-1): see test_kill_minus_one_...
            os.killpg(pgid, signal.SIGKILL)
            out["killed"].append([pid, "pg"])
    except OSError:
        pass
    for req in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE
        if libc.ptrace(req, pid, None, None) == 0:
            out["traced"].append([pid, req])
    for path in (f"/proc/{pid}/mem", f"/proc/{pid}/environ", f"/proc/{pid}/maps"):
        try:
            with open(path, "rb") as f:
                f.read(16)
            out["read"].append(path)
        except OSError:
            pass
out["ptrace_errno"] = errno.errorcode.get(ctypes.get_errno())
states = {}
for pid in targets:
    try:
        with open(f"/proc/{pid}/status") as f:
            states[pid] = f.read().split("State:")[1].split()[0]
    except OSError:
        states[pid] = "gone"
out["states"] = states
print(json.dumps(out))
"""


async def test_a_job_cannot_ptrace_or_kill_the_runner(pool: SandboxPool) -> None:
    replaced = pool.stats.replaced
    job = run_job(PTRACE_AND_KILL)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    assert report["runner_seen"], report
    assert report["killed"] == [] and report["traced"] == [] and report["read"] == [], report
    assert report["ptrace_errno"] == "EPERM", report
    assert set(report["states"].values()) <= {"S", "R"}, f"the runner or a zygote was hurt: {report['states']}"
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)
    assert pool.stats.replaced == replaced, "a sandbox had to be replaced: its runner was hurt"


KILL_EVERYTHING = r"""
import os, signal, time
if os.fork() == 0:
    time.sleep(1000)
print("before", flush=True)
# every process this uid may signal: on Linux that is the job's own processes except the caller itself
os.kill(-1, signal.SIGKILL)
time.sleep(0.1)
print("after", os.waitpid(-1, 0)[1], flush=True)
"""


async def test_kill_minus_one_only_reaches_the_job_s_own_processes(pool: SandboxPool) -> None:
    replaced = pool.stats.replaced
    job = run_job(KILL_EVERYTHING)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    assert result.stdout == "before\nafter 9\n", result  # its own child died of SIGKILL; nothing else did
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)
    assert pool.stats.replaced == replaced, "a sandbox had to be replaced: its runner was hurt"


SETUID = r"""
import json, os, stat, subprocess
found = []
for dirpath, dirnames, filenames in os.walk("/"):
    if dirpath in ("/proc", "/sys"):
        dirnames[:] = []
        continue
    for name in filenames + dirnames:
        try:
            st = os.lstat(os.path.join(dirpath, name))
        except OSError:
            continue
        if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID) and not stat.S_ISDIR(st.st_mode):
            found.append(os.path.join(dirpath, name))
tools = {}
for argv in (["su", "-c", "id -u"], ["sudo", "id", "-u"], ["newgrp", "root"], ["passwd", "-d", "root"]):
    try:
        p = subprocess.run(argv, input="\n", capture_output=True, text=True, timeout=1)
        tools[argv[0]] = [p.returncode, p.stdout.strip()]
    except FileNotFoundError:
        tools[argv[0]] = "absent"
    except subprocess.TimeoutExpired:
        tools[argv[0]] = "timeout"
print(json.dumps({"setid": found, "tools": tools, "uid": os.getuid(), "no_new_privs":
                  open("/proc/self/status").read().split("NoNewPrivs:")[1].split()[0]}))
"""


async def test_no_setuid_binaries_and_no_way_to_root(pool: SandboxPool) -> None:
    job = run_job(SETUID, Limits(wall_s=5, total_s=5, cpu_s=5, memory_mb=256))
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    assert report["setid"] == [], report["setid"]
    assert report["no_new_privs"] == "1"
    for tool, outcome in report["tools"].items():
        assert outcome in ("absent", "timeout") or (outcome[0] != 0 and outcome[1] != "0"), (tool, outcome)
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


SYSCALLS = r"""
import ctypes, errno, json, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(256)
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWNET, SIGCHLD = 0x10000000, 0x00020000, 0x40000000, 17
calls = {
    "io_uring_setup": (425, 16, ctypes.addressof(buf)),
    "bpf": (321, 0, ctypes.addressof(buf), 72),
    "userfaultfd": (323, 0),
    "keyctl": (250, 0, -3, 0),  # KEYCTL_GET_KEYRING_ID of the session keyring
    "unshare(CLONE_NEWUSER)": (272, CLONE_NEWUSER),
    "unshare(CLONE_NEWNS)": (272, CLONE_NEWNS),
    "unshare(CLONE_NEWNET)": (272, CLONE_NEWNET),
    "clone(CLONE_NEWUSER)": (56, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
    "clone3": (435, ctypes.addressof(buf), 88),
    "ptrace(TRACEME)": (101, 0, 0, 0, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "shmget": (29, 0, 4096, 0o1000 | 0o600),  # IPC_PRIVATE, IPC_CREAT
    "msgget": (68, 0, 0o1000 | 0o600),
    "semget": (64, 0, 1, 0o1000 | 0o600),
}
out = {}
for name, (nr, *args) in calls.items():
    ctypes.set_errno(0)
    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if rc == 0 and name.startswith("clone"):
        os._exit(0)  # we are a child that should never have been created
    if rc > 0 and name.startswith("clone"):
        os.waitpid(rc, 0)
    out[name] = "succeeded" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
print(json.dumps(out))
"""


@pytest.mark.skipif(not X86_64, reason="syscall numbers are x86_64's")
async def test_dangerous_syscalls_fail_with_eperm_or_enosys(pool: SandboxPool) -> None:
    job = run_job(SYSCALLS)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    report = report_of(result)
    assert len(report) == 14
    assert {name: e for name, e in report.items() if e not in ("EPERM", "ENOSYS")} == {}, report
    assert_in_time(elapsed, job)
    await assert_nothing_left(pool, result.sandbox_id)


# ------------------------------------------------------------------------------------------------- traps for later

TRAPS = r"""
import json, os, socket, stat
made = []
for d in ("/tmp", os.getcwd()):
    os.chdir(d)
    links = {"runner.sock": "/run/rewardbox/runner.sock", "passwd": "/etc/passwd", "root": "/", "up": "..",
             "proc1root": "/proc/1/root", "judge": "/scratch/j", "loop1": "loop2", "loop2": "loop1",
             "dangling": "/nonexistent/x"}
    for name, target in links.items():
        os.symlink(target, name)
    # files the runner writes for the next job (Job.files) and names the in-sandbox programs use
    for name in ("input.txt", "solution.py", "main.py", "test_solution.py", "fifo"):
        os.mkfifo(name)
    os.makedirs("sub/deeper")
    os.symlink("/etc", "sub/etc")
    os.mkfifo("sub/data.txt")
    with open("sub/deeper/locked", "w") as f:
        f.write("x")
    os.chmod("sub/deeper/locked", 0)
    os.chmod("sub/deeper", 0)
    os.chmod("sub", 0o100)  # traversable, not listable
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("listening.sock")
    s.listen(1)
    os.link("passwd", "hardlink-to-a-link", follow_symlinks=False)
    try:
        os.link("/etc/passwd", "hardlink-to-passwd")
    except OSError:
        pass
    made.append(d)
print(json.dumps({"made": made}))
"""

AFTER_TRAPS = r"""
import json, os, sys
with open("input.txt") as f:
    first = f.read()
with open("sub/data.txt") as f:
    second = f.read()
print(json.dumps({"input": first, "data": second, "stdin": sys.stdin.read(), "cwd": sorted(os.listdir("."))}))
"""


async def test_symlinks_and_fifos_left_by_a_job_do_not_trap_the_runner(pool: SandboxPool) -> None:
    job = run_job(TRAPS)
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    assert len(report_of(result)["made"]) == 2
    assert_in_time(elapsed, job)
    attacked = result.sandbox_id
    # the next jobs in that very sandbox: files written for them by the runner, stdin, a judge job
    seen = set()
    for _ in range(pool.size * 3):
        nxt = run_job(AFTER_TRAPS, files={"input.txt": "fresh", "sub/data.txt": "also fresh"}, stdin="in")
        r, t = await run_timed(pool, nxt)
        assert r.status == Status.OK, r
        assert_in_time(t, nxt)
        report = report_of(r)
        assert (report["input"], report["data"], report["stdin"]) == ("fresh", "also fresh", "in"), report
        assert report["cwd"] == ["input.txt", "sub"], report
        judged = JudgeJob(candidate={"code": "def add(a, b):\n    return a + b\n"},
                          judge={"kind": "function", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}]},
                          limits=LIMITS)
        j, t = await run_timed(pool, judged)
        assert j.status == Status.OK and [e["passed"] for e in j.events if e["event"] == "case"] == [True], j
        assert_in_time(t, judged)
        seen |= {r.sandbox_id, j.sandbox_id}
        if attacked in seen:
            break
    assert attacked in seen
    await assert_nothing_left(pool, attacked)
    # the host side of the sandboxes is untouched: /etc/passwd is the host's own and intact
    assert Path("/etc/passwd").read_text().startswith("root:")


STATE = r"""
import os, time
for d in ("/tmp", os.getcwd(), "/tmp/sub"):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "state-from-earlier-job"), "w") as f:
        f.write("persisted " + os.environ["MARK"])
os.chmod("/tmp/sub", 0o777)
os.chmod("/tmp/state-from-earlier-job", 0o666)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        while True:
            time.sleep(0.05)
            try:
                with open("/tmp/background-still-running", "w") as f:
                    f.write("yes")
            except OSError:
                pass
    os._exit(0)
os.wait()
"""

LOOK_FOR_STATE = r"""
import json, os
found = []
for top in ("/tmp", os.getcwd(), "/scratch"):
    for dirpath, dirnames, filenames in os.walk(top):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                with open(path) as f:
                    found.append([path, f.read(100)])
            except OSError:
                found.append([path, None])
print(json.dumps(found))
"""


async def test_a_warm_sandbox_keeps_no_state_between_jobs(pool: SandboxPool) -> None:
    mark = secrets.token_hex(8)
    job = run_job(STATE, env={"MARK": mark})
    result, elapsed = await run_timed(pool, job)
    assert result.status == Status.OK, result
    assert_in_time(elapsed, job)
    seen = set()
    for i in range(pool.size * 2 + 2):
        await settle(pool)  # every sandbox idle again: serial jobs visit them in turn
        r = await pool.run(run_job(LOOK_FOR_STATE))
        assert r.status == Status.OK, r
        assert json.loads(r.stdout) == [], f"follow-up {i} in {r.sandbox_id} found state: {r.stdout}"
        assert mark not in r.stdout
        seen.add(r.sandbox_id)
    assert result.sandbox_id in seen and len(seen) == pool.size, seen
    await assert_nothing_left(pool, result.sandbox_id, delay_s=0.2)

