"""Agent sessions in distributed mode: each session lives on one worker (pinned at creation), and the API routes
its calls there through Redis.

Theory of operation. A worker runs a SessionManager (service/sessions/manager.py) on a session pool of its own and
serves `{prefix}:sessions:rpc:<worker>` (a list: RPUSH by API processes, BLPOP here): each request is
{"op", "args", "reply", "call"} and its answer, tagged with `call`, goes to the list named by `reply` (RPUSH, with a
TTL): one list per API process, read by one task of that process (BLPOP in one-second slices) that hands each
answer to the call waiting for it, so that a flood of calls holds one Redis connection, not one each (200 session
commands at once used to exhaust the client's pool of 100 and answer 500). A waiting call looks at the owner's
heartbeat (`{prefix}:workers`, written by service/distributed/worker.py every couple of seconds, read at most every
BEATS_FRESH_S for all calls) once a second: an owner silent for DEAD_AFTER_S is dead, and the call answers 410
naming it, never a hang. Where each session lives is the hash `{prefix}:sessions` (id -> owner, repo, created,
ttl), written by the owner; the API picks the live worker holding the fewest sessions for a new one. A reward is
graded like any distributed item: the owner hands back the diff and history (op "submission") and the API scores
the repo item through its RedisExecutor, so it is stored as a rollout in Redis.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from types import SimpleNamespace
from typing import Any

from service.environments.models import EnvironmentRef
from service.environments.pools import EnvironmentProblem
from service.errors import Overloaded
from service.sessions.manager import SessionGone, SessionManager, SessionSettings, Submission, grade
from service.sessions.models import SessionLimits
from service.sessions.workspace import Node, PathError

log = logging.getLogger("rewardbox.session_rpc")
DEAD_AFTER_S = 10.0  # a worker's heartbeat older than this: its sessions are gone (workers beat every ~2 s)
REPLY_TTL_S = 120
TOMBSTONE_TTL_S = 86400  # how long an ended session answers 410 (then 404)
CALL_MARGIN_S = 60.0  # beyond an exec's own timeout, how long a call may take before it is given up on
BEATS_FRESH_S = 0.5  # the workers' heartbeats, read once for every call waiting meanwhile


def rpc_key(prefix: str, worker: str) -> str:
    return f"{prefix}:sessions:rpc:{worker}"


def directory_key(prefix: str) -> str:
    return f"{prefix}:sessions"


def ended_key(prefix: str, sid: str) -> str:
    return f"{prefix}:sessions:ended:{sid}"


class SessionServer:
    """The worker side: serves its SessionManager's operations from Redis."""

    def __init__(self, redis: Any, prefix: str, name: str, manager: SessionManager) -> None:
        self.redis, self.prefix, self.name, self.manager = redis, prefix, name, manager
        self._tasks: set[asyncio.Task] = set()
        manager.on_end = self._forget
        manager.owner = name

    async def run(self) -> None:
        key = rpc_key(self.prefix, self.name)
        while True:
            try:
                got = await self.redis.blpop([key], timeout=1)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - Redis away: keep trying, as the worker's own loop does
                log.warning("session rpc: %s", e)
                await asyncio.sleep(1.0)
                continue
            if got is None:
                continue
            task = asyncio.create_task(self._serve(json.loads(got[1])))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _serve(self, req: dict[str, Any]) -> None:
        try:
            answer = {"ok": await self._dispatch(req["op"], req.get("args") or {})}
        except SessionGone as e:
            answer = {"error": {"kind": "gone", "status": e.status, "message": str(e)}}
        except PathError as e:
            answer = {"error": {"kind": "path", "status": e.status, "message": str(e)}}
        except EnvironmentProblem as e:  # the worker could not use the environment: the request's, told as such
            answer = {"error": {"kind": "path", "status": 422, "message": f"{'.'.join(e.loc)}: {e.message}"}}
        except Overloaded as e:
            answer = {"error": {"kind": "overloaded", "message": str(e), "retry_after_s": e.retry_after_s}}
        except Exception as e:  # noqa: BLE001 - a fault of ours, told to the caller rather than left to time out
            log.exception("session op %s failed", req.get("op"))
            answer = {"error": {"kind": "internal", "message": f"{type(e).__name__}: {e}"}}
        await self.redis.rpush(req["reply"], json.dumps({**answer, "call": req.get("call")}))
        await self.redis.expire(req["reply"], REPLY_TTL_S)

    async def _dispatch(self, op: str, a: dict[str, Any]) -> Any:
        m = self.manager
        if op == "create":
            env = EnvironmentRef.model_validate(a["environment"]) if a.get("environment") else None
            s = await m.create(a["repo_id"], float(a["ttl_s"]), SessionLimits.model_validate(a["limits"]), env)
            await self._register(s)
            return {"session_id": s.id, "bytes": s.bytes}
        if op == "exec":
            return await m.exec(a["sid"], a["command"], float(a["timeout_s"]), a.get("stdin"))
        if op == "read":
            node = await m.read(a["sid"], a["path"])
            return {"kind": node.kind, "data": node.data.decode("latin-1"), "executable": node.executable}
        if op == "write":
            await m.write(a["sid"], a["path"], a["content"])
            return {}
        if op == "diff":
            patch, skipped = await m.diff(a["sid"])
            return {"patch": patch, "not_in_patch": skipped}
        if op == "fork":
            kids = await m.fork(a["sid"], int(a["n"]))
            for kid in kids:
                await self._register(kid)
            return {"session_ids": [k.id for k in kids]}
        if op == "submission":
            return (await m.submission(a["sid"])).__dict__
        if op == "delete":
            await m.delete(a["sid"])
            return {}
        if op == "list":
            return await m.list_open()
        raise ValueError(f"unknown session op {op!r}")

    async def _register(self, s: Any) -> None:
        await self.redis.hset(directory_key(self.prefix), s.id, json.dumps(
            {"owner": self.name, "repo_id": s.repo_id, "created_at": s.created_at, "ttl_s": s.ttl_s}))

    def _forget(self, sid: str) -> None:
        task = asyncio.get_running_loop().create_task(self._tombstone(sid, self.manager.ended.get(sid, "ended")))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _tombstone(self, sid: str, why: str) -> None:
        await self.redis.set(ended_key(self.prefix, sid), why, ex=TOMBSTONE_TTL_S)
        await self.redis.hdel(directory_key(self.prefix), sid)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self.manager.on_end = None
        ids = list(self.manager.sessions)
        await self.manager.close()
        for sid in ids:
            await self._tombstone(sid, f"its worker {self.name} stopped")


