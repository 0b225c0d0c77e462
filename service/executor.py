"""Where items are scored: the seam between the routes and the sandboxes.

`Executor` is what the routes call. `LocalExecutor` (embedded mode, no REDIS_URL) scores in this process on a
local warm pool; `service.redis_queue.RedisExecutor` (distributed mode) hands items to `rewardbox worker`
processes through Redis. Both answer the same results, consult the result cache, refuse work beyond the queue
bound (Overloaded -> 429) and turn items not started by the request's deadline into infra_error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Protocol

from sandboxes import Job, Result, SandboxPool
from sandboxes.builds import Builder

from .cache import LocalResultCache, as_hit, cache_key, cacheable, code_versions
from .config import Settings
from .metrics import Metrics
from .models import ItemResult, RewardItem
from .scoring import Scorer


class Overloaded(Exception):
    """More queued work than the bound allows: the client should come back after `retry_after_s`."""

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Unavailable(Exception):
    """The queue (Redis) cannot be reached: nothing was accepted."""

    def __init__(self, message: str, retry_after_s: int = 2) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class Executor(Protocol):
    settings: Settings
    image_id: str
    versions: dict[str, str]
    store: Any
    builder: Builder  # compiles for /run_code; items compile where they are scored

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def score_many(self, items: list[RewardItem], deadline_s: float | None = None,
                         use_cache: bool = True) -> list[ItemResult]: ...

    async def run(self, job: Job) -> Result: ...

    def snapshot(self) -> dict: ...  # the sandbox tier, in SandboxPool.snapshot()'s shape

    def lint_cache_hits(self) -> int: ...

    def queued(self) -> int: ...


def not_started(item: RewardItem, rollout_id: str, deadline_s: float) -> ItemResult:
    return ItemResult(id=item.id, rollout_id=rollout_id, status="infra_error", reward=None, profile=item.profile,
                      message=f"not started within the request's deadline of {deadline_s:g}s")


class LocalExecutor:
    """Embedded mode: a local pool, an in-process result cache, the rollout store on SQLite."""

    def __init__(self, pool: SandboxPool, settings: Settings, metrics: Metrics, store: Any) -> None:
        self.pool, self.settings, self.metrics, self.store = pool, settings, metrics, store
        self.scorer = Scorer(pool, settings)
        self.image_id, self.versions = self.scorer.image_id, self.scorer.versions
        self.builder = self.scorer.builder
        self.cache = LocalResultCache(settings.result_cache_size, settings.result_cache_ttl_s)
        self.key_versions = code_versions()
        # Items scored at once: two per sandbox keeps every sandbox busy while an item grades or lints.
        self._slots = asyncio.Semaphore(settings.worker_concurrency or 2 * pool.size)
        self._waiting = 0
        self._inflight: dict[str, asyncio.Future[dict]] = {}

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass

    def queued(self) -> int:
        return self._waiting

    def snapshot(self) -> dict:
        return self.pool.snapshot()

    def lint_cache_hits(self) -> int:
        return self.scorer.quality.hits

    async def run(self, job: Job) -> Result:
        return await self.pool.run(job)

    async def score_many(self, items: list[RewardItem], deadline_s: float | None = None,
                         use_cache: bool = True) -> list[ItemResult]:
        deadline_s = deadline_s or self.settings.deadline_s
        keys = [cache_key(item, self.key_versions) for item in items]
        new = len({k for k in keys if not (use_cache and (self.cache.get(k) or k in self._inflight))})
        if self._waiting + new > self.settings.max_queued:
            self.metrics.rejected.labels("overloaded").inc(len(items))
            raise Overloaded(f"{self._waiting} items queued; the bound is {self.settings.max_queued}")
        deadline = time.monotonic() + deadline_s
        return list(await asyncio.gather(*(self._one(item, key, deadline, deadline_s, use_cache)
                                           for item, key in zip(items, keys, strict=True))))

    async def _one(self, item: RewardItem, key: str, deadline: float, deadline_s: float,
                   use_cache: bool) -> ItemResult:
        started = time.perf_counter()
        rollout_id = uuid.uuid4().hex
        if use_cache:
            cached = self.cache.get(key)
            if cached is None and key in self._inflight:  # the same item is being scored now: share its result
                cached = await asyncio.shield(self._inflight[key])
            if cached is not None:
                self.metrics.result_cache.labels("hit").inc()
                return self._finish(item, as_hit(cached, item, rollout_id), started)
            self.metrics.result_cache.labels("miss").inc()
        future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        if use_cache:
            self._inflight[key] = future
        try:
            result = await self._score(item, rollout_id, deadline, deadline_s)
            payload = result.model_dump(mode="json")
            if cacheable(result):
                self.cache.put(key, payload)
            future.set_result(payload)  # items waiting on this one get its verdict (or its infra_error)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
            if not future.done():
                future.cancel()
        return self._finish(item, result, started)

    async def _score(self, item: RewardItem, rollout_id: str, deadline: float, deadline_s: float) -> ItemResult:
        queued = time.perf_counter()
        self._waiting += 1
        try:
            await asyncio.wait_for(self._slots.acquire(), max(deadline - time.monotonic(), 0.0))
        except TimeoutError:
            return not_started(item, rollout_id, deadline_s)
        finally:
            self._waiting -= 1
        waited_ms = (time.perf_counter() - queued) * 1000
        try:
            result = await self.scorer.score(item, rollout_id)
        finally:
            self._slots.release()
        result.details.setdefault("timings", {})["queue_ms"] = round(waited_ms, 3)
        return result

    def _finish(self, item: RewardItem, result: ItemResult, started: float) -> ItemResult:
        self.metrics.observe_item(result, time.perf_counter() - started)
        if self.store is not None:
            self.store.add(item.model_dump(mode="json"), result.model_dump(mode="json"), self.image_id,
                           self.versions)
        return result
