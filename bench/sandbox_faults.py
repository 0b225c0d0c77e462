"""Benchmark: how soon items waiting through a fault of the sandboxes are answered after it ends (issue 30).

    .venv/bin/python bench/sandbox_faults.py                    # both backends, where available
    .venv/bin/python bench/sandbox_faults.py --backend docker --fault-s 6 --rounds 3

Measured in the same run, on a pool of 2 of its own (acquire timeout 60 s, as the service's):
  start     every sandbox of the pool is killed, the warm ones and each new one as soon as it is started (its
            runner still starting), for --fault-s; 3 items (`print(i)`) submitted 0.2 s into the fault wait
  mid-job   2 items (`sleep(1.5)`) running when the fault starts: their sandboxes are killed under them, and so is
            every new one for --fault-s
  baseline  the same items on the same pool with no fault: submission to answer
For each: seconds from the fault's end to the last answer (the target: within 10 s), the statuses, and the pool's
start failures and job re-runs. Prints numbers; the behaviour is tested in tests/test_sandbox_deaths.py.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sandboxes import RunJob, SandboxPool, choose_backend  # noqa: E402
from sandboxes.backends import bubblewrap_available, docker_available  # noqa: E402


class Recording:
    """The backend, recording every sandbox it starts (the ones to kill: this pool's, nobody else's)."""

    def __init__(self, backend) -> None:
        self.backend = backend
        self.handles: list = []

    def __getattr__(self, name: str):
        return getattr(self.backend, name)

    async def start(self, uid_base, spec):
        handle = await self.backend.start(uid_base, spec)
        self.handles.append(handle)
        return handle


def kill(handle) -> None:
    if hasattr(handle, "container_id"):
        try:
            handle.client.api.kill(handle.container_id)
        except Exception:  # noqa: BLE001 - ended or being removed
            pass
    else:
        try:
            os.killpg(handle.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def fault(backend: Recording, seconds: float) -> float:
    killed: set[int] = set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for handle in list(backend.handles):
            if id(handle) not in killed:
                killed.add(id(handle))
                await asyncio.to_thread(kill, handle)
        await asyncio.sleep(0.02)
    return time.monotonic()


async def answered(pool: SandboxPool, job: RunJob) -> tuple[str, float]:
    result = await pool.run(job)
    return result.status.value, time.monotonic()


async def one_round(name: str, fault_s: float) -> dict[str, str]:
    backend = Recording(choose_backend(name))
    pool = SandboxPool(backend, size=2, acquire_timeout_s=60)
    await pool.start()
    out = {}
    try:
        quick = [RunJob(program={"code": f"print({i})"}) for i in range(3)]
        slow = [RunJob(program={"code": "import time\ntime.sleep(1.5)\nprint('done')"}) for _ in range(2)]
        t0 = time.monotonic()
        base = await asyncio.gather(*(answered(pool, j) for j in quick + slow))
        out["baseline"] = f"{max(at for _, at in base) - t0:5.2f} s from submission  {sorted({s for s, _ in base})}"

        failures, reruns = pool.stats.start_failures, pool.stats.rerun
        faulting = asyncio.create_task(fault(backend, fault_s))
        await asyncio.sleep(0.2)
        waiting = [asyncio.create_task(answered(pool, j)) for j in quick]
        end = await faulting
        got = await asyncio.gather(*waiting)
        out["start"] = (f"{max(at for _, at in got) - end:5.2f} s after the fault  {sorted({s for s, _ in got})}  "
                        f"start failures {pool.stats.start_failures - failures}, re-runs {pool.stats.rerun - reruns}")

        await asyncio.sleep(3)  # the pool refills
        failures, reruns = pool.stats.start_failures, pool.stats.rerun
        running = [asyncio.create_task(answered(pool, j)) for j in slow]
        while pool.stats.busy < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.3)
        end = await fault(backend, fault_s)
        got = await asyncio.gather(*running)
        out["mid-job"] = (f"{max(at for _, at in got) - end:5.2f} s after the fault  {sorted({s for s, _ in got})}  "
                          f"start failures {pool.stats.start_failures - failures}, re-runs {pool.stats.rerun - reruns}")
    finally:
        await pool.close()
    return out


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["docker", "bubblewrap"], action="append")
    p.add_argument("--fault-s", type=float, default=6.0)
    p.add_argument("--rounds", type=int, default=2)
    a = p.parse_args()
    logging.getLogger("rewardbox.sandbox").setLevel(logging.CRITICAL)  # every kill is logged: not what we print
    backends = a.backend or [n for n, ok in (("docker", docker_available()), ("bubblewrap", bubblewrap_available()))
                             if ok]
    print(f"fault {a.fault_s:g} s, pool of 2, load average {os.getloadavg()[0]:.1f}")
    for name in backends:
        for r in range(a.rounds):
            for what, line in (await one_round(name, a.fault_s)).items():
                print(f"{name:10} round {r + 1}  {what:9} {line}")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
