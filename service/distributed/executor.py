"""Distributed mode's API side (REDIS_URL): validate a request's items, admit them onto the Redis stream by their
work (all or none), wait for their results from `rewardbox worker`s, answer cache hits and identical in-flight
items without running them again. When Redis is down new requests get 503; items whose queue was lost, or that
Redis cannot answer for GIVE_UP_DOWN_S, come back infra_error.

The wait rule of embedded mode (service/wait_line.py) holds here too, over this process's requests: a request
keeps its place in line until each of its items is answered (so an item running on a worker still counts: the
estimate errs long by at most one item per slot), the slots are those of the live workers (their heartbeats), and
the hold per unit is learned from the answers (an item's time on its worker: answered minus enqueued minus its
queue time; a run's wall time). Requests of other API processes are not in this process's line: with several,
each refuses on what it sends, and the case bound (checked in Redis) still holds across all of them."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

from redis.exceptions import RedisError

from sandboxes import Job, Result
from sandboxes.builds import Builder
from service.admission import Admission, Ticket
from service.cache import as_hit, code_versions
from service.config import Settings
from service.distributed.envelope import Envelope, RunEnvelope, ScoreEnvelope
from service.distributed.queue import DOWN, Queue, Submission, connect, not_started_payload
from service.distributed.scripts import Cached, Finished, Queued
from service.distributed.store import RedisRolloutStore, rollout_record
from service.errors import NotStarted, Overloaded, Unavailable
from service.executor import checked, invalid_result, too_big
from service.fair import ITEMS, RUNS
from service.metrics import Metrics
from service.models import ItemResult, RewardItem
from service.validation import Problem, item_work, item_worst_s
from service.wait_line import Place, WaitLine

log = logging.getLogger("rewardbox.api")
WORKER_STALE_S = 15.0  # a worker whose last heartbeat is older is not counted
GIVE_UP_DOWN_S = 10.0  # requests waiting while Redis is unreachable this long answer infra_error


class RedisExecutor:
    """The API side: admits items (all of a request or none), waits for their results, answers cache hits itself."""

    size = 16  # /run_code compiles in flight from this API process (Builder's bound); items compile on workers

    def __init__(self, settings: Settings, metrics: Metrics) -> None:
        self.settings, self.metrics = settings, metrics
        self.queue = Queue(settings)
        self.reader = connect(settings.redis_url, timeout_s=10.0)  # BLPOP blocks a connection of its own
        self.reply = f"{self.queue.prefix}:reply:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.store = None if settings.db == "off" else RedisRolloutStore(
            settings.redis_url, settings.redis_prefix, settings.redis_retention)
        self.key_versions = code_versions()
        self.image_id = ""
        self.versions: dict[str, str] = {}
        self.builder = Builder(self)
        self._waiting: dict[str, list[asyncio.Future[dict]]] = {}
        self._early: dict[str, tuple[float, dict]] = {}  # replies that came before their waiter registered
        self._epoch_of: dict[str, str] = {}  # our jobs -> the Redis epoch they were enqueued in
        self._down_since: float | None = None
        self._snapshot: dict[str, Any] = _empty_snapshot()
        self._lint_hits = 0
        # This process's requests between arrival and enqueue; `elsewhere` is the queue in Redis as last seen.
        self.admission = Admission(settings.max_queued)
        self.line = WaitLine(settings.max_wait_s, 0)  # its capacity: the live workers' slots (_read_workers)
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        try:
            await self.queue.ensure_group()
            await self.queue.check_epoch()
        except DOWN as e:
            log.error("Redis is not reachable yet (%s); requests get 503 until it is", e)
        self._tasks = [asyncio.create_task(self._read_replies()), asyncio.create_task(self._monitor())]

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.reader.aclose()
        await self.queue.close()
        if self.store is not None:
            self.store.close()

    def queued(self) -> int:
        return self.admission.elsewhere + self.admission.queued

    def snapshot(self) -> dict:
        return self._snapshot

    def lint_cache_hits(self) -> int:
        return self._lint_hits

    # -- scoring

    async def score_many(self, items: Sequence[RewardItem | Any], deadline_s: float | None = None,
                         use_cache: bool = True) -> list[ItemResult]:
        started = time.perf_counter()
        estimate = sum(item_work(x) for x in items)
        if estimate > self.admission.bound:
            raise too_big(estimate, self.admission.bound, len(items))
        seconds = sum(self.line.hold(ITEMS).seconds(item_work(x), item_worst_s(x, self.settings)) for x in items)
        place = self._join(ITEMS, seconds, estimate, deadline_s or self.settings.deadline_s, len(items))
        # Refused here, before validation, when it cannot fit what Redis held a moment ago: a flood of requests
        # costs this process a counter each, not a validation each. The enqueue script has the last word.
        with place, await self._reserve(estimate) as ticket:
            parsed = await checked(items, self.settings, self.key_versions)
            good = [(i, c) for i, c in enumerate(parsed) if isinstance(c.item, RewardItem)]
            valid = [(i, c.item) for i, c in good if isinstance(c.item, RewardItem)]  # as good, for the checker
            answers = await self._submit(
                [c.dump or {} for _, c in good], [c.key if use_cache else "" for _, c in good],
                [item_work(c.item) for _, c in good], use_cache, deadline_s, ticket, place) if good else []
        results: list[ItemResult | None] = [invalid_result(raw, c.item) if isinstance(c.item, Problem) else None
                                            for raw, c in zip(items, parsed, strict=True)]
        for (i, item), (kind, payload) in zip(valid, answers, strict=True):
            results[i] = await self._result(item, kind, payload, started)
        return [r for r in results if r is not None]

    def _join(self, kind: str, seconds: float, work: int, deadline_s: float, items: int) -> Place:
        try:
            return self.line.join(kind, seconds, work, deadline_s)
        except Overloaded:
            self.metrics.rejected.labels("overloaded").inc(items)
            raise

    async def _reserve(self, work: int) -> Ticket:
        try:
            # Asked afresh only when this process's own requests leave room: Redis may be busy running the
            # enqueue of those very requests, and a refusal should not wait behind it.
            if not self.admission.fits(work) and self.admission.queued + work <= self.admission.bound:
                self.admission.elsewhere = await self.queue.queued()
            return self.admission.reserve(work)
        except DOWN as e:
            raise Unavailable(f"Redis: {e}") from None
        except Overloaded:
            self.metrics.rejected.labels("overloaded").inc(work)
            raise

    async def _result(self, item: RewardItem, kind: str, payload: dict, started: float) -> ItemResult:
        if kind == "own":
            result = ItemResult.model_validate({**payload, "id": item.id})
            self.metrics.result_cache.labels("miss").inc()
        elif kind == "lost":
            result = ItemResult.model_validate({**payload, "id": item.id, "profile": item.profile})
        else:  # a cached result, or that of an identical item scored for another request
            result = as_hit(payload, item, uuid.uuid4().hex)
            self.metrics.result_cache.labels("hit").inc()
            if self.store is not None:
                await asyncio.to_thread(self.store.add, item.model_dump(mode="json"),
                                        result.model_dump(mode="json"), self.image_id, self.versions)
        self.metrics.observe_item(result, time.perf_counter() - started)
        return result

    @asynccontextmanager
    async def admit(self, work: int, deadline_s: float | None = None, worst_s: float | None = None
                    ) -> AsyncIterator[None]:
        """Each /run_code job is admitted by the enqueue script; here what can never fit is refused, and what would
        wait too long (the request keeps its place until its jobs are answered)."""
        if work > self.admission.bound:
            raise too_big(work, self.admission.bound, 1)
        seconds = self.line.hold(RUNS).seconds(work, worst_s or work * self.settings.max_timeout_s)
        with self._join(RUNS, seconds, work, deadline_s or self.settings.deadline_s, 1):
            yield

    async def run(self, job: Job) -> Result:
        """A raw sandbox job (/run_code) on some worker's pool; never cached. Not started within twice the wait
        bound (the backstop of service/wait_line.py): NotStarted."""
        start_by = min(self.settings.deadline_s, 2 * self.settings.max_wait_s)
        [(kind, payload)] = await self._submit([job], [""], [1], False, start_by, hold_kind=RUNS)
        if payload.get("not_started"):
            raise NotStarted(payload.get("error") or "not started within the request's deadline")
        return Result.infra(payload["message"]) if kind == "lost" else Result.from_wire(payload)

    async def _submit(self, bodies: list[dict[str, Any] | Job], keys: list[str], works: list[int], use_cache: bool,
                      deadline_s: float | None, ticket: Ticket | None = None, place: Place | None = None,
                      hold_kind: str = ITEMS) -> list[tuple[str, dict]]:
        """Enqueue and wait; bodies are items (validated, as JSON) or raw jobs. Each answer is (kind, payload): own
        (our job's result), hit (cached or shared) or lost (no result could be had: our fault, infra_error).
        As each is answered, it leaves `place`, and the time our own job held its worker's slot is learned."""
        deadline_s = deadline_s or self.settings.deadline_s
        now = time.time()
        deadline, request = now + deadline_s, uuid.uuid4().hex  # workers share their sandboxes in turns by request
        jobs = [Submission(uuid.uuid4().hex, key,
                           ScoreEnvelope(item=body, deadline=deadline, enqueued=now, request=request)
                           if isinstance(body, dict)
                           else RunEnvelope(job=body, deadline=deadline, enqueued=now, request=request), work)
                for body, key, work in zip(bodies, keys, works, strict=True)]
        loop = asyncio.get_running_loop()
        own = {job.job_id: loop.create_future() for job in jobs}
        waits: dict[int, tuple[str, asyncio.Future[dict], str]] = {}
        for job_id, future in own.items():  # registered first: a fast worker may answer before enqueue returns
            self._waiting.setdefault(job_id, []).append(future)
        try:
            try:
                admitted = await self.queue.enqueue(self.reply, jobs, use_cache)
            except (Overloaded, Unavailable) as e:
                if ticket is not None:
                    ticket.close()
                self.metrics.rejected.labels("overloaded" if isinstance(e, Overloaded) else "unavailable").inc(
                    len(jobs))
                raise
            if ticket is not None:  # the work now counts in Redis
                ticket.close()
            self.admission.elsewhere = admitted.queued + sum(job.work for job in jobs)
            answers: list[Any] = []
            for job in jobs:
                self._epoch_of[job.job_id] = admitted.epoch
            for i, placed in enumerate(admitted.placements):
                if isinstance(placed, Cached | Finished):
                    answers.append(("hit", placed.result))
                    if place is not None:
                        place.started(jobs[i].work)
                else:  # our own job, or an identical item's that is still running
                    entry = placed.entry if isinstance(placed, Queued) else ""
                    future = own[placed.job_id] if placed.job_id in own else self._wait_for(placed.job_id)
                    waits[i] = (placed.job_id, future, entry)
                    future.add_done_callback(self._answered(jobs[i], place, hold_kind, placed.job_id in own))
                    answers.append(None)
            await self._recorded_meanwhile([(j, f) for j, f, _ in waits.values() if j not in own])
            await self._collect(waits, jobs, deadline_s)
            for i, (job_id, future, _) in waits.items():
                if future.done() and not future.cancelled():
                    answers[i] = ("own" if job_id == jobs[i].job_id else "hit", future.result())
                else:
                    answers[i] = ("lost", _lost(job_id, "no result from any worker in time"))
            return answers
        finally:
            for job_id, future in own.items():
                self._forget(job_id, future)
            for job_id, future, _ in waits.values():
                self._forget(job_id, future)
            for job in jobs:
                self._epoch_of.pop(job.job_id, None)

    def _answered(self, job: Submission, place: Place | None, kind: str, own: bool
                  ) -> Callable[[asyncio.Future[dict]], None]:
        def done(future: asyncio.Future[dict]) -> None:
            if place is not None:
                place.started(job.work)
            if own and not future.cancelled():
                held = held_s(future.result(), job.envelope.enqueued)
                if held is not None:
                    self.line.hold(kind).observe(job.work, held)

        return done

    async def _collect(self, waits: dict[int, tuple[str, asyncio.Future[dict], str]], jobs: list[Submission],
                       deadline_s: float) -> None:
        """Wait for the results; at the deadline, withdraw what no worker has started (it answers infra_error
        through the normal path); then give started items their whole time limit."""
        futures = [f for _, f, _ in waits.values()]
        if not futures:
            return
        _, pending = await asyncio.wait(futures, timeout=deadline_s)
        if not pending:
            return
        for i, (job_id, future, entry) in waits.items():
            if future in pending and entry:
                envelope = jobs[i].envelope
                try:
                    await self.queue.record(job_id, entry, not_started_payload(envelope, job_id),
                                            self._record_of(envelope, job_id), "infra_error", jobs[i].cache_key, False,
                                            only_if_undelivered=True)
                except RedisError as e:
                    log.warning("withdrawing job %s failed: %s", job_id, e)
        await asyncio.wait(pending, timeout=2 * self.settings.max_item_s + 30)

    def _record_of(self, envelope: Envelope, job_id: str) -> str:
        if not isinstance(envelope, ScoreEnvelope) or self.store is None:
            return ""
        return rollout_record(envelope.item, not_started_payload(envelope, job_id), self.image_id, self.versions)

    async def _recorded_meanwhile(self, attached: list[tuple[str, asyncio.Future[dict]]]) -> None:
        """A job we attached to may have been recorded, and its reply handed to another waiter of this process,
        before our future was registered. The result key is set before any reply is sent, so reading it after
        registering catches exactly those."""
        attached = [(j, f) for j, f in attached if not f.done()]
        if not attached:
            return
        try:
            found = await self.queue.redis.mget([f"{self.queue.prefix}:result:{j}" for j, _ in attached])
        except DOWN:
            return
        for (_, future), payload in zip(attached, found, strict=True):
            if payload is not None and not future.done():
                future.set_result(json.loads(payload))

    def _wait_for(self, job_id: str) -> asyncio.Future[dict]:
        future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        early = self._early.pop(job_id, None)
        if early is not None:
            future.set_result(early[1])
        else:
            self._waiting.setdefault(job_id, []).append(future)
        return future

    def _forget(self, job_id: str, future: asyncio.Future) -> None:
        waiters = self._waiting.get(job_id)
        if waiters and future in waiters:
            waiters.remove(future)
            if not waiters:
                del self._waiting[job_id]

    def _deliver(self, job_id: str, payload: dict) -> None:
        waiters = self._waiting.pop(job_id, None)
        if not waiters:
            self._early[job_id] = (time.monotonic(), payload)
            return
        for future in waiters:
            if not future.done():
                future.set_result(payload)

    def _fail_all(self, message: str, epoch: str | None = None) -> None:
        """Answer infra_error to every waiter (of jobs enqueued in `epoch`, when given): their results cannot come."""
        for job_id in list(self._waiting):
            if epoch is None or self._epoch_of.get(job_id, epoch) == epoch:
                self._deliver(job_id, _lost(job_id, message))

    # -- background

    async def _read_replies(self) -> None:
        while True:
            try:
                popped = await self.reader.blpop([self.reply], timeout=1)
            except DOWN as e:
                log.warning("reply reader: Redis down (%s)", e)
                await asyncio.sleep(0.5)
                continue
            if popped:
                job_id, _, payload = popped[1].partition("\n")
                self._deliver(job_id, json.loads(payload))
            cutoff = time.monotonic() - 60
            for job_id in [j for j, (t, _) in self._early.items() if t < cutoff]:
                del self._early[job_id]

    async def _monitor(self) -> None:
        """Once a second: did Redis lose its data (then nothing we wait for will come), queue depth, workers."""
        while True:
            try:
                old = self.queue.epoch
                if await self.queue.check_epoch():
                    log.error("Redis lost its data (restarted without persistence): failing the jobs it held")
                    self._fail_all("the queue was lost (Redis restarted without its data)", old)
                self._down_since = None
                self.admission.elsewhere = await self.queue.queued()
                self._read_workers(await self.queue.redis.hgetall(f"{self.queue.prefix}:workers"))
            except DOWN:
                self._snapshot = {**self._snapshot, "warm": False}
                self._down_since = self._down_since or time.monotonic()
                if time.monotonic() - self._down_since > GIVE_UP_DOWN_S and self._waiting:
                    # Whatever comes back later is still recorded and cached: a client that asks again gets it.
                    self._fail_all(f"Redis unreachable for more than {GIVE_UP_DOWN_S:g}s")
            except RedisError as e:
                log.warning("monitor: %s", e)
            await asyncio.sleep(1.0)

    def _read_workers(self, beats: dict[str, str]) -> None:
        live = [b for b in map(json.loads, beats.values()) if time.time() - b["time"] < WORKER_STALE_S]
        # A worker scores this many items at once (service/distributed/worker.py): the slots the wait line is served by.
        self.line.capacity = sum(self.settings.worker_concurrency or 2 * b["pool"]["size"] for b in live)
        snap = _empty_snapshot()
        for beat in live:
            for k in ("size", "idle", "busy", "started", "replaced", "start_failures", "jobs", "sandbox_errors"):
                snap[k] += beat["pool"][k]
            snap["warm"] = snap["warm"] or beat["pool"]["warm"]
            snap["backend"] = beat["pool"]["backend"]
        snap["workers"] = len(live)
        self._snapshot = snap
        self._lint_hits = sum(b.get("lint_hits", 0) for b in live)
        if live:
            self.image_id, self.versions = live[0]["image"], live[0]["versions"]


def _empty_snapshot() -> dict[str, Any]:
    return {"backend": "none", "size": 0, "idle": 0, "busy": 0, "warm": False, "started": 0, "replaced": 0,
            "start_failures": 0, "jobs": 0, "sandbox_errors": 0, "workers": 0}


def held_s(payload: dict[str, Any], enqueued: float) -> float | None:
    """How long a job held its worker's slot: an item's answer less its time in the queue (the worker's
    timings.queue_ms), a raw job's wall time; None when the payload says neither (lost, not started)."""
    if payload.get("not_started") or payload.get("status") == "infra_error" and "details" not in payload:
        return None
    queue_ms = ((payload.get("details") or {}).get("timings") or {}).get("queue_ms")
    if isinstance(queue_ms, int | float):
        return max(0.0, time.time() - enqueued - queue_ms / 1000)
    wall_ms = payload.get("wall_ms")
    return wall_ms / 1000 if isinstance(wall_ms, int | float) else None


def _lost(job_id: str, message: str) -> dict[str, Any]:
    return {"rollout_id": job_id, "status": "infra_error", "reward": None, "message": message, "error": message}
