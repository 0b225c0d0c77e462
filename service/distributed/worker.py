"""`rewardbox worker`: consume jobs from Redis on a local warm sandbox pool (distributed mode).

Each worker reads only as many jobs as it has free slots, so a job read is a job started; it refreshes its in-flight
entries so that no one steals them, and claims entries left idle by dead workers. A job is acknowledged only in the
script that records its result (service/distributed/scripts.py). SIGTERM: stop reading, finish in-flight jobs for
REWARDBOX_WORKER_GRACE_S, hand the rest back to the stream for another worker, then exit. A worker that stops for
any other reason (an error of its own) hands back what it holds the same way: its consumer is deleted only once
nothing is pending for it, since deleting a consumer drops its pending entries with it. A job whose workers were
killed MAX_DELIVERIES times is answered infra_error, naming the deaths, by the worker that claims it next.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry
from redis.exceptions import RedisError, ResponseError

from sandboxes import SandboxPool
from sandboxes.image import use_cache_dir
from service.cache import cache_key, cacheable_status, code_versions
from service.config import Settings, sandbox_pool
from service.distributed.envelope import Envelope, MalformedEnvelope, RunEnvelope, ScoreEnvelope, envelope_from_json
from service.distributed.queue import DOWN, GROUP, HEARTBEAT_S, Queue, not_started_payload
from service.distributed.scripts import Recorded
from service.distributed.sessions import SessionServer
from service.distributed.store import rollout_record
from service.environments.build import BuildLimits
from service.environments.pools import set_lookup
from service.environments.store import EnvironmentStore
from service.fair import ITEMS, RUNS, item_scope, request_scope
from service.models import ItemResult, RewardItem
from service.repos.snapshots import repo_store
from service.scoring import Scorer
from service.sessions.manager import SessionManager

log = logging.getLogger("rewardbox.worker")
MAX_DELIVERIES = 3  # a job whose worker died this many times is answered infra_error rather than tried again
DEAD_AFTER_S = 3600  # a consumer with nothing pending and no activity this long belongs to a dead worker


@dataclass(frozen=True)
class Delivery:
    """A stream entry this worker read or claimed: the job's id, its envelope, and the envelope as it came (handed
    back verbatim)."""

    entry: str
    job_id: str
    envelope: Envelope
    data: str


class Worker:
    def __init__(self, pool: SandboxPool, settings: Settings) -> None:
        self.pool, self.settings = pool, settings
        self.scorer = Scorer(pool, settings)
        self.queue = Queue(settings)
        self.key_versions = code_versions()
        self.concurrency = settings.worker_concurrency or 2 * pool.size
        self.name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._jobs: dict[str, tuple[asyncio.Task, Delivery]] = {}  # by stream entry
        self._stopping = asyncio.Event()
        self.completed = 0

    def stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        await self._until_redis(self.queue.ensure_group)
        await self._until_redis(self.queue.check_epoch)
        beat = asyncio.create_task(self._heartbeat())
        sessions = await self._session_server()
        sessions_task = asyncio.create_task(sessions.run())
        log.info("worker %s: %d slots on %d sandboxes", self.name, self.concurrency, self.pool.size)
        last_claim = 0.0
        try:
            while not self._stopping.is_set():
                free = self.concurrency - len(self._jobs)
                if free <= 0:
                    await asyncio.wait([t for t, _ in self._jobs.values()], timeout=1.0,
                                       return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    deliveries: list[Delivery] = []
                    if time.monotonic() - last_claim > self.settings.claim_idle_s / 4:
                        last_claim = time.monotonic()
                        deliveries = await self._claim(free)
                    claimed = bool(deliveries)
                    if not claimed:
                        deliveries = await self._well_formed(await self._read(free))
                except DOWN as e:
                    log.warning("Redis down (%s); retrying", e)
                    await self._pause(1.0)
                    continue
                except ResponseError as e:
                    if "NOGROUP" not in str(e):
                        raise
                    await self.queue.ensure_group()  # Redis restarted without its data
                    continue
                await self._took(deliveries)
                for delivery in deliveries:
                    self._start(delivery, claimed)
        finally:
            sessions_task.cancel()
            await sessions.close()
            await self._drain()
            await self.scorer.close()  # environments' pools (the default pool is its owner's)
            beat.cancel()
            try:
                await self.queue.redis.hdel(f"{self.queue.prefix}:workers", self.name)
                if await self._hand_back_pending():
                    await self.queue.redis.xgroup_delconsumer(self.queue.stream, GROUP, self.name)
            except RedisError as e:  # what we hold stays pending: another worker claims it after claim_idle_s
                log.error("handing back on exit failed: %s", e)
            await self.queue.close()

    async def _session_server(self) -> SessionServer:
        """Agent sessions pinned to this worker (service/distributed/sessions.py), on a session pool of their own."""
        manager = await SessionManager.embedded(self.pool.backend, repo_store(self.settings), _api_grades,
                                                CollectorRegistry(), self.settings.sessions)
        return SessionServer(self.queue.redis, self.queue.prefix, self.name, manager)

    async def _well_formed(self, entries: list) -> list[Delivery]:
        """Entries this version can run; anything else (written by hand, or by another version) is dropped with a
        log line rather than crash every worker that reads it."""
        good = []
        for entry, fields in entries:
            try:
                if isinstance(fields["job"], str):
                    good.append(Delivery(entry, fields["job"], envelope_from_json(fields["data"]), fields["data"]))
                    continue
            except (KeyError, TypeError, MalformedEnvelope):
                pass
            log.error("dropping malformed stream entry %s: %.200s", entry, fields)
            await self.queue.ack(entry)
        return good

    async def _took(self, deliveries: list[Delivery]) -> None:
        """The work of what we read or claimed no longer counts as queued (admission)."""
        try:
            await self.queue.take([d.job_id for d in deliveries])
        except DOWN as e:  # recording each job's result takes it too
            log.warning("Redis down (%s) marking jobs taken", e)

    async def _hand_back_pending(self) -> bool:
        """Hand back every entry still pending for this consumer (read or claimed but not recorded). True when
        nothing is left pending, so the consumer can go."""
        pending = await self.queue.redis.xpending_range(self.queue.stream, GROUP, "-", "+", 10_000,
                                                        consumername=self.name)
        for p in pending:
            entry = p["message_id"]
            found = await self.queue.redis.xrange(self.queue.stream, entry, entry)
            if found and found[0][1].get("job"):
                await self.queue.hand_back(entry, found[0][1]["job"], found[0][1]["data"])
                log.info("handed back job %s on exit", found[0][1]["job"])
            else:  # deleted meanwhile (its result was recorded)
                await self.queue.ack(entry)
        left = await self.queue.redis.xpending_range(self.queue.stream, GROUP, "-", "+", 1, consumername=self.name)
        return not left

    async def _read(self, count: int) -> list:
        reply = await self.queue.redis.xreadgroup(GROUP, self.name, {self.queue.stream: ">"}, count=count, block=1000)
        return reply[0][1] if reply else []

    async def _claim(self, count: int) -> list[Delivery]:
        """Entries another worker took and left idle for claim_idle_s: it died. Too many deaths: infra_error."""
        idle_ms = int(self.settings.claim_idle_s * 1000)
        _, entries, _ = await self.queue.redis.xautoclaim(self.queue.stream, GROUP, self.name, idle_ms, "0-0",
                                                          count=count)
        claimed = []
        for d in await self._well_formed([(e, f) for e, f in entries if f]):  # empty: deleted meanwhile
            info = await self.queue.redis.xpending_range(self.queue.stream, GROUP, d.entry, d.entry, 1)
            deliveries = info[0]["times_delivered"] if info else 1
            log.warning("claimed job %s from a dead worker (delivery %d)", d.job_id, deliveries)
            if deliveries > MAX_DELIVERIES:
                await self._record_failure(d, f"the workers running this job died {deliveries - 1} "
                                           f"times (killed or lost, e.g. by the OOM killer); not tried again")
                continue
            claimed.append(d)
        return claimed

    def _start(self, delivery: Delivery, claimed: bool) -> None:
        task = asyncio.create_task(self._handle(delivery, claimed))
        self._jobs[delivery.entry] = (task, delivery)
        task.add_done_callback(lambda _: self._jobs.pop(delivery.entry, None))

    async def _handle(self, d: Delivery, claimed: bool) -> None:
        try:  # the sandboxes are taken in turns by kind, request and item
            kind = ITEMS if isinstance(d.envelope, ScoreEnvelope) else RUNS
            with request_scope(kind, d.envelope.request), item_scope(d.job_id):
                await self._score_and_record(d, claimed)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the entry stays pending: claimed again, at most MAX_DELIVERIES times
            log.exception("job %s failed on this worker", d.job_id)

    async def _score_and_record(self, d: Delivery, claimed: bool) -> None:
        # A claimed job may have been finished by the worker that died (or is slow); a fresh one cannot have been.
        if claimed and await self.queue.redis.exists(f"{self.queue.prefix}:result:{d.job_id}"):
            await self.queue.ack(d.entry)
            return
        started = time.time()
        envelope = d.envelope
        item = RewardItem.model_validate(envelope.item) if isinstance(envelope, ScoreEnvelope) else None
        if started > envelope.deadline:
            payload = not_started_payload(envelope, d.job_id)
        elif item is None:
            assert isinstance(envelope, RunEnvelope)
            payload = (await self.scorer.pool.run(envelope.job)).to_dict()  # fair, like items
        else:
            result = await self.scorer.score(item, d.job_id)
            result.details.setdefault("timings", {})["queue_ms"] = round((started - envelope.enqueued) * 1000, 3)
            payload = result.model_dump(mode="json")
        await self._record(d, payload, item)

    async def _record(self, d: Delivery, payload: dict[str, Any], item: RewardItem | None) -> None:
        record, key, ok = "", "", False
        if item is not None and isinstance(d.envelope, ScoreEnvelope):
            if self.settings.db != "off":
                record = rollout_record(d.envelope.item, payload, self.scorer.image_id, self.scorer.versions)
            key = cache_key(item, self.key_versions)
            ok = cacheable_status(payload["status"])
        status = payload.get("status", "")
        delay = 0.2
        while True:  # a finished job is worth keeping: retry until Redis answers (or we are told to stop)
            try:
                recorded = await self.queue.record(d.job_id, d.entry, payload, record, status, key, ok)
                break
            except DOWN as e:  # when stopping, _drain cancels us after the grace period: the job stays pending
                log.warning("recording job %s: Redis down (%s); retrying", d.job_id, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.completed += recorded is Recorded.RECORDED

    async def _record_failure(self, d: Delivery, message: str) -> None:
        """A job that cannot be run: infra_error (ours), with the message saying why."""
        item = RewardItem.model_validate(d.envelope.item) if isinstance(d.envelope, ScoreEnvelope) else None
        payload = not_started_payload(d.envelope, d.job_id)
        payload["message" if item is not None else "error"] = message
        payload.pop("not_started", None)
        await self._record(d, payload, item)

    async def _drain(self) -> None:
        """Finish what we have within the grace period; hand back the rest (same job id: still recorded once)."""
        if not self._jobs:
            return
        tasks = [t for t, _ in self._jobs.values()]
        log.info("stopping: finishing %d jobs (grace %gs)", len(tasks), self.settings.worker_grace_s)
        await asyncio.wait(tasks, timeout=self.settings.worker_grace_s)
        for task, d in list(self._jobs.values()):
            task.cancel()
            try:
                await self.queue.hand_back(d.entry, d.job_id, d.data)
                log.info("handed back job %s", d.job_id)
            except RedisError as e:  # it stays pending: claimed by another worker after claim_idle_s
                log.error("handing back job %s failed: %s", d.job_id, e)

    async def _forget_the_dead(self) -> None:
        """Consumers of workers that died (nothing pending, silent for an hour) and their heartbeats go."""
        for consumer in await self.queue.redis.xinfo_consumers(self.queue.stream, GROUP):
            if consumer["pending"] == 0 and consumer["idle"] > DEAD_AFTER_S * 1000 and consumer["name"] != self.name:
                await self.queue.redis.xgroup_delconsumer(self.queue.stream, GROUP, consumer["name"])
        for name, beat in (await self.queue.redis.hgetall(f"{self.queue.prefix}:workers")).items():
            if time.time() - json.loads(beat)["time"] > DEAD_AFTER_S:
                await self.queue.redis.hdel(f"{self.queue.prefix}:workers", name)

    async def _heartbeat(self) -> None:
        """Keep our in-flight entries fresh (so no one claims them) and tell the API tier what we have."""
        last_sweep = time.monotonic()
        while True:
            try:
                entries = list(self._jobs)
                if entries:
                    await self.queue.redis.xclaim(self.queue.stream, GROUP, self.name, 0, entries, justid=True)
                environments = self.scorer.environments.snapshot() if self.scorer.environments else {}
                beat = {"consumer": self.name, "time": time.time(), "pool": self.pool.snapshot(),
                        "environments": environments,
                        "lint_hits": self.scorer.quality.hits, "image": self.scorer.image_id,
                        "versions": self.scorer.versions, "active": len(entries), "completed": self.completed}
                await self.queue.redis.hset(f"{self.queue.prefix}:workers", self.name, json.dumps(beat))
                if time.monotonic() - last_sweep > 60:
                    last_sweep = time.monotonic()
                    await self._forget_the_dead()
            except RedisError as e:
                log.warning("heartbeat: %s", e)
            await asyncio.sleep(min(HEARTBEAT_S, self.settings.claim_idle_s / 4))

    async def _until_redis(self, step) -> None:
        while True:
            try:
                return await step()
            except DOWN as e:
                log.warning("waiting for Redis: %s", e)
                await self._pause(1.0)
                if self._stopping.is_set():
                    raise SystemExit(0) from None

    async def _pause(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except TimeoutError:
            pass


async def _api_grades(items: Sequence[RewardItem]) -> list[ItemResult]:
    raise RuntimeError("session rewards are graded by the API process (service/distributed/sessions.py)")


async def serve(settings: Settings) -> None:
    if not settings.redis_url:
        raise SystemExit("rewardbox worker needs REWARDBOX_REDIS_URL (or REDIS_URL)")
    use_cache_dir(settings.cache_dir)
    # Items name environments by id: the worker builds nothing, it reads the environments built on this host.
    set_lookup(EnvironmentStore(limits=BuildLimits(settings.env_build_timeout_s, settings.env_build_memory_mb)).target)
    async with sandbox_pool(settings) as pool:
        worker = Worker(pool, settings)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, worker.stop)
        await worker.run()


def healthy(settings: Settings) -> bool:
    """A worker of this host (container) sent a heartbeat with a warm pool in the last 15 s."""
    import redis

    client = redis.Redis.from_url(settings.redis_url, decode_responses=True, socket_timeout=3)
    try:
        beats = [json.loads(b) for b in client.hgetall(f"{settings.redis_prefix}:workers").values()]
    except redis.RedisError:
        return False
    finally:
        client.close()
    mine = [b for b in beats if b["consumer"].startswith(socket.gethostname() + ":")]
    return any(time.time() - b["time"] < 15 and b["pool"]["warm"] for b in mine)
