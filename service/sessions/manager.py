"""Agent sessions: stateful, forkable workspaces for multi-turn coding agents (routes: service/sessions/routes.py).

Theory of operation. A session is a snapshot (a stored repository, service/repos/snapshots.py) plus the session's delta,
held here as plain data (service/sessions/workspace.py); no sandbox holds anything of it between two calls. Each
command is one job (op "session", sandboxes/inside/session_exec.py) on the session pool, a SandboxPool of its
own, apart from the scoring pool, so that agents running long commands never take sandboxes from /reward: the
sandbox builds the workspace afresh from the snapshot it keeps in memory and the delta the job carries, runs the
command, kills whatever it left running and sends back the new delta. The pool's clean-up after every job is
what isolates sessions, forks included: a fork is a copy of the delta, here.

- exec: commands of one session run one at a time (a lock per session); a command's changes count only when the
  sandbox reports them (a sandbox_error or a workspace over its caps leaves the session as it was).
- reward: the session's diff, graded as a repo item by the executor (a fresh sandbox from the snapshot, the
  trusted test files restored, stored as a rollout whose metadata carries the session's command history).
- life: ttl_s from creation; expiry and DELETE answer 410 at once (404 for an id never seen); a reaper drops
  expired sessions every second. Admission: REWARDBOX_SESSIONS_MAX open sessions and REWARDBOX_SESSIONS_MAX_MB of
  workspace bytes (snapshot plus delta, as last measured) in all; beyond, 429 with Retry-After.
- admission by time (service/wait_line.py): commands take the pool's sandboxes in arrival order, each expected to
  hold one for what commands held lately (at most its timeout_s); a command, or a new session, that would wait
  longer than REWARDBOX_MAX_WAIT_S for the commands queued ahead is refused at once (429, Retry-After) rather
  than left hanging; one admitted but not started within twice the bound (a flood slower than the estimate) too.

In distributed mode each worker runs one of these, served through Redis (service/distributed/sessions.py).

Settings: SessionSettings, from the service's Settings (REWARDBOX_SESSIONS_MAX, REWARDBOX_SESSIONS_MAX_MB,
REWARDBOX_SESSION_POOL_SIZE; service/config.py).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import math
import os
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from rewardbox.names import wire
from sandboxes import Limits, Result, SandboxPool, SessionJob, Status
from sandboxes.targets import DEFAULT_TARGET, SandboxTarget
from service.config import SessionSettings
from service.environments.models import EnvironmentRef
from service.environments.pools import EnvironmentPools, resolver
from service.errors import Overloaded
from service.models import ItemResult, RewardItem
from service.sessions.models import SessionLimits
from service.sessions.workspace import Node, PathError, Workspace, load_snapshot
from service.wait_line import WaitLine

log = logging.getLogger("rewardbox.sessions")

TAIL_CHARS = 2000  # of each command's stdout and stderr kept in the history
HISTORY_CAP = 500  # entries kept in a session's history (the oldest go first)
TOMBSTONES = 100_000  # ids of ended sessions remembered, so that they answer 410 rather than 404
SNAPSHOT_CACHE = 8  # parsed snapshots kept on the host
MAX_DELTA_BYTES = 40 << 20  # changed bytes a session may hold: each command's job carries them (inside/session_exec.py)
COMMANDS = "session"  # the one kind of work in a session pool's wait line


class PoolLine:
    """The commands waiting for one pool's sandboxes (its wait line) and the pool's slots, taken in arrival order."""

    def __init__(self, max_wait_s: float, capacity: int) -> None:
        self.line = WaitLine(max_wait_s, capacity)
        self.slots = asyncio.Semaphore(capacity)


class SessionGone(LookupError):
    """The session ended (deleted, expired, its worker died): 410; never existed: 404."""

    def __init__(self, message: str, status: int = 410) -> None:
        super().__init__(message)
        self.status = status


@dataclass(eq=False)
class Session:
    id: str
    repo_id: str
    workspace: Workspace
    limits: SessionLimits
    ttl_s: float
    created_at: float = field(default_factory=time.time)
    parent: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    bytes: int = 0  # workspace bytes (snapshot plus changes), as last measured
    inodes: int = 0
    execs: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    environment: EnvironmentRef | None = None  # where its commands run (and its reward grades); None: our image
    target: SandboxTarget = DEFAULT_TARGET

    @property
    def expires_at(self) -> float:
        return self.created_at + self.ttl_s

    def summary(self, owner: str) -> dict[str, Any]:
        now = time.time()
        return {"session_id": self.id, "repo_id": self.repo_id, "owner": owner, "parent": self.parent,
                "age_s": round(now - self.created_at, 3), "expires_in_s": round(self.expires_at - now, 3),
                "bytes": self.bytes, "inodes": self.inodes, "execs": self.execs}

    def remember(self, entry: dict[str, Any]) -> None:
        self.history.append({"at": round(time.time() - self.created_at, 3), **entry})
        del self.history[:-HISTORY_CAP]


class SessionMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.events = Counter("rewardbox_sessions", "Session events (created, forked, deleted, expired, rejected)",
                              ["event"], registry=registry)
        self.execs = Counter("rewardbox_session_execs", "Commands run in sessions, by status", ["status"],
                             registry=registry)
        self.rewards = Counter("rewardbox_session_rewards", "Session rewards, by status", ["status"],
                               registry=registry)
        self.open = Gauge("rewardbox_sessions_open", "Open sessions", registry=registry)
        self.bytes = Gauge("rewardbox_sessions_bytes", "Workspace bytes of open sessions", registry=registry)


Fetch = Callable[[str], Awaitable[bytes | None]]  # repo id -> normalized snapshot, None when not stored
Score = Callable[[Sequence[RewardItem]], Awaitable[list[ItemResult]]]


class SessionManager:
    def __init__(self, pool: SandboxPool, fetch: Fetch, score: Score, registry: CollectorRegistry,
                 settings: SessionSettings | None = None, owner: str = "embedded") -> None:
        self.pool, self.fetch, self.score = pool, fetch, score
        self.settings = settings or SessionSettings()
        self.owner = owner
        self.metrics = SessionMetrics(registry)
        self.sessions: dict[str, Session] = {}
        self.ended: OrderedDict[str, str] = OrderedDict()  # id -> why it ended
        self._snapshots: OrderedDict[str, dict[str, Node]] = OrderedDict()
        self._holders: dict[str, set[str]] = {}  # repo id -> sandboxes of the pool known to hold it
        self._reaper: asyncio.Task | None = None
        self._own_pool = False
        self.on_end: Callable[[str], None] | None = None  # distributed mode: the directory forgets the session
        self._pool_started = True
        self._pool_lock = asyncio.Lock()
        self._lines: dict[str, PoolLine] = {}  # by target key: the session pool's and each environment pool's
        # Sessions naming another environment run on that target's pool, started on first use (LRU within a budget).
        self.backend_name = getattr(getattr(pool, "backend", None), "name", "auto")
        self.environments: EnvironmentPools[SandboxPool] = EnvironmentPools(
            self.backend_name, lambda p, t: p, size=1, max_pools=self.settings.env_pools_max,
            memory_mb=self.settings.env_pools_memory_mb, max_jobs=self.settings.sandbox_max_jobs)

    @classmethod
    async def embedded(cls, backend: Any, repos: Any, score: Score, registry: CollectorRegistry,
                       settings: SessionSettings, pool: SandboxPool | None = None) -> SessionManager:
        """The manager of embedded mode: a session pool of its own (started with the first session, so that a
        service nobody opens sessions on runs no extra sandboxes), the repo store's snapshots, the executor's
        scoring (a worker passes none: in distributed mode the API grades)."""
        own = pool is None
        pool = pool or SandboxPool(backend, size=settings.pool_size, max_jobs=settings.sandbox_max_jobs,
                                   acquire_timeout_s=120.0)
        manager = cls(pool, repos.data, score, registry, settings)
        manager._own_pool = own
        manager._pool_started = not own
        await manager.start()
        return manager

    async def start(self) -> None:
        self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            await asyncio.gather(self._reaper, return_exceptions=True)
        for sid in list(self.sessions):
            self._end(sid, "the service stopped")
        if self._own_pool and self._pool_started:
            await self.pool.close()
        await self.environments.close()

    # -- life

    def get(self, sid: str) -> Session:
        session = self.sessions.get(sid)
        if session is not None and time.time() >= session.expires_at:
            self._end(sid, f"expired (ttl_s {session.ttl_s:g})", "expired")
            session = None
        if session is None:
            why = self.ended.get(sid)
            if why is None:
                raise SessionGone(f"session {sid[:80]} does not exist", 404)
            raise SessionGone(f"session {sid} has ended: {why}")
        return session

    def _end(self, sid: str, why: str, event: str = "deleted") -> None:
        if self.sessions.pop(sid, None) is not None:
            self.metrics.events.labels(event).inc()
        self.ended[sid] = why
        if self.on_end is not None:
            self.on_end(sid)
        while len(self.ended) > TOMBSTONES:
            self.ended.popitem(last=False)
        self._gauges()

    async def delete(self, sid: str) -> None:
        self.get(sid)
        self._end(sid, "deleted")

    async def list_open(self) -> list[dict[str, Any]]:
        self._sweep()
        return [s.summary(self.owner) for s in self.sessions.values()]

    def _sweep(self) -> None:
        now = time.time()
        for sid in [s.id for s in self.sessions.values() if now >= s.expires_at]:
            self.get_or_none(sid)

    def get_or_none(self, sid: str) -> Session | None:
        try:
            return self.get(sid)
        except SessionGone:
            return None

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self._sweep()

    def _gauges(self) -> None:
        self.metrics.open.set(len(self.sessions))
        self.metrics.bytes.set(self.total_bytes())

    def _line(self, target: SandboxTarget) -> PoolLine:
        line = self._lines.get(target.key)
        if line is None:  # an environment's pool holds one sandbox (EnvironmentPools above)
            capacity = (getattr(self.pool, "size", None) or 1) if target.is_default else 1  # None: a unit test's
            line = self._lines[target.key] = PoolLine(self.settings.max_wait_s, capacity)
        return line

    def _admit_wait(self, target: SandboxTarget) -> None:
        """Overloaded when a command would wait past the bound for those queued ahead (a new session's first
        command would: refused at once rather than let in to wait)."""
        self._line(target).line.join(COMMANDS, 0.0, 0, fifo=True).leave()

    def total_bytes(self) -> int:
        return sum(s.bytes for s in self.sessions.values())

    def _admit(self, n: int, nbytes: int) -> None:
        s = self.settings
        if len(self.sessions) + n > s.max_open:
            self.metrics.events.labels("rejected").inc(n)
            raise Overloaded(f"{len(self.sessions)} sessions open, at most {s.max_open} (REWARDBOX_SESSIONS_MAX): "
                             "delete some or retry later", retry_after_s=5)
        if self.total_bytes() + nbytes > s.max_bytes:
            self.metrics.events.labels("rejected").inc(n)
            raise Overloaded(f"open sessions hold {self.total_bytes()} workspace bytes; {nbytes} more would pass "
                             f"{s.max_bytes} (REWARDBOX_SESSIONS_MAX_MB)", retry_after_s=5)

    async def _snapshot(self, repo_id: str) -> dict[str, Node] | None:
        snap = self._snapshots.get(repo_id)
        if snap is None:
            data = await self.fetch(repo_id)
            if data is None:
                return None
            snap = await asyncio.to_thread(load_snapshot, data)
            self._snapshots[repo_id] = snap
            while len(self._snapshots) > SNAPSHOT_CACHE:
                self._snapshots.popitem(last=False)
        self._snapshots.move_to_end(repo_id)
        return snap

    async def create(self, repo_id: str, ttl_s: float, limits: SessionLimits,
                     environment: EnvironmentRef | None = None) -> Session:
        """repo_id names a stored snapshot (routes store an inline archive first); None when it is not stored.
        environment: where its commands run (resolved here: EnvironmentProblem, a 4xx, when it cannot be used)."""
        target = resolver(self.backend_name).resolve(environment)
        try:
            self._admit_wait(target)
        except Overloaded:
            self.metrics.events.labels("rejected").inc()
            raise
        snap = await self._snapshot(repo_id)
        if snap is None:
            raise PathError(f"repo.id: repository {repo_id} is not stored", 422)
        nbytes = sum(len(n.data) for n in snap.values())
        self._admit(1, nbytes)
        async with self._pool_lock:
            if not self._pool_started:
                await self.pool.start()
                self._pool_started = True
        self._admit(1, nbytes)  # others may have come in meanwhile
        session = Session(secrets.token_hex(16), repo_id, Workspace.of(snap), limits, ttl_s, bytes=nbytes,
                          inodes=len(snap), environment=environment, target=target)
        self.sessions[session.id] = session
        self.metrics.events.labels("created").inc()
        self._gauges()
        return session

    async def fork(self, sid: str, n: int) -> list[Session]:
        parent = self.get(sid)
        async with parent.lock:  # a copy of a settled state, never of one a command is changing
            self.get(sid)
            self._admit(n, parent.bytes * n)
            children = []
            for _ in range(n):
                child = Session(secrets.token_hex(16), parent.repo_id, parent.workspace.fork(), parent.limits,
                                parent.ttl_s, parent=parent.id, history=list(parent.history), bytes=parent.bytes,
                                inodes=parent.inodes, environment=parent.environment, target=parent.target)
                self.sessions[child.id] = child
                children.append(child)
        self.metrics.events.labels("forked").inc(n)
        self._gauges()
        return children

    # -- files

    async def read(self, sid: str, path: str) -> Node:
        return self.get(sid).workspace.read(path)

    async def write(self, sid: str, path: str, content: str) -> None:
        session = self.get(sid)
        async with session.lock:
            self.get(sid)
            data = content.encode()
            old = session.workspace.node(path) if path else None
            grown = len(data) - (len(old.data) if old is not None and old.kind == "f" else 0)
            if session.workspace.size() + len(data) > MAX_DELTA_BYTES:
                raise PathError(f"content: the session's changes would pass {MAX_DELTA_BYTES >> 20} MiB", 413)
            if session.bytes + grown > session.limits.workspace_mb * (1 << 20):
                raise PathError(f"content: the workspace would hold more than {session.limits.workspace_mb:g} MB",
                                413)
            session.workspace.write(path, data)
            session.bytes += grown
            session.remember({"write": path, "bytes": len(content.encode())})
        self._gauges()

    async def diff(self, sid: str) -> tuple[str, list[str]]:
        return self.get(sid).workspace.diff()

    # -- commands

    async def exec(self, sid: str, command: str, timeout_s: float, stdin: str | None) -> dict[str, Any]:
        session = self.get(sid)
        pool_line = self._line(session.target)
        hold = pool_line.line.hold(COMMANDS)
        # In line from arrival (the session's lock included), in one step with the check: refused at once.
        try:
            place = pool_line.line.join(COMMANDS, hold.seconds(1, timeout_s), 1, fifo=True)
        except Overloaded:
            self.metrics.execs.labels("refused").inc()
            raise
        with place:
            async with session.lock:
                self.get(sid)
                lim = session.limits
                limits = Limits(wall_s=timeout_s, total_s=timeout_s + 30.0, cpu_s=timeout_s,
                                memory_mb=lim.memory_mb, output_bytes=lim.output_bytes, nproc=lim.processes,
                                nofile=256, file_size_mb=256)
                job = {"delta": session.workspace.delta, "command": command, "stdin": stdin or "",
                       "max_bytes": int(lim.workspace_mb * (1 << 20)), "max_inodes": lim.inodes,
                       **session.workspace.state, "wheels": session.target.wheels}
                if not self.settings.git:
                    job["no_git"] = True
                if session.target.python != DEFAULT_TARGET.python:  # the environment's interpreter first on PATH
                    job["path_first"] = os.path.dirname(session.target.python)
                start_by = 2 * self.settings.max_wait_s  # the backstop for a flood slower than the estimate
                try:
                    async with asyncio.timeout(start_by):
                        await pool_line.slots.acquire()
                except TimeoutError:
                    self.metrics.execs.labels("refused").inc()
                    raise Overloaded(f"not started within {start_by:g}s (twice REWARDBOX_MAX_WAIT_S)",
                                     retry_after_s=max(1, math.ceil(hold.seconds(1, timeout_s)))) from None
                place.leave()
                started = time.monotonic()
                try:
                    result = await self._run(session.repo_id, job, limits, session.target)
                finally:
                    pool_line.slots.release()
                    hold.observe(1, time.monotonic() - started)
                event = next((e for e in result.events if e.get("event") == "session"), {})
                answer = {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
                          "status": str(result.status), "wall_ms": round(result.wall_ms, 3),
                          "truncated": result.truncated}
                if result.status == Status.SANDBOX_ERROR:
                    answer["error"] = result.error or "sandbox error"
                elif "workspace_limit" in event:
                    answer["status"], answer["error"] = str(Status.OUTPUT_LIMIT), event["workspace_limit"]
                elif "delta" in event and sid in self.sessions:
                    session.workspace.delta = event["delta"]
                    # .git and the pip site folder: carried to the next command and to forks, never graded
                    session.workspace.state = {k: event.get(k) or {} for k in ("git", "site")}
                    session.bytes, session.inodes = int(event.get("bytes") or 0), int(event.get("inodes") or 0)
                elif result.error:
                    answer["error"] = result.error
                session.execs += 1
                session.remember({"command": command, "status": answer["status"], "exit_code": result.exit_code,
                                  "wall_ms": answer["wall_ms"], "stdout": result.stdout[-TAIL_CHARS:],
                                  "stderr": result.stderr[-TAIL_CHARS:]})
        self.metrics.execs.labels(answer["status"]).inc()
        self._gauges()
        return answer

    async def _run(self, repo_id: str, job: dict, limits: Limits, target: SandboxTarget = DEFAULT_TARGET
                   ) -> Result:
        """The session job on the session pool (or its environment's); the snapshot travels until every sandbox
        holds it (as repo items do, graders/repo.py), and again to a sandbox that answers repo_missing."""
        if target.is_default:
            return await self._run_on(self.pool, repo_id, repo_id, job, limits)
        async with self.environments.use(target) as pool:
            return await self._run_on(pool, f"{target.key}\0{repo_id}", repo_id, job, limits)

    async def _run_on(self, pool: SandboxPool, held_as: str, repo_id: str, job: dict, limits: Limits) -> Result:
        holders = self._holders.setdefault(held_as, set())  # held_as: the repo id, per pool
        result = await self._run_once(pool, repo_id, job, limits, len(holders) < pool.size)
        if result.status == Status.OK and any(e.get("event") == "repo_missing" for e in result.events):
            holders.discard(result.sandbox_id or "")
            result = await self._run_once(pool, repo_id, job, limits, True)
        if result.status != Status.SANDBOX_ERROR and result.sandbox_id:
            holders.add(result.sandbox_id)
        return result

    async def _run_once(self, pool: SandboxPool, repo_id: str, job: dict, limits: Limits, with_data: bool
                        ) -> Result:
        repo: dict[str, str] = {"id": repo_id}
        if with_data:
            data = await self.fetch(repo_id)
            if data is None:
                return Result.infra(f"repository {repo_id} is no longer stored (evicted) while a session uses it")
            repo["archive_b64"] = base64.b64encode(data).decode()
        return await pool.run(SessionJob(session={**job, "repo": repo}, limits=limits))

    # -- reward

    async def submission(self, sid: str) -> Submission:
        """What a reward grades: the diff and the history as they are now (no command is changing them)."""
        session = self.get(sid)
        async with session.lock:
            self.get(sid)
            patch, skipped = session.workspace.diff()
            return Submission(session.id, session.repo_id, patch, skipped, list(session.history), session.parent,
                              session.execs, session.environment)

    async def reward(self, sid: str, tests: Any, profile: str, client_id: str | None) -> ItemResult:
        return await grade(await self.submission(sid), tests, profile, client_id, self.score, self.metrics)


@dataclass(frozen=True)
class Submission:
    session_id: str
    repo_id: str
    patch: str
    not_in_patch: list[str]
    history: list[dict[str, Any]]
    parent: str | None
    commands: int
    environment: EnvironmentRef | None = None


async def grade(sub: Submission, tests: Any, profile: str, client_id: str | None, score: Score,
                metrics: SessionMetrics) -> ItemResult:
    """The submission as a repo item whose patch is the session's diff, scored like any item (so stored as a
    rollout, its metadata carrying the session's history)."""
    skipped = [wire(p) for p in sub.not_in_patch]  # names a program made: git-quoted when not UTF-8
    item = RewardItem.model_validate({
        "id": client_id, "language": "python", "repo": {"id": sub.repo_id}, "patch": sub.patch,
        "tests": tests.model_dump(), "profile": profile,
        **({"environment": sub.environment.model_dump(exclude_none=True)} if sub.environment else {}),
        "metadata": {"session": {"id": sub.session_id, "parent": sub.parent, "history": sub.history,
                                 "not_in_patch": skipped}}})
    result = (await score([item]))[0]
    result.details["session"] = {"id": sub.session_id, "commands": sub.commands, "not_in_patch": skipped}
    metrics.rewards.labels(result.status).inc()
    return result
