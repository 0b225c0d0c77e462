"""Sandboxes killed from outside (issue 30) and servers killed hard (issue 27, point 3), for real.

A sandbox killed while it starts is noticed within about a second and started again, a job whose sandbox is killed
under it runs again on the next healthy one, so an item waiting through a fault of a few seconds is answered soon
after the fault ends and never `infra_error` while its deadline has not passed: with a bare pool on both backends,
with `rewardbox serve` (embedded) and with a worker (distributed). And nothing of a server or worker killed with
SIGKILL (containers, socket folders, cgroups) remains 30 s later, with no other rewardbox process started.

Every kill here aims at the sandboxes of the pool or process this test started, never at anyone else's: other
tests, of other checkouts, run sandboxes on the same host.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import subprocess
import time
from pathlib import Path

import docker
import httpx
import pytest
from docker.errors import APIError, NotFound

from sandboxes import RunJob, SandboxPool, Status, choose_backend
from sandboxes.backends.base import OWNER_FILE, SOCKETS_ROOT

from .conftest import BACKENDS, start_server, stop_server
from .distributed import RedisServer, service_env, start_api, start_worker, stop, wait_for_workers

FAULT_S = 5.0  # how long the sandboxes are killed for
ANSWERED_WITHIN_S = 10.0  # after the fault's end (issue 30)
NOTHING_LEFT_WITHIN_S = 30.0  # after an owner's SIGKILL (issue 27)
CGROUP_PARENTS = (Path("/sys/fs/cgroup/rewardbox"), Path("/sys/fs/cgroup/memory/rewardbox"),
                  Path("/sys/fs/cgroup/pids/rewardbox"))


# ------------------------------------------------------------------------------------------------ killing our own


class Recording:
    """The backend, recording every sandbox it starts, so that the test can kill exactly those."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.handles: list = []

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    async def start(self, uid_base, spec):
        handle = await self.backend.start(uid_base, spec)
        self.handles.append(handle)
        return handle


