"""Helpers for tests that need to know where a pool's jobs run."""

from __future__ import annotations

import asyncio
import time

from sandboxes import Job, Result, SandboxPool


async def settle(pool: SandboxPool, timeout_s: float = 60.0) -> None:
    """Wait until every sandbox is idle (clean-up of the previous test done), so concurrent jobs spread out and
    serial ones visit the sandboxes in turn."""
    deadline = time.monotonic() + timeout_s
    while pool.snapshot()["idle"] < pool.size:
        assert time.monotonic() < deadline, f"pool never settled: {pool.snapshot()}"
        await asyncio.sleep(0.02)


async def in_every_sandbox(pool: SandboxPool, job: Job) -> list[Result]:
    """Run job once in each sandbox of the pool (a settled pool hands its sandboxes out in turn)."""
    results: dict[str, Result] = {}
    for _ in range(pool.size * 4):
        await settle(pool)
        result = await pool.run(job)
        results.setdefault(str(result.sandbox_id), result)
        if len(results) == pool.size:
            return list(results.values())
    raise AssertionError(f"{job.op} job never reached every sandbox: {sorted(results)}")
