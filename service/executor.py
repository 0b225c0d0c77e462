"""Where items are scored: the seam between the routes and the sandboxes.

`Executor` is what the routes call. `LocalExecutor` (embedded mode, no REWARDBOX_REDIS_URL) scores in this process on a
local warm pool; `service.distributed.executor.RedisExecutor` (distributed mode) hands items to `rewardbox worker`
processes through Redis. Both validate every item (service/validation.py: every route goes through here), answer
the same results, consult the result cache, admit work up to the queue bound (service/admission.py: Overloaded ->
429) and while the wait it would face is short enough (service/wait_line.py: Overloaded -> 429), share the
sandboxes fairly between requests (service/fair.py) and turn items not started by the request's deadline into
infra_error.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from sandboxes import Job, Result, SandboxPool
from sandboxes.builds import Builder
from service.admission import Admission, Ticket
from service.cache import EncodedTests, LocalResultCache, RequestEncoder, as_hit, cacheable, code_versions
from service.cache import keyed as keyed_item
from service.config import Settings
from service.errors import NotStarted, Overloaded, Unavailable
from service.fair import ITEMS, LANE, RUNS, FairSlots, item_scope, request_scope
from service.metrics import Metrics
from service.models import ItemResult, RewardItem
from service.repos.snapshots import check_repo, repo_store
from service.scoring import Scorer
from service.validation import InvalidRequest, Problem, check_item, item_work, item_worst_s, parse_item, value_problem
from service.wait_line import Place, WaitLine

__all__ = ["Executor", "LocalExecutor", "NotStarted", "Overloaded", "Unavailable", "not_started"]
THREAD_AT = 32  # items: larger requests are validated in a thread, so the event loop keeps answering meanwhile


class Executor(Protocol):
    settings: Settings
    image_id: str
    versions: dict[str, str]
    store: Any
    builder: Builder  # compiles for /run_code; items compile where they are scored

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def score_many(self, items: Sequence[RewardItem | Any], deadline_s: float | None = None,
                         use_cache: bool = True) -> list[ItemResult]:
        """Raw items (batch JSON) or validated ones; each is checked here, and one that is invalid comes back
        invalid_input on its own. Raises Overloaded / Unavailable (nothing was accepted) or InvalidRequest (the
        request as a whole can never be accepted)."""
        ...

    def admit(self, work: int, deadline_s: float | None = None, worst_s: float | None = None
              ) -> AbstractAsyncContextManager[None]:
        """Around a /run_code request's jobs (work: how many; worst_s: the longest they may hold a sandbox, their
        wall limits): admission and its fair share. Raises Overloaded or NotStarted."""
        ...

    async def run(self, job: Job) -> Result: ...

    def snapshot(self) -> dict: ...  # the sandbox tier, in SandboxPool.snapshot()'s shape

    def lint_cache_hits(self) -> int: ...

    def queued(self) -> int: ...


def not_started(item: RewardItem, rollout_id: str, deadline_s: float) -> ItemResult:
    return ItemResult(id=item.id, rollout_id=rollout_id, status="infra_error", reward=None, profile=item.profile,
                      message=f"not started within the request's deadline of {deadline_s:g}s")


def invalid_result(raw: Any, problem: Problem) -> ItemResult:
    """An item the service will not run: reward null, the field at fault in `message` and `details.invalid`."""
    fields = raw if isinstance(raw, dict) else {"id": getattr(raw, "id", None),
                                                "profile": getattr(raw, "profile", None)}

    def echo(value: Any) -> str | None:
        ok = isinstance(value, str) and len(value) <= 256 and value_problem(value) is None
        return value if ok else None

    return ItemResult(id=echo(fields.get("id")), rollout_id="", status="invalid_input", reward=None,
                      profile=echo(fields.get("profile")), message=problem.message,
                      details={"invalid": [problem.error(prefix=())]})


@dataclass
class Checked:
    """An item after validation: the model, its result-cache key and its JSON form, or the problem."""

    item: RewardItem | Problem
    key: str = ""
    dump: dict[str, Any] | None = None
    tests: EncodedTests | None = None  # the tests as encoded for the key, for the rollout store


async def checked(items: Sequence[RewardItem | Any], settings: Settings, key_versions: dict[str, str]
                  ) -> list[Checked]:
    """Every item parsed, checked, keyed and dumped; a large request in a thread (pydantic and hashing hold the
    GIL in bursts of one item, so the event loop keeps answering between them)."""

    def parse(raw: RewardItem | Any) -> RewardItem | Problem:
        return check_item(raw, settings) if isinstance(raw, RewardItem) else parse_item(raw, settings)

    encoder = RequestEncoder()  # the samples of one problem share their tests: encoded and hashed once

    def keyed(item: RewardItem | Problem) -> Checked:
        if isinstance(item, Problem):
            return Checked(item)
        dump = item.model_dump(mode="json")
        key, tests = keyed_item(item, key_versions, dump, encoder)
        return Checked(item, key, dump, tests)

    async def in_thread(fn: Any, values: Sequence[Any]) -> list[Any]:
        if len(values) >= THREAD_AT:
            return await asyncio.to_thread(lambda: [fn(x) for x in values])
        return [fn(x) for x in values]

    parsed: list[RewardItem | Problem] = await in_thread(parse, items)
    for i, item in enumerate(parsed):  # repo items: inline archives stored, named snapshots checked (before keying)
        if isinstance(item, RewardItem) and item.repo is not None:
            parsed[i] = await check_repo(item, repo_store(settings)) or item
    return await in_thread(keyed, parsed)


def too_big(work: int, bound: int, items: int = 2) -> InvalidRequest:
    """A request that could never be admitted, whatever the queue holds (one item's cases: the request as a
    whole is at fault; a batch's: its items)."""
    loc = () if items == 1 else ("items",)
    return InvalidRequest([Problem(loc, f"the request holds {work} test cases to run; at most {bound} are accepted "
                                   "at once (REWARDBOX_MAX_QUEUED): send it in smaller requests", "too_long")])


class LocalExecutor:
    """Embedded mode: a local pool, an in-process result cache over the rollout store (SQLite)."""

    def __init__(self, pool: SandboxPool, settings: Settings, metrics: Metrics, store: Any) -> None:
        self.settings, self.metrics, self.store = settings, metrics, store
        self.scorer = Scorer(pool, settings)
        self.pool = self.scorer.pool  # the FairPool every job goes through
        self.image_id, self.versions = self.scorer.image_id, self.scorer.versions
        self.builder = self.scorer.builder
        self.cache = LocalResultCache(settings.result_cache_size, settings.result_cache_ttl_s)
        self.key_versions = code_versions()
        self.admission = Admission(settings.max_queued)
        # Items scored at once: two per sandbox keeps every sandbox busy while an item grades or lints. Taken in
        # turns by request, like the sandboxes: a big batch cannot hold them all while a small request waits.
        self.item_slots = FairSlots(settings.worker_concurrency or 2 * pool.size)
        self.line = WaitLine(settings.max_wait_s, self.item_slots.capacity)
        self._inflight: dict[str, asyncio.Future[dict]] = {}

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        await self.scorer.close()

    def environments(self) -> dict:
        """Per environment other than the default: its pool's snapshot (/readyz, metrics)."""
        envs = self.scorer.environments
        return envs.snapshot() if envs is not None else {}

    def queued(self) -> int:
        return self.admission.queued

    def snapshot(self) -> dict:
        return self.pool.snapshot()

    def lint_cache_hits(self) -> int:
        return self.scorer.quality.hits

    async def run(self, job: Job) -> Result:
        return await self.pool.run(job)

    @asynccontextmanager
    async def admit(self, work: int, deadline_s: float | None = None, worst_s: float | None = None
                    ) -> AsyncIterator[None]:
        deadline_s = deadline_s or self.settings.deadline_s
        # Admitted when the wait ahead is under the bound, so started within about the bound; twice that is the
        # backstop for a flood slower than the estimate (service/wait_line.py).
        start_by = min(deadline_s, 2 * self.settings.max_wait_s)
        if work > self.admission.bound:
            raise too_big(work, self.admission.bound, 1)
        hold = self.line.hold(RUNS)
        ticket, place = self._admitted(work, RUNS, hold.seconds(work, worst_s or work * self.settings.max_timeout_s),
                                       deadline_s, 1)
        with ticket, place, request_scope(RUNS):
            if not await self.item_slots.acquire((*LANE.get(), 0), start_by):
                raise NotStarted(f"not started within {start_by:g}s (twice REWARDBOX_MAX_WAIT_S, or the deadline)")
            ticket.close()
            place.leave()
            started = time.monotonic()
            try:
                yield
            finally:
                self.item_slots.release()
                hold.observe(work, time.monotonic() - started)

    def _admitted(self, work: int, kind: str, seconds: float, deadline_s: float, items: int) -> tuple[Ticket, Place]:
        """The request's reservation by test cases and its place in line by expected time; Overloaded when
        either does not fit (nothing is kept)."""
        try:
            ticket = self.admission.reserve(work)
        except Overloaded:
            self.metrics.rejected.labels("overloaded").inc(items)
            raise
        try:
            return ticket, self.line.join(kind, seconds, work, deadline_s)
        except Overloaded:
            ticket.close()
            self.metrics.rejected.labels("overloaded").inc(items)
            raise

    async def score_many(self, items: Sequence[RewardItem | Any], deadline_s: float | None = None,
                         use_cache: bool = True) -> list[ItemResult]:
        deadline_s = deadline_s or self.settings.deadline_s
        deadline = time.monotonic() + deadline_s
        estimate = sum(item_work(x) for x in items)
        hold = self.line.hold(ITEMS)
        seconds = sum(hold.seconds(item_work(x), item_worst_s(x, self.settings)) for x in items)
        # Reserved before anything is spent on the request; resized to its real work once that is known.
        ticket, place = self._admitted(min(estimate, self.admission.bound), ITEMS, seconds, deadline_s, len(items))
        with ticket, place, request_scope():
            try:
                parsed = await checked(items, self.settings, self.key_versions)
                valid = [(i, c.item) for i, c in enumerate(parsed) if isinstance(c.item, RewardItem)]
                keys = [c.key for c in parsed if isinstance(c.item, RewardItem)]
                new = self._new_work(valid, keys, use_cache)
                if new > self.admission.bound:
                    raise too_big(new, self.admission.bound, len(items))
                ticket.resize(new)
                place.resize(new)
            except Overloaded:
                self.metrics.rejected.labels("overloaded").inc(len(items))
                raise
            results: list[ItemResult | None] = [
                invalid_result(raw, c.item) if isinstance(c.item, Problem) else None
                for raw, c in zip(items, parsed, strict=True)]
            good = [c for c in parsed if isinstance(c.item, RewardItem)]
            ones = [self._one(item, key, c.dump, i, deadline, deadline_s, use_cache, ticket, place, c.tests)
                    for (i, item), key, c in zip(valid, keys, good, strict=True)]
            # A lone item is awaited here: a task of its own would only cost a turn of the event loop.
            scored = [await ones[0]] if len(ones) == 1 else await asyncio.gather(*ones)
            for (i, _), result in zip(valid, scored, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    def _new_work(self, valid: list[tuple[int, RewardItem]], keys: list[str], use_cache: bool) -> int:
        """The work this request brings: items not cached (in memory or in the store) and not being scored now,
        each key counted once. Verdicts found in the store go into the memory cache for _one to find."""
        if not use_cache:
            return sum(item_work(item) for _, item in valid)
        missing = [k for k in keys if self.cache.get(k) is None and k not in self._inflight]
        if missing and self.store is not None and self.settings.result_cache_size > 0:
            for key, result in self.store.cached(list(set(missing)), self.settings.result_cache_ttl_s).items():
                self.cache.put(key, result)
        work: dict[str, int] = {}
        for (_, item), key in zip(valid, keys, strict=True):
            if key not in self._inflight and self.cache.get(key) is None:
                work.setdefault(key, item_work(item))
        return sum(work.values())

    async def _one(self, item: RewardItem, key: str, dump: dict[str, Any] | None, index: int, deadline: float,
                   deadline_s: float, use_cache: bool, ticket: Ticket, place: Place,
                   tests: EncodedTests | None = None) -> ItemResult:
        """dump: the item's JSON form (Checked.dump), stored with its rollout; tests: Checked.tests."""
        started = time.perf_counter()
        rollout_id = uuid.uuid4().hex
        if use_cache:
            cached = self.cache.get(key)
            if cached is None and key in self._inflight:  # the same item is being scored now: share its result
                cached = await asyncio.shield(self._inflight[key])
            if cached is not None:
                self.metrics.result_cache.labels("hit").inc()
                return self._finish(item, dump, as_hit(cached, item, rollout_id), None, started, None, tests)
            self.metrics.result_cache.labels("miss").inc()
        future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        if use_cache:
            self._inflight[key] = future
        try:
            with item_scope(index):
                result = await self._score(item, rollout_id, deadline, deadline_s, ticket, place)
            payload = result.model_dump(mode="json")
            if cacheable(result):
                self.cache.put(key, payload)
            future.set_result(payload)  # items waiting on this one get its verdict (or its infra_error)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
            if not future.done():
                future.cancel()
        return self._finish(item, dump, result, payload, started, key if cacheable(result) else None, tests)

    async def _score(self, item: RewardItem, rollout_id: str, deadline: float, deadline_s: float,
                     ticket: Ticket, place: Place) -> ItemResult:
        queued = time.perf_counter()
        got = await self.item_slots.acquire((*LANE.get(), rollout_id), max(deadline - time.monotonic(), 0.0))
        ticket.started(item_work(item))
        place.started(item_work(item))
        if not got:
            return not_started(item, rollout_id, deadline_s)
        started = time.perf_counter()
        waited_ms = (started - queued) * 1000
        try:
            result = await self.scorer.score(item, rollout_id)
        finally:
            self.item_slots.release()
            self.line.hold(ITEMS).observe(item_work(item), time.perf_counter() - started)
        result.details.setdefault("timings", {})["queue_ms"] = round(waited_ms, 3)
        return result

    def _finish(self, item: RewardItem, dump: dict[str, Any] | None, result: ItemResult,
                payload: dict[str, Any] | None, started: float, key: str | None,
                tests: EncodedTests | None = None) -> ItemResult:
        """dump, payload: the item's and the result's JSON forms where the caller has them already."""
        self.metrics.observe_item(result, time.perf_counter() - started)
        if self.store is not None:
            self.store.add(dump or item.model_dump(mode="json"), payload or result.model_dump(mode="json"),
                           self.image_id, self.versions, cache_key=key, tests=tests if dump else None)
        return result