class RemoteSessions:
    """The API side: the surface of SessionManager that the routes use, each call sent to the session's owner."""

    def __init__(self, redis: Any, prefix: str, score: Any, registry: Any, settings: SessionSettings) -> None:
        from service.sessions.manager import SessionMetrics

        self.redis, self.prefix, self.score = redis, prefix, score
        self.settings = settings
        self.metrics = SessionMetrics(registry)
        self.reply = f"{prefix}:sessions:reply:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._waiting: dict[str, asyncio.Future[dict[str, Any]]] = {}  # call id -> its answer
        self._reader: asyncio.Task | None = None
        self._beats: tuple[float, dict[str, float]] = (-BEATS_FRESH_S, {})  # (when read, live workers)
        self._beats_lock = asyncio.Lock()

    async def close(self) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _read_replies(self) -> None:
        """This process's one reader of answers: each to the call that waits for it (a call given up on: dropped)."""
        while True:
            try:
                got = await self.redis.blpop([self.reply], timeout=1)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - Redis away: the waiting calls time out on their own
                log.warning("session replies: %s", e)
                await asyncio.sleep(1.0)
                continue
            if got is None:
                continue
            answer = json.loads(got[1])
            waiter = self._waiting.pop(str(answer.get("call")), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(answer)

    async def _live_workers(self) -> dict[str, float]:
        async with self._beats_lock:  # calls waiting together read the heartbeats once
            if time.monotonic() - self._beats[0] >= BEATS_FRESH_S:
                beats = await self.redis.hgetall(f"{self.prefix}:workers")
                now = time.time()
                self._beats = (time.monotonic(), {name: json.loads(b)["time"] for name, b in beats.items()
                                                  if now - json.loads(b)["time"] < DEAD_AFTER_S})
            return self._beats[1]

    async def _owner(self, sid: str) -> str:
        raw = await self.redis.hget(directory_key(self.prefix), sid)
        if raw is None:
            why = await self.redis.get(ended_key(self.prefix, sid[:200]))
            if why is None:
                raise SessionGone(f"session {sid[:80]} does not exist", 404)
            raise SessionGone(f"session {sid} has ended: {why}")
        entry = json.loads(raw)
        if time.time() >= entry["created_at"] + entry["ttl_s"]:
            raise SessionGone(f"session {sid} has ended: expired (ttl_s {entry['ttl_s']:g})")
        return str(entry["owner"])

    async def _call(self, worker: str, op: str, wait_s: float = 30.0, **args: Any) -> Any:
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._read_replies())
        call = uuid.uuid4().hex
        answered = self._waiting[call] = asyncio.get_running_loop().create_future()
        try:
            await self.redis.rpush(rpc_key(self.prefix, worker), json.dumps(
                {"op": op, "args": args, "reply": self.reply, "call": call}))
            deadline = time.monotonic() + wait_s + CALL_MARGIN_S
            while True:
                try:
                    answer = await asyncio.wait_for(asyncio.shield(answered), 1.0)
                    break
                except TimeoutError:
                    pass
                if worker not in await self._live_workers():
                    await self.redis.delete(rpc_key(self.prefix, worker))
                    raise SessionGone(f"the worker {worker} that held this session died (no heartbeat for "
                                      f"{DEAD_AFTER_S:g}s): its sessions are lost")
                if time.monotonic() > deadline:
                    raise SessionGone(f"the worker {worker} did not answer within {wait_s + CALL_MARGIN_S:g}s")
        finally:
            self._waiting.pop(call, None)
        if "ok" in answer:
            return answer["ok"]
        err = answer["error"]
        if err["kind"] == "gone":
            raise SessionGone(err["message"], err["status"])
        if err["kind"] == "path":
            raise PathError(err["message"], err["status"])
        if err["kind"] == "overloaded":
            raise Overloaded(err["message"], err.get("retry_after_s", 5))
        raise RuntimeError(f"worker {worker}: {err['message']}")

    async def _at_owner(self, sid: str, op: str, wait_s: float = 30.0, **args: Any) -> Any:
        owner = await self._owner(sid)
        if owner not in await self._live_workers():
            raise SessionGone(f"session {sid} is lost: the worker {owner} that held it died (no heartbeat for "
                              f"{DEAD_AFTER_S:g}s)")
        return await self._call(owner, op, wait_s, sid=sid, **args)

    async def create(self, repo_id: str, ttl_s: float, limits: SessionLimits,
                     environment: EnvironmentRef | None = None) -> Any:
        live = await self._live_workers()
        if not live:
            raise Overloaded("no live worker to hold a session", retry_after_s=5)
        entries = [json.loads(v) for v in (await self.redis.hvals(directory_key(self.prefix)))]
        open_ = [e for e in entries if e["owner"] in live and time.time() < e["created_at"] + e["ttl_s"]]
        if len(open_) >= self.settings.max_open:
            self.metrics.events.labels("rejected").inc()
            raise Overloaded(f"{len(open_)} sessions open, at most {self.settings.max_open} "
                             "(REWARDBOX_SESSIONS_MAX): delete some or retry later", retry_after_s=5)
        load = {w: 0 for w in live}
        for e in open_:
            load[e["owner"]] += 1
        worker = min(load, key=lambda w: (load[w], w))
        env = environment.model_dump(exclude_none=True) if environment is not None else None
        body = await self._call(worker, "create", repo_id=repo_id, ttl_s=ttl_s, limits=limits.model_dump(),
                                environment=env)
        self.metrics.events.labels("created").inc()
        return SimpleNamespace(id=body["session_id"], bytes=body["bytes"])

    async def exec(self, sid: str, command: str, timeout_s: float, stdin: str | None) -> dict[str, Any]:
        out = await self._at_owner(sid, "exec", timeout_s, command=command, timeout_s=timeout_s, stdin=stdin)
        self.metrics.execs.labels(out["status"]).inc()
        return out

    async def read(self, sid: str, path: str) -> Node:
        body = await self._at_owner(sid, "read", path=path)
        return Node(body["kind"], body["data"].encode("latin-1"), body["executable"])

    async def write(self, sid: str, path: str, content: str) -> None:
        await self._at_owner(sid, "write", path=path, content=content)

    async def diff(self, sid: str) -> tuple[str, list[str]]:
        body = await self._at_owner(sid, "diff")
        return body["patch"], body["not_in_patch"]

    async def fork(self, sid: str, n: int) -> list[Any]:
        body = await self._at_owner(sid, "fork", n=n)
        self.metrics.events.labels("forked").inc(n)
        return [SimpleNamespace(id=i) for i in body["session_ids"]]

    async def delete(self, sid: str) -> None:
        await self._at_owner(sid, "delete")

    async def reward(self, sid: str, tests: Any, profile: str, client_id: str | None) -> Any:
        sub = Submission(**await self._at_owner(sid, "submission"))
        return await grade(sub, tests, profile, client_id, self.score, self.metrics)

    async def list_open(self) -> list[dict[str, Any]]:
        live = await self._live_workers()
        out: list[dict[str, Any]] = []
        for worker in live:
            try:
                out += await self._call(worker, "list", 5.0)
            except SessionGone:
                continue
        return out
