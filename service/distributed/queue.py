"""Distributed mode (REDIS_URL): API processes put items on a Redis stream, `rewardbox worker` processes on any host
consume them through a consumer group, and each result comes back to the waiting request. This module holds what
both sides share (the stream, its group, the atomic scripts); service/distributed/executor.py is the API side,
service/distributed/worker.py the worker.

Delivery: Redis Streams with one consumer group. A worker reads with XREADGROUP, keeps its in-flight entries fresh
(XCLAIM JUSTID) and acknowledges only when the result is recorded; an entry left idle by a dead worker is claimed by
another (XAUTOCLAIM). A result is recorded once per job id (SET NX inside one Lua script that also stores the
rollout, fills the cache, notifies the waiters, acks and deletes the entry), so a redelivered job cannot count twice.
Replies go to one list per API process (RPUSH; read by BLPOP), so a request gets its result whether it started
waiting before or after the result arrived; the result key and the stored rollout outlive an API restart.

What an entry carries is an envelope (service/distributed/envelope.py); what the scripts answer is decoded into typed
values next to them (service/distributed/scripts.py).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sandboxes import Result
from service.config import Settings
from service.distributed import scripts as scripts
from service.distributed.envelope import Envelope, RunEnvelope, envelope_from_json
from service.distributed.scripts import GROUP, Admitted, Recorded
from service.errors import Overloaded, Unavailable
from service.executor import not_started
from service.models import RewardItem

DOWN = (RedisConnectionError, RedisTimeoutError, OSError)
HEARTBEAT_S = 2.0


def result_ttl_s(s: Settings) -> int:
    """How long a job's result key (its idempotence marker) lives: longer than any duplicate delivery of the job
    can still be running (its entry is deleted when the result is recorded)."""
    return int(2 * s.max_item_s + s.claim_idle_s + 300)


def reply_ttl_s(s: Settings) -> int:
    """How long a request's reply list and waiter marks live: its deadline plus a whole item run twice."""
    return int(s.deadline_s + 2 * s.max_item_s + 120)


MAX_CONNECTIONS = 100  # per client: redis-py's default
CONNECTION_WAIT_S = 10.0


def connect(url: str, timeout_s: float = 5.0) -> aioredis.Redis:
    """A client whose commands wait (up to CONNECTION_WAIT_S) for one of its connections when all are in use: the
    default pool raises at once instead, and a burst of requests (200 at once) then answers 500."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=MAX_CONNECTIONS, timeout=CONNECTION_WAIT_S, decode_responses=True,
        socket_timeout=timeout_s, socket_connect_timeout=2, retry_on_timeout=False)
    return aioredis.Redis.from_pool(pool)


@dataclass(frozen=True)
class Submission:
    """One job a request puts on the stream: its id, its cache key ("" = not cached), what it carries, and its
    weight in admission (test cases)."""

    job_id: str
    cache_key: str
    envelope: Envelope
    work: int


def not_started_payload(envelope: Envelope, job_id: str) -> dict[str, Any]:
    """What an item (or a /run_code job) not started by its deadline answers."""
    deadline_s = envelope.deadline - envelope.enqueued
    if isinstance(envelope, RunEnvelope):
        return {**Result.infra(f"not started within the request's deadline of {deadline_s:g}s").to_dict(),
                "not_started": True}
    item = RewardItem.model_validate(envelope.item)
    return not_started(item, job_id, deadline_s).model_dump(mode="json")


class Queue:
    """The Redis side shared by API processes and workers: the stream, its group, and the atomic scripts."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.prefix = settings.redis_prefix
        self.stream = f"{self.prefix}:jobs"
        self.redis = connect(settings.redis_url)
        self._enqueue = self.redis.register_script(scripts.ENQUEUE)
        self._record = self.redis.register_script(scripts.RECORD)
        self._hand_back = self.redis.register_script(scripts.HAND_BACK)
        self._take = self.redis.register_script(scripts.TAKE)
        self.epoch: str | None = None

    async def ensure_group(self) -> None:
        """The consumer group exists (created at id 0, so entries added before it are delivered too)."""
        try:
            await self.redis.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except ResponseError as e:
            if "BUSYGROUP" not in str(e):
                raise

    async def check_epoch(self) -> bool:
        """True when Redis lost its data since the last call (a restart without persistence)."""
        fresh = uuid.uuid4().hex
        await self.redis.set(f"{self.prefix}:epoch", fresh, nx=True)
        epoch = await self.redis.get(f"{self.prefix}:epoch")
        lost = self.epoch is not None and epoch != self.epoch
        self.epoch = epoch
        if lost:
            await self.ensure_group()
        return lost

    async def enqueue(self, reply: str, jobs: list[Submission], use_cache: bool) -> Admitted:
        """Admit the jobs, all or none. Raises Overloaded, or Unavailable when Redis is down."""
        ttl = reply_ttl_s(self.settings)
        args: list[Any] = [self.prefix, self.stream, self.settings.max_queued, reply, ttl, "1" if use_cache else "0"]
        for job in jobs:
            args += [job.job_id, job.cache_key, job.envelope.to_json(), job.work]
        try:
            answer = scripts.decode_enqueue(await self._enqueue(args=args))
        except DOWN as e:
            raise Unavailable(f"Redis: {e}") from None
        if isinstance(answer, scripts.Refused):
            asked = sum(job.work for job in jobs)
            raise Overloaded(f"{answer.queued} test cases queued, up to {asked} more asked; the bound is "
                             f"{self.settings.max_queued} (REWARDBOX_MAX_QUEUED)")
        return answer

    async def record(self, job_id: str, entry: str, payload: dict[str, Any], record: str, status: str,
                     key: str, cacheable: bool, only_if_undelivered: bool = False) -> Recorded:
        s = self.settings
        return scripts.decode_record(await self._record(args=[
            self.prefix, self.stream, entry, job_id, json.dumps(payload), record, status,
            s.redis_retention, key, "1" if cacheable else "0", int(s.result_cache_ttl_s) or 1, s.result_cache_size,
            result_ttl_s(s), reply_ttl_s(s), "1" if only_if_undelivered else "0"]))

    async def ack(self, entry: str) -> None:
        """Done with an entry whose result is already recorded (a duplicate delivery)."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.xack(self.stream, GROUP, entry)
        pipe.xdel(self.stream, entry)
        await pipe.execute()

    async def hand_back(self, entry: str, job_id: str, data: str) -> None:
        """Put a job back on the stream as it came (`data`: its entry's envelope, verbatim)."""
        await self._hand_back(args=[self.prefix, self.stream, entry, job_id, data, envelope_from_json(data).work])

    async def take(self, job_ids: list[str]) -> None:
        """A worker took these jobs: their work is no longer queued."""
        if job_ids:
            await self._take(args=[self.prefix, *job_ids])

    async def queued(self) -> int:
        """Work (test cases) of the jobs no worker has taken yet."""
        return int(await self.redis.get(f"{self.prefix}:queued_work") or 0)

    async def close(self) -> None:
        await self.redis.aclose()
