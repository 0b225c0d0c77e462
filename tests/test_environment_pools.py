"""Pools per environment on real sandboxes (both backends): started on first use, reused, the least recently used
idle one closed to stay within the count and memory budgets, a busy one never. The targets are the default image
under other keys (what an environment built from a spec looks like to the pools)."""

from __future__ import annotations

import asyncio

import pytest

from sandboxes import RunJob, SandboxPool, SandboxSpec, Status
from sandboxes.targets import SandboxTarget
from service.environments.pools import EnvironmentPools, EnvironmentProblem

from .conftest import BACKENDS

A, B, C = (SandboxTarget(key=k) for k in ("env-a", "env-b", "env-c"))


def pools(backend: str, **kw) -> EnvironmentPools[SandboxPool]:
    return EnvironmentPools(backend, lambda p, t: p, size=1, spec=SandboxSpec(memory_mb=512), **kw)


async def run(envs: EnvironmentPools[SandboxPool], target: SandboxTarget) -> str:
    async with envs.use(target) as pool:
        result = await pool.run(RunJob(program={"code": "print('hi')"}))
    assert result.status == Status.OK, result
    return result.sandbox_id or ""


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_pool_starts_on_first_use_and_is_reused(backend):
    envs = pools(backend)
    try:
        assert envs.keys() == []
        first = await run(envs, A)
        again = await run(envs, A)
        assert envs.keys() == ["env-a"] and envs.totals()["started"] == 1
        assert first == again  # the same warm sandbox
        assert envs.snapshot()["env-a"]["warm"]
    finally:
        await envs.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_least_recently_used_pool_goes_when_the_count_budget_is_full(backend):
    envs = pools(backend, max_pools=2)
    try:
        await run(envs, A)
        await run(envs, B)
        await run(envs, A)  # B is now the least recently used
        await run(envs, C)
        assert envs.keys() == ["env-a", "env-c"] and envs.totals()["evicted"] == 1
    finally:
        await envs.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_the_memory_budget_closes_pools_too(backend):
    envs = pools(backend, max_pools=10, memory_mb=1024)  # two pools of 512 MB
    try:
        for target in (A, B, C):
            await run(envs, target)
        assert envs.keys() == ["env-b", "env-c"] and envs.totals()["memory_mb"] == 1024
    finally:
        await envs.close()


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_pool_in_use_is_never_closed_and_the_next_target_waits_for_it(backend):
    envs = pools(backend, max_pools=1)
    try:
        async with envs.use(A):
            waiting = asyncio.ensure_future(run(envs, B))
            await asyncio.sleep(1.0)
            assert not waiting.done() and envs.keys() == ["env-a"]
        await waiting
        assert envs.keys() == ["env-b"]
    finally:
        await envs.close()


async def test_an_environment_larger_than_the_memory_budget_is_refused():
    envs = pools("docker", memory_mb=256)
    with pytest.raises(EnvironmentProblem, match="REWARDBOX_ENV_POOLS_MEMORY_MB"):
        async with envs.use(A):
            pass


@pytest.mark.parametrize("backend", BACKENDS)
async def test_concurrent_first_uses_of_one_target_start_one_pool(backend):
    envs = pools(backend)
    try:
        await asyncio.gather(*(run(envs, A) for _ in range(3)), run(envs, B))
        assert sorted(envs.keys()) == ["env-a", "env-b"] and envs.totals()["started"] == 2
    finally:
        await envs.close()
