"""Benchmark: items and sessions in a user's own image against rewardbox's default image, in the same run.

    PYTHONPATH=. .venv/bin/python bench/environments_run.py            # Docker backend, 10 warm items, 30 execs
    PYTHONPATH=. .venv/bin/python bench/environments_run.py --items 20 --execs 50 --json

The own image is tests/own_image.py's SWE-bench-like image (conda-style interpreter, the task's repository at
/testbed, no Python of the system), built locally if missing. The task is service/repos/benchmark.py's
toolz-1.2.0-bug0, graded with its gold patch.
- Items: cold start of a target's first item (its pool started on first use, as the service does for a new
  environment, plus the item) and the warm per-item cost after it (p50 over --items), for the own image (through
  service/environments/pools.py) and for the default image (a pool of the same size, the snapshot sent once).
- Items in old-Python images too (tests/old_python_image.py: Python 3.9 with pytest 5.4.3 or 7.4.4, as most
  SWE-bench instance images hold), with --old-python.
- Sessions: exec p50 of a trivial command (`python -c pass`) in a session in the own image, and in the default
  image, next to `docker exec` of the same command into a plain running container of the own image (no
  isolation of ours: the floor an exec-based harness pays).
Prints numbers; it is not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import time
from typing import Any

from prometheus_client import CollectorRegistry

from graders.repo import RepoGrader
from graders.tests import job_limits
from sandboxes import SandboxPool, SandboxSpec, choose_backend
from sandboxes.targets import DEFAULT_TARGET, SandboxTarget
from service.compat.swebench import to_item
from service.config import SessionSettings
from service.environments.models import EnvironmentRef
from service.environments.pools import EnvironmentPools
from service.repos.archive import ArchiveLimits, normalize
from service.repos.benchmark import tasks
from service.repos.models import RepoTests
from service.sessions.manager import SessionManager
from service.sessions.models import SessionLimits
from tests import old_python_image
from tests.own_image import PYTHON, TESTBED, build

TASK = next(t for t in tasks() if t["instance_id"] == "toolz-1.2.0-bug0")
LIMITS = job_limits(10, 512, 120)


def p50(values: list[float]) -> float:
    return round(statistics.median(values), 1)


async def items(target: SandboxTarget, n: int) -> dict[str, Any]:
    snapshot = normalize(TASK["archive"], ArchiveLimits())
    tests = RepoTests(**to_item(TASK, snapshot.id)["tests"])

    async def fetch(_: str) -> bytes:
        return snapshot.data

    t0 = time.perf_counter()
    envs: EnvironmentPools[RepoGrader] = EnvironmentPools("docker", lambda p, t: RepoGrader(p, fetch, t), size=1)
    if target.is_default:  # the default image's pool as the service starts it (under another key, same content)
        target = SandboxTarget(key="default-bench")
    repo_id = None if target.repo_path else snapshot.id
    try:
        async with envs.use(target) as grader:
            first = await grader.grade(repo_id, TASK["patch"], None, tests, LIMITS)
            cold_ms = (time.perf_counter() - t0) * 1000
            warm = []
            for _ in range(n):
                t = time.perf_counter()
                outcome = await grader.grade(repo_id, TASK["patch"], None, tests, LIMITS)
                warm.append((time.perf_counter() - t) * 1000)
                assert outcome.status == "passed", outcome.message
    finally:
        await envs.close()
    assert first.status == "passed", first.message
    return {"cold_first_item_ms": round(cold_ms, 1), "warm_item_p50_ms": p50(warm)}


async def session_execs(environment: EnvironmentRef | None, n: int) -> float:
    snapshot = normalize(TASK["archive"], ArchiveLimits())

    async def fetch(_: str) -> bytes:
        return snapshot.data

    async def no_score(_: Any) -> list:
        return []

    pool = SandboxPool(choose_backend("docker"), size=1, spec=SandboxSpec(), acquire_timeout_s=120)
    manager = SessionManager(pool, fetch, no_score, CollectorRegistry(), SessionSettings(pool_size=1))
    manager._own_pool, manager._pool_started = True, False  # started by the first session, closed with it
    await manager.start()
    try:
        session = await manager.create(snapshot.id, 600, SessionLimits(), environment)
        command = "python -c pass" if environment else "python3 -c pass"
        await manager.exec(session.id, command, 30, None)  # the first one starts the pool's sandbox
        times = []
        for _ in range(n):
            t = time.perf_counter()
            answer = await manager.exec(session.id, command, 30, None)
            times.append((time.perf_counter() - t) * 1000)
            assert answer["exit_code"] == 0, answer
    finally:
        await manager.close()
    return p50(times)


def docker_exec(ref: str, n: int) -> float:
    cid = subprocess.run(["docker", "run", "-d", "--rm", "--network", "none", ref, "sleep", "600"],
                         capture_output=True, text=True, check=True).stdout.strip()
    try:
        times = []
        for _ in range(n + 1):
            t = time.perf_counter()
            subprocess.run(["docker", "exec", cid, PYTHON, "-c", "pass"], check=True, capture_output=True)
            times.append((time.perf_counter() - t) * 1000)
        return p50(times[1:])
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=False)


async def main(a: argparse.Namespace) -> dict[str, Any]:
    ref = build(TASK)
    own = SandboxTarget(key=f"image:{ref}", docker_image=ref, foreign=True, python=PYTHON, repo_path=TESTBED)
    env = EnvironmentRef(image=ref, python=PYTHON, repo_path=TESTBED)
    runs = {"default_image": await items(DEFAULT_TARGET, a.items), "own_image": await items(own, a.items)}
    for version in old_python_image.PYTESTS if a.old_python else ():
        old = old_python_image.build(TASK, version)
        runs[f"py3.9_pytest{version}"] = await items(SandboxTarget(
            key=f"image:{old}", docker_image=old, foreign=True, python=old_python_image.PYTHON, repo_path=TESTBED),
            a.items)
    if a.items_only:
        return {"items": runs}
    return {
        "items": runs,
        "session_exec_p50_ms": {"default_image": await session_execs(None, a.execs),
                                "own_image": await session_execs(env, a.execs),
                                "docker_exec_own_image": docker_exec(ref, a.execs)},
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=10)
    p.add_argument("--execs", type=int, default=30)
    p.add_argument("--json", action="store_true")
    p.add_argument("--old-python", action="store_true", help="items in the old-Python images too")
    p.add_argument("--items-only", action="store_true", help="no session measurements")
    args = p.parse_args()
    out = asyncio.run(main(args))
    if args.json:
        print(json.dumps(out))
    else:
        for section, rows in out.items():
            print(section)
            for name, value in rows.items():
                print(f"  {name:24} {value}")