def kill_handle(handle) -> None:
    if hasattr(handle, "container_id"):
        try:
            handle.client.api.kill(handle.container_id)
        except (NotFound, APIError):  # ended, or being removed
            pass
    else:
        try:
            os.killpg(handle.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def kill_every_sandbox(backend: Recording, seconds: float) -> float:
    """Kill each sandbox of the pool, those already there and each new one as soon as it is started (its runner
    still starting), for `seconds`; returns when the fault ended (time.monotonic)."""
    killed: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for handle in list(backend.handles):
            if id(handle) not in killed:
                killed.add(id(handle))
                await asyncio.to_thread(kill_handle, handle)
        await asyncio.sleep(0.02)
    return time.monotonic()


async def _answered(job: RunJob, pool: SandboxPool) -> tuple[object, float]:
    result = await pool.run(job)
    return result, time.monotonic()


@pytest.fixture(params=BACKENDS)
async def recorded_pool(request):
    """A pool of 2 of its own (the kills must not reach the session's pool), on each backend; the service's
    acquire timeout (60 s): a killed start waited out to its end would show."""
    backend = Recording(choose_backend(request.param))
    pool = SandboxPool(backend, size=2, acquire_timeout_s=60)
    await pool.start()
    yield pool, backend
    await pool.close()


async def test_items_waiting_while_sandboxes_are_killed_as_they_start_are_answered_soon_after(recorded_pool):
    pool, backend = recorded_pool
    fault = asyncio.create_task(kill_every_sandbox(backend, FAULT_S))
    await asyncio.sleep(0.2)  # the warm sandboxes are dead: the items wait for starts, each killed in turn
    waiting = [asyncio.create_task(_answered(RunJob(program={"code": f"print({i})"}), pool)) for i in range(3)]
    fault_end = await fault
    answers = await asyncio.gather(*waiting)
    for i, (result, _) in enumerate(answers):
        assert result.status == Status.OK and result.stdout == f"{i}\n", result
    late = max(at for _, at in answers) - fault_end
    assert late <= ANSWERED_WITHIN_S, f"answered {late:.1f}s after the fault's end: {pool.snapshot()}"
    assert pool.stats.start_failures >= 2, f"no start was killed: {pool.snapshot()}"


async def test_a_job_whose_sandbox_is_killed_under_it_runs_again_on_the_next_healthy_one(recorded_pool):
    pool, backend = recorded_pool
    job = RunJob(program={"code": "import time\ntime.sleep(1.5)\nprint('done')"})
    running = [asyncio.create_task(_answered(job, pool)) for _ in range(2)]
    deadline = time.monotonic() + 30
    while pool.stats.busy < 2:
        assert time.monotonic() < deadline, pool.snapshot()
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # both jobs are running
    fault_end = await kill_every_sandbox(backend, FAULT_S)
    answers = await asyncio.gather(*running)
    for result, _ in answers:
        assert result.status == Status.OK and result.stdout == "done\n", result
    late = max(at for _, at in answers) - fault_end
    assert late <= ANSWERED_WITHIN_S, f"answered {late:.1f}s after the fault's end: {pool.snapshot()}"
    assert pool.stats.rerun >= 2, pool.snapshot()


# ------------------------------------------------------------------------------------- a server's sandboxes, by pid

def _children(pid: int) -> list[int]:
    kids = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return kids


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _tag(pid: int) -> str:
    return f"{os.uname().nodename}:{pid}"


def _containers(pid: int, client: docker.DockerClient) -> list:
    """Every container (any state) of the rewardbox process `pid`."""
    return client.containers.list(all=True, sparse=True, filters={"label": f"rewardbox.owner={_tag(pid)}"})


def _kill_sandboxes_of(pid: int, client: docker.DockerClient) -> int:
    """Kill the sandboxes of the rewardbox process `pid` (its containers, or its bwrap children); how many."""
    killed = 0
    for c in _containers(pid, client):
        try:
            client.api.kill(c.id)
            killed += 1
        except (NotFound, APIError):  # ended, or being removed
            pass
    for child in _children(pid):
        if _comm(child) == "bwrap":
            try:
                os.kill(child, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
    return killed


def _item(i: int, sleep_s: float) -> dict:
    return {"id": f"item-{i}", "code": f"import time\ndef f():\n    time.sleep({sleep_s})\n    return {i}\n",
            "profile": "binary",
            "tests": {"kind": "function", "entry_point": "f", "cases": [{"args": [], "expected": i}]}}


def _answered_through_a_fault(url: str, owner: int, items: list[dict]) -> None:
    """Post the items, kill the owner's sandboxes for FAULT_S while they run and wait, and check the answers."""
    client = docker.from_env(timeout=30)
    with httpx.Client(base_url=url, timeout=300) as http, concurrent.futures.ThreadPoolExecutor(len(items)) as threads:
        def post(body: dict) -> tuple[dict, float]:
            return http.post("/reward", json=body).json(), time.monotonic()

        answers = [threads.submit(post, it) for it in items]
        time.sleep(1.0)  # the first items are running
        end, killed = time.monotonic() + FAULT_S, 0
        while time.monotonic() < end:
            killed += _kill_sandboxes_of(owner, client)
            time.sleep(0.1)
        fault_end = time.monotonic()
        results = [a.result() for a in answers]
    client.close()
    assert killed >= 4, f"{killed} sandboxes killed"
    for it, (result, _) in zip(items, results, strict=True):
        assert (result["status"], result["reward"]) == ("passed", 1.0), result
        assert result["id"] == it["id"]
    late = max(at for _, at in results) - fault_end
    assert late <= ANSWERED_WITHIN_S, f"answered {late:.1f}s after the fault's end"


def test_items_of_a_server_whose_sandboxes_are_killed_for_seconds_pass_soon_after() -> None:
    proc, url = start_server({"REWARDBOX_BACKEND": "docker"})
    try:
        _answered_through_a_fault(url, proc.pid, [_item(i, 1.0) for i in range(4)])
    finally:
        stop_server(proc)


def test_items_of_a_worker_whose_sandboxes_are_killed_for_seconds_pass_soon_after() -> None:
    redis_server = RedisServer()
    redis_server.start()
    procs: list[subprocess.Popen] = []
    try:
        env = service_env(redis_server.url, f"rbdeath-{os.getpid()}", REWARDBOX_POOL_SIZE="2")
        worker = start_worker(env)
        procs.append(worker)
        wait_for_workers(redis_server.client(), env["REWARDBOX_REDIS_PREFIX"], 1)
        api, url = start_api(env)
        procs.append(api)
        _answered_through_a_fault(url, worker.pid, [_item(i, 1.0) for i in range(4)])
    finally:
        for p in procs:
            stop(p)
        redis_server.stop()


# ------------------------------------------------------------------------------------------ a dead owner's leftovers


def _owner_folder(pid: int) -> Path:
    for entry in SOCKETS_ROOT.iterdir():
        try:
            if (entry / OWNER_FILE).read_text() == _tag(pid):
                return entry
        except OSError:
            continue
    raise AssertionError(f"no socket folder of process {pid}")


def _leftovers(pid: int, folder: Path, bwraps: list[int], client: docker.DockerClient) -> list[str]:
    left = [f"container {c.id[:12]}" for c in _containers(pid, client)]
    left += [f"folder {folder}"] if folder.exists() else []
    left += [f"cgroup {c}" for parent in CGROUP_PARENTS if parent.is_dir() for c in parent.iterdir()
             if c.name.startswith(folder.name + "-")]
    left += [f"bwrap process {p}" for p in bwraps if _alive(p)]
    return left


def _nothing_left_after_sigkill(proc: subprocess.Popen) -> None:
    client = docker.from_env(timeout=30)
    folder = _owner_folder(proc.pid)
    bwraps = [p for p in _children(proc.pid) if _comm(p) == "bwrap"]
    assert _containers(proc.pid, client) or bwraps, "the process has no sandbox to leave behind"
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    killed = time.monotonic()
    while left := _leftovers(proc.pid, folder, bwraps, client):
        assert time.monotonic() - killed < NOTHING_LEFT_WITHIN_S, f"left {NOTHING_LEFT_WITHIN_S:g}s after: {left}"
        time.sleep(0.5)
    client.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_of_a_server_killed_with_sigkill_remains_30s_later(backend: str) -> None:
    proc, url = start_server({"REWARDBOX_BACKEND": backend})
    try:
        with concurrent.futures.ThreadPoolExecutor(1) as threads:
            busy = threads.submit(httpx.post, url + "/reward", json=_item(0, 60.0), timeout=120)
            time.sleep(1.5)  # one sandbox runs a job, the other is idle
            _nothing_left_after_sigkill(proc)
            with pytest.raises(httpx.HTTPError):
                busy.result()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_nothing_of_a_worker_killed_with_sigkill_remains_30s_later() -> None:
    redis_server = RedisServer()
    redis_server.start()
    worker = None
    try:
        env = service_env(redis_server.url, f"rbdeath-{os.getpid()}", REWARDBOX_BACKEND="docker")
        worker = start_worker(env)
        wait_for_workers(redis_server.client(), env["REWARDBOX_REDIS_PREFIX"], 1)
        _nothing_left_after_sigkill(worker)
    finally:
        if worker is not None and worker.poll() is None:
            worker.kill()
        redis_server.stop()
